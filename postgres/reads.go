package postgres

import (
	"context"
	"runtime"
	"slices"
	"sync"

	"github.com/weir-gateway/weir"
)

// Shared reads: TaskGet comes many times a second while tasks drain (a
// task's step reads its task as it starts, and on a fleet before each
// poll of its upstream job), each a round trip of its own on a pooled
// connection. The reads that come while one is under way are sent
// together, as one query of all their ids (TaskGetMany's), the way
// batch.go sends writes: the caller whose read finds fewer than the
// limit of batches under way sends its batch; the others queue, and a
// batch's sender, on returning, hands the queue to the first caller
// waiting. A read is sent after its caller queued it, so it sees every
// commit that returned before TaskGet was called, as a query of its own
// does.

// taskReads sends the TaskGet reads queued on it as shared queries, at
// most limit at a time (at least one).
type taskReads struct {
	db    *DB
	limit int
	mu    sync.Mutex
	// queue holds the reads waiting for a batch; running counts the
	// callers sending one, or told to.
	queue   []*queuedRead
	running int
	batches int // batches sent, for tests
	// queued, if set (tests), is called with the queue's length after
	// each read queues.
	queued func(n int)
}

// queuedRead is one TaskGet: id's task or its error, set before lead is
// sent false.
type queuedRead struct {
	id   string
	task weir.Task
	err  error
	// lead is sent true when this read's caller is to send the next
	// batch (the read is then out of the queue), false when its batch
	// has ended.
	lead chan bool
}

// get reads task id in a query shared with the reads queued meanwhile;
// an id not stored is weir.ErrNotFound. A context done before the read is
// queued is returned as it is; once queued, the read runs whatever
// becomes of ctx.
func (b *taskReads) get(ctx context.Context, id string) (weir.Task, error) {
	if err := ctx.Err(); err != nil {
		return weir.Task{}, err
	}
	r := &queuedRead{id: id, lead: make(chan bool, 1)}
	b.mu.Lock()
	lead := b.running < max(b.limit, 1)
	n := len(b.queue)
	if lead {
		b.running++
	} else {
		b.queue = append(b.queue, r)
		n++
	}
	b.mu.Unlock()
	if b.queued != nil {
		b.queued(n)
	}
	if !lead {
		lead = <-r.lead
	}
	if lead {
		b.runBatch(context.WithoutCancel(ctx), r)
	}
	return r.task, r.err
}

// runBatch sends, as self's caller, one query of self's read and the
// first ones queued, sets each one's outcome, and hands the queue on. It
// first yields the processor once, so that the readers already runnable
// queue their reads into this batch.
func (b *taskReads) runBatch(ctx context.Context, self *queuedRead) {
	runtime.Gosched()
	b.mu.Lock()
	n := min(len(b.queue), batchMax-1)
	batch := append([]*queuedRead{self}, b.queue[:n]...)
	b.queue = b.queue[n:]
	b.batches++
	b.mu.Unlock()
	b.send(ctx, batch)
	for _, r := range batch[1:] {
		r.lead <- false
	}
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.running--
		b.mu.Unlock()
		return
	}
	next := b.queue[0]
	b.queue = b.queue[1:]
	b.mu.Unlock()
	next.lead <- true
}

// send reads batch's tasks in one query and sets each read's outcome.
func (b *taskReads) send(ctx context.Context, batch []*queuedRead) {
	if len(batch) == 1 {
		batch[0].task, batch[0].err = scanTask(b.db.pool.QueryRow(ctx, taskGetSQL, batch[0].id))
		return
	}
	ids := make([]string, len(batch))
	for i, r := range batch {
		ids[i] = r.id
	}
	tasks, err := b.db.TaskGetMany(ctx, ids)
	byID := make(map[string]int, len(tasks))
	for i := range tasks {
		byID[tasks[i].ID] = i
	}
	taken := make([]bool, len(tasks))
	for _, r := range batch {
		i, ok := byID[r.id]
		switch {
		case err != nil:
			r.err = err
		case !ok:
			r.err = weir.ErrNotFound
		case taken[i]:
			// A task read twice in the batch: each caller has slices of
			// its own, as from a query of its own.
			r.task = tasks[i]
			r.task.Input, r.task.Result = slices.Clone(r.task.Input), slices.Clone(r.task.Result)
			r.task.CallbackEvents = slices.Clone(r.task.CallbackEvents)
		default:
			r.task, taken[i] = tasks[i], true
		}
	}
}
