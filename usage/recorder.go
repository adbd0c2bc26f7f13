// Package usage records one row per model request without putting the
// database on the request path: records are buffered and written in batches,
// one transaction per batch.
package usage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
)

// Recorder buffers usage records and flushes them to a Store.
type Recorder struct {
	store    weir.Store
	interval time.Duration
	logger   *slog.Logger
	dropped  func(n int)

	ch   chan weir.Usage
	done chan struct{}
	once sync.Once
}

// BatchMax is the most records written in one transaction.
const BatchMax = 500

// New returns a Recorder; Start it before Record.
func New(store weir.Store, interval time.Duration, logger *slog.Logger, dropped func(n int)) *Recorder {
	if interval <= 0 {
		interval = time.Second
	}
	if dropped == nil {
		dropped = func(int) {}
	}
	return &Recorder{store: store, interval: interval, logger: logger, dropped: dropped,
		ch: make(chan weir.Usage, 64<<10), done: make(chan struct{})}
}

// Record queues u. It never blocks: if the buffer is full (the store has
// fallen far behind) the record is counted as dropped.
func (r *Recorder) Record(u weir.Usage) {
	select {
	case r.ch <- u:
	default:
		r.dropped(1)
	}
}

// Start runs the flusher until Stop.
func (r *Recorder) Start() {
	go r.run()
}

// Stop flushes what is buffered and returns.
func (r *Recorder) Stop() {
	r.once.Do(func() { close(r.ch) })
	<-r.done
}

func (r *Recorder) run() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	batch := make([]weir.Usage, 0, BatchMax)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := r.store.UsageInsert(ctx, batch)
		cancel()
		if err != nil {
			r.logger.Error("usage flush failed", "records", len(batch), "error", err)
			r.dropped(len(batch))
		}
		batch = batch[:0]
	}
	for {
		select {
		case u, ok := <-r.ch:
			if !ok {
				flush()
				return
			}
			batch = append(batch, u)
			if len(batch) == BatchMax {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}
