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
)

const (
	// BatchMax is the most records written in one transaction: about a
	// millisecond of SQLite's time (BenchmarkUsageInsert in package
	// sqlite), so that a flush never keeps a CPU from the request path for
	// longer. Reaching it starts a flush without waiting for the interval.
	BatchMax = 128
	// MaxPending is the most records buffered; beyond it (the store has
	// fallen far behind) Record drops records and counts them.
	MaxPending = 64 << 10
	// maxSpare bounds the capacity of the buffer kept for reuse after a
	// flush, so that a burst's large buffer does not stay in the heap.
	maxSpare = 8 * BatchMax
)

// Recorder buffers usage records and flushes them to a Store.
type Recorder struct {
	store    weir.Store
	interval time.Duration
	logger   *slog.Logger
	dropped  func(n int)
	// maxPending is MaxPending but in tests.
	maxPending int

	mu      sync.Mutex
	pending []weir.Usage
	closed  bool

	wake    chan struct{} // cap 1: BatchMax more records are pending
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
	// Interval is the longest a record waits in the buffer before it is
	// written. Default 1s.
	Interval time.Duration
}

// Deps is what a Recorder writes to and reports to.
type Deps struct {
	// Store receives the records; required.
	Store weir.Store
	// Logger hears of failed flushes; default none.
	Logger *slog.Logger
	// Dropped is told of records dropped (buffer full, stopped, or a
	// failed flush); default none.
	Dropped func(n int)
}

// New returns a Recorder; Start it before Record.
func New(cfg Config, deps Deps) *Recorder {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Dropped == nil {
		deps.Dropped = func(int) {}
	}
	ctx, abort := context.WithCancel(context.Background())
	return &Recorder{ctx: ctx, abort: abort, store: deps.Store, interval: cfg.Interval, logger: deps.Logger, dropped: deps.Dropped, maxPending: MaxPending,
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
	r.mu.Unlock()
	if full {
		select {
		case r.wake <- struct{}{}:
		default: // a flush is already due
		}
	}
}

// Start runs the flusher until Stop. ctx bounds the start only; the
// flusher runs until Stop.
func (r *Recorder) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("usage recorder started or stopped already")
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
			n := len(r.pending)
			r.pending = nil
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
	t := time.NewTicker(r.interval)
	defer t.Stop()
	var spare []weir.Usage
	for {
		stopping, woken := false, false
		select {
		case <-r.wake:
			woken = true
		case <-t.C:
		case <-r.stop:
			stopping = true
		}
		r.mu.Lock()
		records := r.pending
		r.pending = spare
		if woken {
			// A wake is for full batches: the rest waits for the tick,
			// and stays at the front so that the next full batch is
			// counted (and woken for) from it.
			full := len(records) / BatchMax * BatchMax
			r.pending = append(r.pending, records[full:]...)
			records = records[:full]
		}
		r.mu.Unlock()
		r.write(records)
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

// write stores records, BatchMax to a transaction, yielding the CPU
// between transactions. Once Stop abandons the flush, the records not yet
// written are dropped.
func (r *Recorder) write(records []weir.Usage) {
	for len(records) > 0 {
		if err := r.ctx.Err(); err != nil {
			r.logger.Error("usage flush abandoned", "records", len(records), "error", err)
			r.dropped(len(records))
			return
		}
		n := min(len(records), BatchMax)
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		err := r.store.UsageInsert(ctx, records[:n])
		cancel()
		if err != nil {
			r.logger.Error("usage flush failed", "records", n, "error", err)
			r.dropped(n)
		}
		records = records[n:]
		if len(records) > 0 {
			// Let the request goroutines queued on this CPU run first.
			runtime.Gosched()
		}
	}
}
