package tracing

import (
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir/clock"
)

// Ending is a span's end, made later and off the request's goroutine
// (EndLater): what the SDK does as a span ends (copying and
// de-duplicating its attributes, the snapshot, the span processors'
// work, here encoding it for export) is work a client's answer need not
// wait behind. The span's end time is when EndLater was called.
type Ending struct {
	Span trace.Span
	// Name, if set, is the span's name from now on.
	Name string
	// Attrs, if set (from Attrs), are set on the span as it ends, with
	// what Notes append; the slice goes back to Attrs' pool after.
	Attrs *[]attribute.KeyValue
	// Notes, if set, append their attributes to Attrs as the span ends,
	// on the goroutine that ends it.
	Notes Notes
	// Code and Desc are the span's status, unless Code is codes.Unset.
	Code codes.Code
	Desc string

	at time.Time
}

// Notes are what a span is told of its work that is read as it ends
// (Ending.Notes): an upstream's answer, say, read once it went out.
type Notes interface {
	AppendAttrs([]attribute.KeyValue) []attribute.KeyValue
}

// ender ends the spans EndLater queues, in the order queued, a short
// delay after the first of them: by then the answers they were part of
// have gone out and their clients have read them, and the spans of
// that delay end together.
type ender struct {
	clk   clock.Clock
	delay time.Duration
	// limit bounds the spans waiting: past it, a span ends at once, on
	// the caller's goroutine.
	limit int

	mu    sync.Mutex
	queue []Ending
	spare []Ending // the last batch ended, emptied
	armed bool     // a timer will end the queue

	// running is held while a batch ends, so that batches end one after
	// another, each in its order: a parent queued after its children
	// ends after them.
	running sync.Mutex
}

// endDelay is how long after EndLater its span ends, at most (unless
// Settle ends it sooner).
const endDelay = 5 * time.Millisecond

// endLimit bounds the spans waiting to end.
const endLimit = 4096

// ends is the process's ender: spans are the SDK's, from any provider,
// and ending one does only what its own provider says.
var ends = &ender{clk: clock.Real, delay: endDelay, limit: endLimit}

// EndLater ends e's span shortly, with its name, attributes and status
// as e says and the end time now, on a goroutine other than the
// caller's. e.Span ends after every span EndLater was given before it,
// unless endLimit spans wait: then it ends at once, on the caller's.
// A span that does not record is dropped at once.
func EndLater(e Ending) { ends.add(e) }

// Settle ends at once, on the caller's goroutine, every span EndLater
// was given before it, in order: before a flush of the spans ended, or
// a test's look at them.
func Settle() { ends.run() }

func (d *ender) add(e Ending) {
	if !e.Span.IsRecording() {
		if e.Attrs != nil {
			release(e.Attrs)
		}
		return
	}
	e.at = d.clk.Now()
	d.mu.Lock()
	if len(d.queue) >= d.limit {
		d.mu.Unlock()
		e.endOrReport()
		return
	}
	d.queue = append(d.queue, e)
	arm := !d.armed
	d.armed = true
	d.mu.Unlock()
	if arm {
		d.clk.AfterFunc(d.delay, d.run)
	}
}

// run ends the spans waiting, batch after batch, until none is left.
func (d *ender) run() {
	d.running.Lock()
	defer d.running.Unlock()
	for {
		d.mu.Lock()
		batch := d.queue
		if len(batch) == 0 {
			d.armed = false
			d.mu.Unlock()
			return
		}
		d.queue, d.spare = d.spare, nil
		d.mu.Unlock()
		for i := range batch {
			batch[i].endOrReport()
			batch[i] = Ending{}
		}
		d.mu.Lock()
		if d.spare == nil {
			d.spare = batch[:0]
		}
		d.mu.Unlock()
	}
}

// endOrReport ends e's span; a panic as it ends (in its notes' reading
// of an upstream's answer, say) loses that span alone: it is reported
// to OpenTelemetry's error handler, as a failed export is, and the
// goroutine goes on to the next.
func (e *Ending) endOrReport() {
	defer func() {
		if p := recover(); p != nil {
			otel.Handle(fmt.Errorf("tracing: a span dropped: ending it panicked: %v", p))
		}
	}()
	e.end()
}

// startTimer is what the SDK's spans tell of their start.
type startTimer interface{ StartTime() time.Time }

// end ends e's span as e says.
func (e *Ending) end() {
	s := e.Span
	if e.Name != "" {
		s.SetName(e.Name)
	}
	if e.Attrs != nil || e.Notes != nil {
		if e.Attrs == nil {
			e.Attrs = Attrs()
		}
		if e.Notes != nil {
			*e.Attrs = e.Notes.AppendAttrs(*e.Attrs)
		}
		SetAttrs(s, e.Attrs)
	}
	if e.Code != codes.Unset {
		s.SetStatus(e.Code, e.Desc)
	}
	at := e.at
	if st, ok := s.(startTimer); ok {
		// Timed from the start by the monotonic clock, as the SDK
		// times a span it ends itself: never before its start.
		start := st.StartTime()
		at = start.Add(at.Sub(start))
	}
	s.End(trace.WithTimestamp(at))
}
