package tracing

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/weir-gateway/weir/clock"
)

// batchOptions are a batcher's limits, the SDK's batch span processor's
// and read from the same OTEL_BSP_* variables.
type batchOptions struct {
	delay    time.Duration // the longest an ended span waits for its export
	timeout  time.Duration // an export's; 0: none
	maxQueue int           // spans waiting; more are dropped
	maxBatch int           // spans an export
}

// The SDK's defaults (sdktrace.Default*).
const (
	defaultScheduleDelay = 5000 * time.Millisecond
	defaultExportTimeout = 30000 * time.Millisecond
	defaultMaxQueue      = 2048
	defaultMaxBatch      = 512
)

// readBatchOptions reads OTEL_BSP_SCHEDULE_DELAY and
// OTEL_BSP_EXPORT_TIMEOUT (milliseconds, 0 or more),
// OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE (more than
// 0; a batch no larger than the queue), each the SDK's default unset.
func readBatchOptions(getenv func(string) string) (batchOptions, error) {
	o := batchOptions{delay: defaultScheduleDelay, timeout: defaultExportTimeout, maxQueue: defaultMaxQueue, maxBatch: defaultMaxBatch}
	for _, v := range []struct {
		name string
		min  int
		set  func(int)
	}{
		{"OTEL_BSP_SCHEDULE_DELAY", 0, func(n int) { o.delay = time.Duration(n) * time.Millisecond }},
		{"OTEL_BSP_EXPORT_TIMEOUT", 0, func(n int) { o.timeout = time.Duration(n) * time.Millisecond }},
		{"OTEL_BSP_MAX_QUEUE_SIZE", 1, func(n int) { o.maxQueue = n }},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, func(n int) { o.maxBatch = n }},
	} {
		s := strings.TrimSpace(getenv(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < v.min {
			return batchOptions{}, fmt.Errorf("%s=%q: want a whole number, %d or more", v.name, s, v.min)
		}
		v.set(n)
	}
	o.maxBatch = min(o.maxBatch, o.maxQueue)
	return o, nil
}

// batcher is the span processor that queues sampled spans as they end
// and exports them in batches from a goroutine of its own, with the
// limits of the SDK's batch span processor. It differs in what wakes
// that goroutine: the SDK's hands it every span, one wake-up a span on
// the request's path; a batcher only when a batch is full, when the
// oldest span waiting has waited the schedule's delay, or when asked to
// flush. With nothing waiting it sets no timer at all. And it differs
// in what waits: a span is encoded for export as it ends (spanBatch),
// and only its bytes wait.
type batcher struct {
	exp  batchExporter
	clk  clock.Clock
	opts batchOptions

	mu      sync.Mutex
	queue   *spanBatch  // the spans waiting
	spare   *spanBatch  // the last batch exported, emptied; nil during an export
	timer   clock.Timer // the delay of the oldest span waiting, if any
	timerN  int         // counts the timers set: which one is timer
	dropped int         // since the last export
	stopped bool

	full  chan struct{} // a batch is waiting; buffered 1
	due   chan struct{} // the delay passed; buffered 1
	flush chan flushRequest
	done  chan struct{} // closed as the goroutine returns
}

// batchExporter sends a batch of encoded spans: the exporter, or a
// test's.
type batchExporter interface {
	exportBatch(ctx context.Context, b *spanBatch) error
	Shutdown(ctx context.Context) error
}

// flushRequest asks the goroutine to export every span waiting, and to
// return after if last.
type flushRequest struct {
	ctx   context.Context
	last  bool
	reply chan error // buffered 1
}

var _ sdktrace.SpanProcessor = (*batcher)(nil)

// newBatcher starts a batcher exporting to exp.
func newBatcher(exp batchExporter, clk clock.Clock, opts batchOptions) *batcher {
	b := &batcher{exp: exp, clk: clk, opts: opts, queue: &spanBatch{}, spare: &spanBatch{},
		full: make(chan struct{}, 1), due: make(chan struct{}, 1),
		flush: make(chan flushRequest), done: make(chan struct{})}
	go b.run()
	return b
}

// OnStart does nothing: a span is queued as it ends.
func (*batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s, encoded, if it is sampled, or drops it if the queue
// is full. It never waits.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if b.queue.len() >= b.opts.maxQueue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.queue.add(s)
	n := b.queue.len()
	if b.timer == nil {
		b.timerN++
		id := b.timerN
		b.timer = b.clk.AfterFunc(b.opts.delay, func() { b.expire(id) })
	}
	b.mu.Unlock()
	if n == b.opts.maxBatch {
		signal(b.full)
	}
}

// expire tells the goroutine that the oldest span waiting has waited
// the delay, if timer n is still the queue's (not stopped as it fired).
func (b *batcher) expire(n int) {
	b.mu.Lock()
	mine := b.timer != nil && b.timerN == n
	if mine {
		b.timer = nil
	}
	b.mu.Unlock()
	if mine {
		signal(b.due)
	}
}

// signal wakes the goroutine by ch, unless a wake-up is already pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ForceFlush exports every span that ended before it was called, the
// spans EndLater was given among them (Settle), and returns the first
// export's error or ctx's.
func (b *batcher) ForceFlush(ctx context.Context) error {
	Settle()
	return b.ask(ctx, false)
}

// Shutdown exports the spans waiting, those EndLater was given among
// them (Settle), stops the goroutine, and shuts the exporter down.
// Spans that end after it are dropped.
func (b *batcher) Shutdown(ctx context.Context) error {
	Settle()
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	err := b.ask(ctx, true)
	if serr := b.exp.Shutdown(ctx); err == nil {
		err = serr
	}
	return err
}

// ask has the goroutine export all that waits (and return, if last).
func (b *batcher) ask(ctx context.Context, last bool) error {
	r := flushRequest{ctx: ctx, last: last, reply: make(chan error, 1)}
	select {
	case b.flush <- r:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run exports batches until asked for the last flush.
func (b *batcher) run() {
	defer close(b.done)
	for {
		select {
		case <-b.full:
			b.export(context.Background(), false)
		case <-b.due:
			b.export(context.Background(), true)
		case r := <-b.flush:
			r.reply <- b.export(r.ctx, true)
			if r.last {
				return
			}
		}
	}
}

// export sends the spans waiting in batches: every full one, and the
// rest too if all. It returns the first error; each is also handed to
// OpenTelemetry's error handler, with the spans dropped since the last
// export.
func (b *batcher) export(ctx context.Context, all bool) error {
	var first error
	for {
		batch, dropped := b.take(all)
		if dropped > 0 {
			otel.Handle(fmt.Errorf("traces export: %d spans dropped, the queue of %d (OTEL_BSP_MAX_QUEUE_SIZE) was full", dropped, b.opts.maxQueue))
		}
		if batch == nil {
			return first
		}
		err := b.send(ctx, batch)
		batch.reset()
		b.mu.Lock()
		b.spare = batch
		b.mu.Unlock()
		if err != nil {
			otel.Handle(err)
			if first == nil {
				first = err
			}
		}
	}
}

// send exports batch within the export timeout.
func (b *batcher) send(ctx context.Context, batch *spanBatch) error {
	if b.opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.timeout)
		defer cancel()
	}
	return b.exp.exportBatch(ctx, batch)
}

// take removes the next batch from the queue: a full one, or what waits
// if all; none (nil) otherwise. It returns the spans dropped since the
// last take too. A queue left empty has no timer.
func (b *batcher) take(all bool) (*spanBatch, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dropped := b.dropped
	b.dropped = 0
	n := min(b.queue.len(), b.opts.maxBatch)
	if n == 0 || (!all && n < b.opts.maxBatch) {
		return nil, dropped
	}
	batch := b.spare
	b.spare = nil
	if n == b.queue.len() {
		batch, b.queue = b.queue, batch
	} else {
		b.queue.moveFirst(n, batch)
	}
	if b.queue.len() == 0 && b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return batch, dropped
}
