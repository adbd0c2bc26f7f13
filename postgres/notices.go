package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Task notices sent together share one statement: NotifyTask queues its
// notice, and the notices queued while a statement is out go in the next
// one, each a row of one array (notifyTasksSQL). The first notice after a
// pause is sent at once; none waits on a timer. PostgreSQL commits the
// statement's notices at once, in the array's order, and delivers a notice
// that repeats another of the same transaction (the same event and task)
// once, which is all a listener needs of it.
//
// The statements are sent by a goroutine that runs while notices are
// queued, not by a caller: a caller whose context ends returns at once,
// and its notice and the others of its statement are sent all the same.
// The shared writes of batch.go (stmtBatcher) are sent by their callers,
// many statements in one round trip; notices need neither, being one
// statement whatever their number.

// notifyTasksSQL sends the task notices of payloads $2, in order, on
// channel $1.
const notifyTasksSQL = `SELECT count(pg_notify($1, p)) FROM unnest($2::text[]) AS p`

// noticesMax bounds the notices one statement sends (each under 8000
// bytes: maxNotifyPayload).
const noticesMax = 1024

// noticeSender sends the task notices queued on it, those queued while a
// statement is out together in the next.
type noticeSender struct {
	pool *pgxpool.Pool

	mu sync.Mutex
	// channel is the schema's task channel, looked up by the first
	// statement (taskChannelSQL): a catalog lookup, once.
	channel string
	// queue holds the notices waiting for a statement; sending says the
	// goroutine that sends them runs.
	queue      []*pendingNotice
	sending    bool
	statements int // statements sent, for tests
	// queued, if set (tests), is called with the queue's length after
	// each notice queues.
	queued func(n int)
}

// pendingNotice is one notice: its payload, the context of its caller,
// and err, its outcome, set before done is closed.
type pendingNotice struct {
	ctx     context.Context
	payload string
	err     error
	done    chan struct{}
}

// send sends payload on the schema's task channel, in a statement shared
// with the notices queued meanwhile, and returns the statement's error.
// When ctx ends first it returns ctx's error at once; the notice may
// still be sent.
func (ns *noticeSender) send(ctx context.Context, payload string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n := &pendingNotice{ctx: ctx, payload: payload, done: make(chan struct{})}
	ns.mu.Lock()
	ns.queue = append(ns.queue, n)
	start := !ns.sending
	ns.sending = true
	queued := len(ns.queue)
	ns.mu.Unlock()
	if ns.queued != nil {
		ns.queued(queued)
	}
	if start {
		go ns.run()
	}
	select {
	case <-n.done:
		return n.err
	case <-ctx.Done():
		select {
		case <-n.done:
			return n.err
		default:
			return ctx.Err()
		}
	}
}

// run sends the queued notices, as many as a statement takes at a time,
// until none are left. The statement's callers are answered once the
// sender knows whether it goes on: a caller that returns finds it idle
// unless notices were queued meanwhile.
func (ns *noticeSender) run() {
	ns.mu.Lock()
	batch := ns.takeLocked()
	ns.mu.Unlock()
	for batch != nil {
		err := ns.notify(batch)
		ns.mu.Lock()
		next := ns.takeLocked()
		ns.mu.Unlock()
		for _, n := range batch {
			n.err = err
			close(n.done)
		}
		batch = next
	}
}

// takeLocked takes the next statement's notices off the queue, as many
// as a statement takes; nil, and the sender is idle, when none are
// queued.
func (ns *noticeSender) takeLocked() []*pendingNotice {
	if len(ns.queue) == 0 {
		ns.sending = false
		return nil
	}
	batch := ns.queue
	if len(batch) > noticesMax {
		batch = batch[:noticesMax:noticesMax]
		ns.queue = append([]*pendingNotice(nil), ns.queue[noticesMax:]...)
	} else {
		ns.queue = nil
	}
	ns.statements++
	return batch
}

// notify sends batch's notices in one statement.
func (ns *noticeSender) notify(batch []*pendingNotice) error {
	ctx, cancel := statementContext(batch)
	defer cancel()
	ns.mu.Lock()
	channel := ns.channel
	ns.mu.Unlock()
	if channel == "" {
		if err := ns.pool.QueryRow(ctx, taskChannelSQL).Scan(&channel); err != nil {
			return fmt.Errorf("name the channel: %w", err)
		}
		ns.mu.Lock()
		ns.channel = channel
		ns.mu.Unlock()
	}
	payloads := make([]string, len(batch))
	for i, n := range batch {
		payloads[i] = n.payload
	}
	_, err := ns.pool.Exec(ctx, notifyTasksSQL, channel, payloads)
	return err
}

// statementContext is the context of the statement that sends batch: the
// values of its first caller's context, no cancel (a caller that leaves
// takes no other's notice with it), and the latest of the callers'
// deadlines if each has one.
func statementContext(batch []*pendingNotice) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(batch[0].ctx)
	latest, ok := batch[0].ctx.Deadline()
	for _, n := range batch[1:] {
		d, has := n.ctx.Deadline()
		if !has || !ok {
			ok = false
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, latest)
}
