// Package usage records one row per model request without putting the
// database on the request path: records are buffered and written in batches,
// one transaction per batch.
//
// The flusher is background work sharing the CPUs with the request path.
// SQLite through modernc.org/sqlite is plain Go code that keeps its
// goroutine on a CPU until the scheduler preempts it, so one large
// transaction would hold a CPU long enough for requests queued behind it
// to feel it, worst on a small machine while the garbage collector holds
// another CPU. So the flusher writes at most BatchMax rows per
// transaction, about a millisecond's work, and yields the CPU between
// transactions; and its buffer is a slice that holds what is pending,
// which the garbage collector scans at its length, rather than a channel
// sized for MaxPending, which it would scan whole in every cycle.
// BenchmarkRecorderHoldsCPU measures the longest hold.
//
// Beside the records, the Recorder buffers reservations: the estimated
// cost of each request admitted, journaled in the store (the spend
// journal, Store.SpendReserve) until the request's usage record settles
// it. A flush writes the reservations it takes before the records it
// takes, so a request whose reservation and record share a flush leaves
// nothing in the journal. A reservation left there belongs to a request
// whose process died: RecoverAll, or the flusher's periodic recovery
// (Config.RecoverAfter), counts it at its estimate.
package usage

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

const (
	// BatchMax is the most records (or reservations) written in one
	// transaction: about a millisecond of SQLite's time
	// (BenchmarkUsageInsert in package sqlite), so that a flush never
	// keeps a CPU from the request path for longer. Reaching it starts a
	// flush without waiting for the interval. It is also the most
	// reservations one recovery transaction counts.
	BatchMax = 128
	// MaxPending is the most records buffered, and the most
	// reservations; beyond it (the store has fallen far behind) Record
	// and Reserve drop what they are given and count it.
	MaxPending = 64 << 10
	// DefaultRecoverEvery is Config.RecoverEvery's default.
	DefaultRecoverEvery = time.Minute
	// maxSpare bounds the capacity of the buffer kept for reuse after a
	// flush, so that a burst's large buffer does not stay in the heap.
	maxSpare = 8 * BatchMax
)

// Recorder buffers usage records and reservations, and flushes them to
// a Store.
type Recorder struct {
	store        weir.Store
	clock        clock.Clock
	interval     time.Duration
	recoverAfter time.Duration
	recoverEvery time.Duration
	logger       *slog.Logger
	dropped      func(n int)
	// maxPending is MaxPending, and recoverLimit BatchMax, but in tests.
	maxPending   int
	recoverLimit int

	mu       sync.Mutex
	pending  []weir.Usage
	reserved []weir.Reservation
	closed   bool
	// tick is the flusher's timer for what is buffered, armed by the
	// first record or reservation into an empty buffer (so an idle
	// Recorder is not woken), ticking while it is armed or due;
	// recoverTick is the recovery's, armed by Start.
	tick        timer
	ticking     bool
	recoverTick timer

	wake    chan struct{} // cap 1: BatchMax more records or reservations are pending
	started atomic.Bool
	stop    chan struct{}
	done    chan struct{}
	// ctx is the flusher's; Stop cancels it (abort) to abandon a flush
	// when its own ctx ends.
	ctx     context.Context
	abort   context.CancelFunc
	once    sync.Once
	stopErr error
}

// Config tunes a Recorder.
type Config struct {
	// Interval is the longest a record or a reservation waits in the
	// buffer before it is written. Default 1s.
	Interval time.Duration
	// RecoverAfter, if positive, is the age past which a reservation
	// belongs to a request that can no longer be running anywhere: every
	// RecoverEvery the flusher counts those older at their estimate
	// (Store.SpendRecover). It must be longer than any request can run
	// from its reservation to its usage record being written. Default 0:
	// the flusher recovers nothing.
	RecoverAfter time.Duration
	// RecoverEvery is how often the flusher recovers, if RecoverAfter is
	// positive. Default DefaultRecoverEvery.
	RecoverEvery time.Duration
}

// Deps is what a Recorder writes to and reports to.
type Deps struct {
	// Store receives the records and the reservations; required.
	Store weir.Store
	// Logger hears of failed flushes and of recoveries; default none.
	Logger *slog.Logger
	// Dropped is told of records and reservations dropped (buffer full,
	// stopped, or a failed flush); default none.
	Dropped func(n int)
	// Clock times the flushes and the recoveries; default clock.Real.
	Clock clock.Clock
}

// New returns a Recorder; Start it before Record.
func New(cfg Config, deps Deps) *Recorder {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.RecoverEvery <= 0 {
		cfg.RecoverEvery = DefaultRecoverEvery
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Dropped == nil {
		deps.Dropped = func(int) {}
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real
	}
	ctx, abort := context.WithCancel(context.Background())
	return &Recorder{ctx: ctx, abort: abort, store: deps.Store, clock: deps.Clock, interval: cfg.Interval,
		recoverAfter: cfg.RecoverAfter, recoverEvery: cfg.RecoverEvery, logger: deps.Logger, dropped: deps.Dropped,
		maxPending: MaxPending, recoverLimit: BatchMax,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Record queues u. It never blocks: if MaxPending records are already
// waiting, or the Recorder is stopped, the record is counted as dropped.
func (r *Recorder) Record(u weir.Usage) {
	r.mu.Lock()
	if r.closed || len(r.pending) >= r.maxPending {
		r.mu.Unlock()
		r.dropped(1)
		return
	}
	r.pending = append(r.pending, u)
	full := len(r.pending)%BatchMax == 0
	r.tickLocked()
	r.mu.Unlock()
	if full {
		r.wakeUp()
	}
}

// Reserve queues res, the reservation of a request just admitted, for
// the spend journal; the request's usage record, given to Record when
// it ends, settles it. Reserve before Record: a reservation written
// after its request's record is not kept. It never blocks: if
// MaxPending reservations are already waiting, or the Recorder is
// stopped, the reservation is counted as dropped.
func (r *Recorder) Reserve(res weir.Reservation) {
	r.mu.Lock()
	if r.closed || len(r.reserved) >= r.maxPending {
		r.mu.Unlock()
		r.dropped(1)
		return
	}
	r.reserved = append(r.reserved, res)
	full := len(r.reserved)%BatchMax == 0
	r.tickLocked()
	r.mu.Unlock()
	if full {
		r.wakeUp()
	}
}

// tickLocked arms the flusher's tick for what was just buffered, unless
// it is armed already.
func (r *Recorder) tickLocked() {
	if !r.ticking {
		r.ticking = true
		r.tick.arm(r.clock, r.interval)
	}
}

// wakeUp starts a flush without waiting for the interval.
func (r *Recorder) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default: // a flush is already due
	}
}

// Start runs the flusher until Stop. ctx bounds the start only; the
// flusher runs until Stop. The flusher's timers start with it.
func (r *Recorder) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("usage recorder started or stopped already")
	}
	if r.recoverAfter > 0 {
		r.recoverTick.arm(r.clock, r.recoverEvery)
	}
	go r.run()
	return nil
}

// Stop flushes what is buffered and returns. If ctx ends first, the
// flush is abandoned: what is not yet written is dropped and counted, and
// Stop returns ctx's error. Records after Stop are dropped. Stopping
// again returns the first Stop's result; stopping a Recorder that never
// started drops what is buffered.
func (r *Recorder) Stop(ctx context.Context) error {
	r.once.Do(func() {
		defer r.abort()
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.stop)
		if !r.started.Swap(true) {
			r.mu.Lock()
			n := len(r.pending) + len(r.reserved)
			r.pending, r.reserved = nil, nil
			r.mu.Unlock()
			if n > 0 {
				r.dropped(n)
			}
			close(r.done)
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			r.abort()
			<-r.done
			r.stopErr = ctx.Err()
		}
	})
	return r.stopErr
}

func (r *Recorder) run() {
	defer close(r.done)
	defer r.tick.stop()
	defer r.recoverTick.stop()
	var spare []weir.Usage
	for {
		stopping, woken, ticked := false, false, false
		select {
		case <-r.wake:
			woken = true
		case <-r.tick.channel():
			ticked = true
		case <-r.recoverTick.c:
			r.recoverTick.arm(r.clock, r.recoverEvery)
			r.recoverOld()
			continue
		case <-r.stop:
			stopping = true
		}
		r.mu.Lock()
		// Every reservation pending goes, before the records: a record
		// taken has its reservation in this flush or an earlier one.
		reserved := r.reserved
		r.reserved = nil
		records := r.pending
		r.pending = spare
		if ticked {
			// Everything buffered goes: the next record arms the tick.
			r.ticking = false
		}
		if woken {
			// A wake is for full batches: the rest waits for the tick,
			// and stays at the front so that the next full batch is
			// counted (and woken for) from it.
			full := len(records) / BatchMax * BatchMax
			r.pending = append(r.pending, records[full:]...)
			records = records[:full]
		}
		r.mu.Unlock()
		write(r, "reservations", reserved, r.store.SpendReserve)
		write(r, "records", records, r.store.UsageInsert)
		clear(records) // let the strings go
		spare = nil
		if cap(records) <= maxSpare {
			spare = records[:0]
		}
		if stopping {
			return
		}
	}
}

// write stores rows (records or reservations) with insert, BatchMax to
// a transaction, yielding the CPU between transactions. Once Stop
// abandons the flush, the rows not yet written are dropped.
func write[T any](r *Recorder, what string, rows []T, insert func(context.Context, []T) error) {
	for len(rows) > 0 {
		if err := r.ctx.Err(); err != nil {
			r.logger.Error("usage flush abandoned", what, len(rows), "error", err)
			r.dropped(len(rows))
			return
		}
		n := min(len(rows), BatchMax)
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		err := insert(ctx, rows[:n])
		cancel()
		if err != nil {
			r.logger.Error("usage flush failed", what, n, "error", err)
			r.dropped(n)
		}
		rows = rows[n:]
		if len(rows) > 0 {
			// Let the request goroutines queued on this CPU run first.
			runtime.Gosched()
		}
	}
}

// RecoverAll counts at its estimate every reservation in the store made
// before now, and returns how many: for a process sure that no other
// runs requests on the store (serve on SQLite, which locks the file),
// before it admits any, so every reservation there is a request that
// died with an earlier process.
func (r *Recorder) RecoverAll(ctx context.Context) (int, error) {
	return r.recoverBefore(ctx, r.clock.Now())
}

// recoverOld counts the reservations older than RecoverAfter, and logs
// what it did.
func (r *Recorder) recoverOld() {
	n, err := r.recoverBefore(r.ctx, r.clock.Now().Add(-r.recoverAfter))
	switch {
	case err != nil:
		r.logger.Error("spend recovery failed", "recovered", n, "error", err)
	case n > 0:
		r.logger.Info("spend recovered: requests that ended without a usage record counted at their estimate",
			"requests", n, "older_than", r.recoverAfter)
	}
}

// recoverBefore counts the reservations made before before,
// recoverLimit to a transaction, until a transaction counts fewer.
func (r *Recorder) recoverBefore(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := r.store.SpendRecover(tctx, &weir.SpendRecoverParams{Before: before, Limit: r.recoverLimit})
		cancel()
		total += n
		if err != nil {
			return total, err
		}
		if n < r.recoverLimit {
			return total, nil
		}
		runtime.Gosched()
	}
}
