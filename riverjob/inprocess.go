package riverjob

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// InProcess wraps d, River's driver on a database that only this process
// writes (the embedded SQLite store: weir serve locks its file), so that
// River's notifications travel in the process instead of through the
// database. River's SQLite driver sends a notification by writing a row
// to an outbox table and hears one by polling that table every 50ms;
// the wrapper hands each notification to this process's listeners at
// once and polls nothing, so an insert wakes River's producers at once
// and an idle process is not woken to look.
//
// A notification is sent inside the transaction that inserts its jobs,
// before it commits; it still cannot be acted on too early when, as on
// the embedded store, River's driver has a single connection: the fetch
// it prompts waits for that connection until the transaction has ended.
// Notifications are not kept: a listener hears those sent while it
// listens. d's schema is ignored; every River client on d hears every
// notification sent through it.
func InProcess(d riverdriver.Driver[*sql.Tx]) riverdriver.Driver[*sql.Tx] {
	return &inProcessDriver{Driver: d, hub: &hub{}}
}

// Waking is what a driver from InProcess also is: its producers are
// woken in the process, so a wake costs nothing and needs no database.
type Waking interface {
	// WakesInProcess reports that notifications travel in the process.
	WakesInProcess() bool
}

type inProcessDriver struct {
	riverdriver.Driver[*sql.Tx]
	hub *hub
}

var (
	_ riverdriver.Driver[*sql.Tx] = (*inProcessDriver)(nil)
	_ Waking                      = (*inProcessDriver)(nil)
)

func (d *inProcessDriver) WakesInProcess() bool { return true }

func (d *inProcessDriver) GetExecutor() riverdriver.Executor {
	return &inProcessExecutor{Executor: d.Driver.GetExecutor(), hub: d.hub}
}

func (d *inProcessDriver) GetListener(p *riverdriver.GetListenenerParams) riverdriver.Listener {
	return &listener{hub: d.hub, schema: p.Schema}
}

func (d *inProcessDriver) UnwrapExecutor(tx *sql.Tx) riverdriver.ExecutorTx {
	return &inProcessExecutorTx{ExecutorTx: d.Driver.UnwrapExecutor(tx), hub: d.hub}
}

func (d *inProcessDriver) UnwrapTx(execTx riverdriver.ExecutorTx) *sql.Tx {
	if w, ok := execTx.(*inProcessExecutorTx); ok {
		execTx = w.ExecutorTx
	}
	return d.Driver.UnwrapTx(execTx)
}

// inProcessExecutor is River's executor with its notifications sent to
// the hub; inProcessExecutorTx is the same for a transaction, whose
// nested transactions are wrapped in turn.
type inProcessExecutor struct {
	riverdriver.Executor
	hub *hub
}

func (e *inProcessExecutor) Begin(ctx context.Context) (riverdriver.ExecutorTx, error) {
	tx, err := e.Executor.Begin(ctx)
	return wrapTx(e.hub, tx, err)
}

func (e *inProcessExecutor) NotifyMany(_ context.Context, p *riverdriver.NotifyManyParams) error {
	e.hub.notify(p.Topic, p.Payload...)
	return nil
}

func (e *inProcessExecutor) JobCancel(ctx context.Context, p *riverdriver.JobCancelParams) (*rivertype.JobRow, error) {
	return jobCancel(ctx, e.Executor, e.hub, p)
}

type inProcessExecutorTx struct {
	riverdriver.ExecutorTx
	hub *hub
}

func (t *inProcessExecutorTx) Begin(ctx context.Context) (riverdriver.ExecutorTx, error) {
	tx, err := t.ExecutorTx.Begin(ctx)
	return wrapTx(t.hub, tx, err)
}

func (t *inProcessExecutorTx) NotifyMany(_ context.Context, p *riverdriver.NotifyManyParams) error {
	t.hub.notify(p.Topic, p.Payload...)
	return nil
}

func (t *inProcessExecutorTx) JobCancel(ctx context.Context, p *riverdriver.JobCancelParams) (*rivertype.JobRow, error) {
	return jobCancel(ctx, t.ExecutorTx, t.hub, p)
}

func wrapTx(h *hub, tx riverdriver.ExecutorTx, err error) (riverdriver.ExecutorTx, error) {
	if err != nil {
		return nil, err
	}
	return &inProcessExecutorTx{ExecutorTx: tx, hub: h}, nil
}

// jobCancel is River's JobCancel with its control notification (which
// River's SQLite driver writes to the outbox itself) sent to the hub.
func jobCancel(ctx context.Context, e riverdriver.Executor, h *hub, p *riverdriver.JobCancelParams) (*rivertype.JobRow, error) {
	topic := p.ControlTopic
	inner := *p
	inner.ControlTopic = ""
	job, err := e.JobCancel(ctx, &inner)
	if err != nil || topic == "" || job == nil {
		return job, err
	}
	// River's control payload, as its SQLite driver writes it.
	h.notify(topic, fmt.Sprintf(`{"action":"cancel","job_id":%d,"queue":%q}`, job.ID, job.Queue))
	return job, nil
}

// hub hands each notification to every connected listener that listens
// to its topic.
type hub struct {
	mu        sync.Mutex
	listeners map[*listener]struct{}
}

func (h *hub) notify(topic string, payloads ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		l.deliver(topic, payloads)
	}
}

func (h *hub) add(l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listeners == nil {
		h.listeners = make(map[*listener]struct{})
	}
	h.listeners[l] = struct{}{}
}

func (h *hub) remove(l *listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.listeners, l)
}

// maxPending bounds the notifications a listener keeps until they are
// waited for; past it the newest are dropped (River treats a notice as a
// hint: its producers poll as well).
const maxPending = 4096

// listener is River's listener on the hub.
type listener struct {
	hub    *hub
	schema string

	mu        sync.Mutex
	connected bool
	topics    map[string]bool
	pending   []*riverdriver.Notification
	// ready has a token while pending is not empty.
	ready chan struct{}
}

var _ riverdriver.Listener = (*listener)(nil)

var errNotConnected = errors.New("riverjob: listener is not connected")

func (l *listener) Connect(context.Context) error {
	l.mu.Lock()
	if l.connected {
		l.mu.Unlock()
		return errors.New("riverjob: listener already connected")
	}
	l.connected = true
	l.topics = make(map[string]bool)
	l.pending = nil
	l.ready = make(chan struct{}, 1)
	l.mu.Unlock()
	l.hub.add(l)
	return nil
}

func (l *listener) Close(context.Context) error {
	l.hub.remove(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connected = false
	l.topics = nil
	l.pending = nil
	return nil
}

func (l *listener) Listen(_ context.Context, topic string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected {
		return errNotConnected
	}
	l.topics[topic] = true
	return nil
}

func (l *listener) Unlisten(_ context.Context, topic string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected {
		return errNotConnected
	}
	delete(l.topics, topic)
	return nil
}

func (l *listener) Ping(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected {
		return errNotConnected
	}
	return nil
}

func (l *listener) Schema() string { return l.schema }

// SetAfterConnectExec is for River's tests of drivers on a database; the
// hub runs no SQL.
func (l *listener) SetAfterConnectExec(string) {}

// WaitForNotification returns the next notification on a topic listened
// to, waiting for one until ctx ends.
func (l *listener) WaitForNotification(ctx context.Context) (*riverdriver.Notification, error) {
	for {
		l.mu.Lock()
		if !l.connected {
			l.mu.Unlock()
			return nil, errNotConnected
		}
		for len(l.pending) > 0 {
			n := l.pending[0]
			l.pending[0] = nil
			l.pending = l.pending[1:]
			// Unlistened since it was delivered?
			if l.topics[n.Topic] {
				l.mu.Unlock()
				return n, nil
			}
		}
		ready := l.ready
		l.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (l *listener) deliver(topic string, payloads []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.connected || !l.topics[topic] {
		return
	}
	for _, p := range payloads {
		if len(l.pending) >= maxPending {
			break
		}
		l.pending = append(l.pending, &riverdriver.Notification{Topic: topic, Payload: p})
	}
	select {
	case l.ready <- struct{}{}:
	default:
	}
}
