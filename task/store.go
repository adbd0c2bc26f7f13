package task

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/riverjob"
)

// Store is what the service needs of storage, over the store's
// transaction type TTx (*sql.Tx for SQLite, pgx.Tx for PostgreSQL): tasks;
// a transaction in which a task changes and River's jobs are inserted, so
// that both commit or neither; River's driver for the same database; and
// the upkeep of River's tables there.
type Store[TTx any] interface {
	weir.TaskStore
	// InTx runs fn in a transaction and commits it if fn returns nil.
	InTx(ctx context.Context, fn func(tx TTx) error) error
	// TaskUpdateTx is TaskUpdate inside tx.
	TaskUpdateTx(ctx context.Context, tx TTx, p *weir.TaskUpdateParams) (bool, error)
	// RiverDriver is River's driver on the database InTx's transactions
	// are on.
	RiverDriver() riverdriver.Driver[TTx]
	// JobReclaimRunning makes every job of the given kinds marked running
	// available at once, recording the reclaim in its errors, and returns
	// how many it changed. Start calls it, before River starts, only when
	// Config.SoleRunner says no other process runs the store's jobs.
	JobReclaimRunning(ctx context.Context, kinds []string) (int, error)
}

// GroupCommitter is what a store may also do, over its transaction type
// TTx: run a write in a transaction that concurrent writers share, one
// commit for many (SQLite's store). InGroupTx is InTx's equivalent;
// inside fn, statements take a context without cancel.
type GroupCommitter[TTx any] interface {
	InGroupTx(ctx context.Context, fn func(tx TTx) error) error
}

// ManyReader is what a store may also do: read many tasks in one
// query (PostgreSQL's store), which the fleet leader's ledger does for
// the tasks of a batch of notices. TaskGetMany returns the tasks of ids
// that are stored, deleted ones too, in any order.
type ManyReader interface {
	TaskGetMany(ctx context.Context, ids []string) ([]weir.Task, error)
}

// StateLister is what a store may also do (both stores): list tasks as
// TaskList does, each as its Seq, id and status alone. The fleet
// leader's ledger polls every task that has not ended so, and reads in
// full only those it has to act on.
type StateLister interface {
	TaskStateList(ctx context.Context, f weir.TaskFilter) ([]weir.TaskState, error)
}

// ManyUpdater is what a store may also do, over its transaction type
// TTx: apply many task updates in one transaction at the cost of one
// round trip (PostgreSQL's store pipelines them), which the dispatcher's
// commits of admissions do. TaskUpdateManyTx is TaskUpdateTx for each of
// ps, in order; applied[i] is ps[i]'s. Its error is the first update's
// that failed, and the transaction then rolls back.
type ManyUpdater[TTx any] interface {
	TaskUpdateManyTx(ctx context.Context, tx TTx, ps []weir.TaskUpdateParams) (applied []bool, err error)
}

// FencedUpdater is what a store that is a Fencer and a ManyUpdater may
// also do, over its transaction type TTx: fence a commit of admissions
// and apply its updates at the cost of one round trip (PostgreSQL's
// store pipelines them). TaskUpdateManyFencedTx is TermFenceTx and then,
// if the term is held, TaskUpdateManyTx; held false says it has passed,
// nothing was updated, and the transaction rolls back.
type FencedUpdater[TTx any] interface {
	TaskUpdateManyFencedTx(ctx context.Context, tx TTx, leader string, epoch uint64, ps []weir.TaskUpdateParams) (held bool, applied []bool, err error)
}

// Notifier is what a store shared by several replicas also does, for the
// service to run in a fleet (Config.Fleet): tell every replica that a
// task changed. PostgreSQL's store does it with NOTIFY.
type Notifier interface {
	// NotifyTask tells every replica listening (ListenTasks) that task
	// id changed; event, which is not empty, says how, in the service's
	// words, which the store passes on as they are. A notice may be lost
	// (a listener not connected then): the service polls as well.
	NotifyTask(ctx context.Context, event, id string) error
	// ListenTasks calls f with each notice sent (on the same database
	// and schema) until ctx ends, reconnecting when its connection is
	// lost. After each connection, the first included, it calls f("",
	// ""): notices sent while it was not listening are lost, and the
	// service reads everything again. f must not block.
	ListenTasks(ctx context.Context, f func(event, id string)) error
}

// JobReclaimer is what a store shared by several replicas also does, for
// the service to run in a fleet: take back the jobs of a replica that is
// gone at once, rather than after River's RescueAfter.
type JobReclaimer interface {
	// JobReclaimAttemptedBy makes every job of the given kinds marked
	// running whose latest attempt is River's client client's
	// (river.Config.ID) available at once, and returns how many it
	// changed; a job fetched since by another client is left alone.
	JobReclaimAttemptedBy(ctx context.Context, client string, kinds []string) (int, error)
}

// BindingPurger is what a store that keeps response bindings
// (weir.ResponseStore) also does, for the purge job to remove those that
// expired: both stores do.
type BindingPurger interface {
	ResponseBindingsPurge(ctx context.Context, p *weir.ResponseBindingsPurgeParams) (int, error)
}

// Fencer is what a store shared by a fleet's replicas also does, over
// its transaction type TTx: fence the commits of admissions by the fleet
// term they were decided in. PostgreSQL's store does it by locking the
// term's row (postgres.DB.TermFenceTx).
type Fencer[TTx any] interface {
	// TermFenceTx checks, inside tx, that epoch is still the current
	// unexpired fleet term and led by leader, and holds it so until tx
	// ends: no new term begins before tx commits. It reports false when
	// the term has passed (tx must roll back); an error is a failed
	// check, and the commit is tried again.
	TermFenceTx(ctx context.Context, tx TTx, leader string, epoch uint64) (bool, error)
}

// jobStore is a Store and River's client on its driver, seen without their
// transaction type: this file is the only code in the package that names
// TTx, so the Service and its workers are not generic, and neither is
// what holds a Service.
type jobStore interface {
	// Start and Stop run River's client, and follow its events with the
	// store's waker (riverjob.Follow) while it runs; with a sleeper, Start
	// runs it only while it has work (sleep).
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	// sleep makes Start run the client only while it has work, stopping
	// it once it has had none for after (riverjob.Sleeper, woken by every
	// commit that inserts jobs); waking it at least every maxSleep. Call
	// it before Start, and only where this process is the only writer of
	// the store's jobs.
	sleep(after, maxSleep time.Duration, c clock.Clock, logger *slog.Logger) error
	migrate(ctx context.Context) error
	reclaim(ctx context.Context, kinds []string) (int, error)
	// inTx runs fn in a store transaction (Store.InTx).
	inTx(ctx context.Context, fn func(tx txn) error) error
	// inGroupTx is inTx in a transaction concurrent callers share, on a
	// store that is a GroupCommitter (InTx on others); fn's statements
	// must not end with ctx, which inGroupTx gives it without cancel.
	inGroupTx(ctx context.Context, fn func(ctx context.Context, tx txn) error) error
	// fences says the store is a Fencer.
	fences() bool
	// groupCommits says the store is a GroupCommitter: its writers'
	// transactions commit together, not side by side.
	groupCommits() bool
	// JobList is River's client's.
	JobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
}

// txn is one store transaction: a task's change and the jobs inserted
// with it.
type txn interface {
	taskUpdate(ctx context.Context, p *weir.TaskUpdateParams) (bool, error)
	// taskUpdateMany is taskUpdate for each of ps, in order, in one round
	// trip where the store can (ManyUpdater).
	taskUpdateMany(ctx context.Context, ps []weir.TaskUpdateParams) ([]bool, error)
	jobInsert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error
	// jobInsertMany inserts jobs in one statement.
	jobInsertMany(ctx context.Context, jobs []river.InsertManyParams) error
	// fence is the store's TermFenceTx in this transaction; a store that
	// is not a Fencer fences nothing (true).
	fence(ctx context.Context, leader string, epoch uint64) (bool, error)
	// fencedUpdateMany is fence and then, if held, taskUpdateMany, in one
	// round trip where the store can (FencedUpdater).
	fencedUpdateMany(ctx context.Context, leader string, epoch uint64, ps []weir.TaskUpdateParams) (held bool, applied []bool, err error)
}

type riverStore[TTx any] struct {
	*river.Client[TTx]
	store  Store[TTx]
	fencer Fencer[TTx] // nil if the store is not one
	// waker wakes, after each commit, the queues of the jobs the
	// transaction inserted, if wakeCommits: River's own notice of an
	// insert is held back when another was sent for the queue within its
	// FetchCooldown, which a fetch poll of a second makes slow to find.
	// Set where the wake costs nothing (riverjob.WakesInProcess).
	waker       *riverjob.Waker
	wakeCommits bool
	// sleeper runs the client only while it has work (sleep); nil: from
	// Start to Stop.
	sleeper *riverjob.Sleeper

	// unfollow ends the following of the client's current run.
	followMu sync.Mutex
	unfollow func()
}

func newRiverStore[TTx any](store Store[TTx], waker *riverjob.Waker, wakeCommits bool, cfg *river.Config) (*riverStore[TTx], error) {
	client, err := river.NewClient(store.RiverDriver(), cfg)
	if err != nil {
		return nil, err
	}
	fencer, _ := any(store).(Fencer[TTx])
	return &riverStore[TTx]{Client: client, store: store, fencer: fencer, waker: waker, wakeCommits: wakeCommits}, nil
}

func (r *riverStore[TTx]) fences() bool { return r.fencer != nil }

func (r *riverStore[TTx]) groupCommits() bool {
	_, ok := any(r.store).(GroupCommitter[TTx])
	return ok
}

func (r *riverStore[TTx]) migrate(ctx context.Context) error {
	return riverjob.Migrate(ctx, r.store)
}

func (r *riverStore[TTx]) sleep(after, maxSleep time.Duration, c clock.Clock, logger *slog.Logger) error {
	s, err := riverjob.NewSleeper(riverjob.SleeperConfig{
		Runner:   runFuncs{start: r.run, stop: r.halt},
		Pending:  func(ctx context.Context) (bool, error) { return riverjob.HasJobs(ctx, r.store.RiverDriver()) },
		Clock:    c,
		After:    after,
		MaxSleep: maxSleep,
		Logger:   logger,
	})
	r.sleeper = s
	return err
}

func (r *riverStore[TTx]) Start(ctx context.Context) error {
	if r.sleeper != nil {
		return r.sleeper.Start(ctx)
	}
	return r.run(ctx)
}

func (r *riverStore[TTx]) Stop(ctx context.Context) error {
	if r.sleeper != nil {
		return r.sleeper.Stop(ctx)
	}
	return r.halt(ctx)
}

// run starts one run of the client, its events followed: River ends
// every subscription when its client stops.
func (r *riverStore[TTx]) run(ctx context.Context) error {
	r.followMu.Lock()
	defer r.followMu.Unlock()
	r.unfollow = riverjob.Follow(r.Client, r.waker)
	if err := r.Client.Start(ctx); err != nil {
		r.unfollow()
		r.unfollow = nil
		return err
	}
	return nil
}

// halt stops the client's run and the following of its events.
func (r *riverStore[TTx]) halt(ctx context.Context) error {
	err := r.Client.Stop(ctx)
	r.followMu.Lock()
	defer r.followMu.Unlock()
	if r.unfollow != nil {
		r.unfollow()
		r.unfollow = nil
	}
	return err
}

// runFuncs is a riverjob.Runner of two funcs.
type runFuncs struct{ start, stop func(context.Context) error }

func (f runFuncs) Start(ctx context.Context) error { return f.start(ctx) }
func (f runFuncs) Stop(ctx context.Context) error  { return f.stop(ctx) }

func (r *riverStore[TTx]) reclaim(ctx context.Context, kinds []string) (int, error) {
	return r.store.JobReclaimRunning(ctx, kinds)
}

func (r *riverStore[TTx]) inTx(ctx context.Context, fn func(tx txn) error) error {
	return r.runTx(ctx, r.store.InTx, fn)
}

func (r *riverStore[TTx]) inGroupTx(ctx context.Context, fn func(ctx context.Context, tx txn) error) error {
	ctx = context.WithoutCancel(ctx)
	inTx := r.store.InTx
	if g, ok := any(r.store).(GroupCommitter[TTx]); ok {
		inTx = g.InGroupTx
	}
	return r.runTx(ctx, inTx, func(tx txn) error { return fn(ctx, tx) })
}

// runTx runs fn in a transaction of inTx's, then wakes what waits for
// the jobs it inserted.
func (r *riverStore[TTx]) runTx(ctx context.Context, inTx func(context.Context, func(TTx) error) error, fn func(tx txn) error) error {
	var queues []string
	err := inTx(ctx, func(tx TTx) error {
		t := &riverTx[TTx]{r: r, tx: tx}
		err := fn(t)
		queues = t.queues
		return err
	})
	if len(queues) > 0 && r.sleeper != nil {
		// Even a failed commit: one that failed late may have landed.
		r.sleeper.Wake()
	}
	if err == nil && r.wakeCommits && len(queues) > 0 {
		// In the process: it cannot fail.
		_ = r.waker.Wake(ctx, queues...)
	}
	return err
}

type riverTx[TTx any] struct {
	r  *riverStore[TTx]
	tx TTx
	// queues are the queues of the jobs inserted, each once.
	queues []string
}

func (t *riverTx[TTx]) taskUpdate(ctx context.Context, p *weir.TaskUpdateParams) (bool, error) {
	return t.r.store.TaskUpdateTx(ctx, t.tx, p)
}

func (t *riverTx[TTx]) taskUpdateMany(ctx context.Context, ps []weir.TaskUpdateParams) ([]bool, error) {
	if m, ok := any(t.r.store).(ManyUpdater[TTx]); ok {
		return m.TaskUpdateManyTx(ctx, t.tx, ps)
	}
	applied := make([]bool, len(ps))
	for i := range ps {
		ok, err := t.r.store.TaskUpdateTx(ctx, t.tx, &ps[i])
		if err != nil {
			return nil, err
		}
		applied[i] = ok
	}
	return applied, nil
}

func (t *riverTx[TTx]) jobInsert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	if _, err := t.r.InsertTx(ctx, t.tx, args, opts); err != nil {
		return err
	}
	t.inserted(opts)
	return nil
}

// inserted notes the queue of a job inserted with opts.
func (t *riverTx[TTx]) inserted(opts *river.InsertOpts) {
	queue := river.QueueDefault
	if opts != nil && opts.Queue != "" {
		queue = opts.Queue
	}
	if !slices.Contains(t.queues, queue) {
		t.queues = append(t.queues, queue)
	}
}

func (t *riverTx[TTx]) jobInsertMany(ctx context.Context, jobs []river.InsertManyParams) error {
	if len(jobs) == 0 {
		return nil
	}
	if _, err := t.r.InsertManyTx(ctx, t.tx, jobs); err != nil {
		return err
	}
	for _, j := range jobs {
		t.inserted(j.InsertOpts)
	}
	return nil
}

func (t *riverTx[TTx]) fence(ctx context.Context, leader string, epoch uint64) (bool, error) {
	if t.r.fencer == nil {
		return true, nil
	}
	return t.r.fencer.TermFenceTx(ctx, t.tx, leader, epoch)
}

func (t *riverTx[TTx]) fencedUpdateMany(ctx context.Context, leader string, epoch uint64, ps []weir.TaskUpdateParams) (bool, []bool, error) {
	if f, ok := any(t.r.store).(FencedUpdater[TTx]); ok && t.r.fencer != nil {
		return f.TaskUpdateManyFencedTx(ctx, t.tx, leader, epoch, ps)
	}
	held, err := t.fence(ctx, leader, epoch)
	if err != nil || !held {
		return held, nil, err
	}
	applied, err := t.taskUpdateMany(ctx, ps)
	return true, applied, err
}
