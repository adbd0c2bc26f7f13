package tracing

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir/clock"
)

// setupEnder is an ender of delay and limit on a fake clock reading t0,
// and a tracer whose ended spans rec records.
func setupEnder(t0 time.Time, delay time.Duration, limit int) (*clock.Fake, *ender, *tracetest.SpanRecorder, trace.Tracer) {
	clk := clock.NewFake(t0)
	rec := tracetest.NewSpanRecorder()
	tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t")
	return clk, &ender{clk: clk, delay: delay, limit: limit}, rec, tr
}

// noteAttrs are notes that append their attribute and count the calls.
type noteAttrs struct {
	kv    attribute.KeyValue
	calls int
}

func (n *noteAttrs) AppendAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	n.calls++
	return append(attrs, n.kv)
}

// An ending waits for the ender's delay, then its span ends as it says
// (name, attributes with its notes', status) at the time it was queued,
// after the spans queued before it.
func TestEndLaterEndsInOrderAfterTheDelay(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	clk, d, rec, tr := setupEnder(t0, 5*time.Millisecond, 10)
	ctx, parent := tr.Start(context.Background(), "GET", trace.WithTimestamp(t0))
	_, child := tr.Start(ctx, "child", trace.WithTimestamp(t0))

	clk.Advance(time.Millisecond)
	notes := &noteAttrs{kv: attribute.String("read", "later")}
	attrs := Attrs()
	*attrs = append(*attrs, attribute.Int("n", 1))
	d.add(Ending{Span: child, Attrs: attrs, Notes: notes, Code: codes.Error, Desc: "upstream"})
	clk.Advance(time.Millisecond)
	d.add(Ending{Span: parent, Name: "GET /x"})
	if notes.calls != 0 || len(rec.Ended()) != 0 {
		t.Fatalf("ended before the delay: notes read %d times, %d spans ended", notes.calls, len(rec.Ended()))
	}
	clk.Advance(4 * time.Millisecond)
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Name() != "child" || ended[1].Name() != "GET /x" {
		t.Fatalf("ended %v; want child, then its parent renamed", names(ended))
	}
	c := ended[0]
	if got := c.EndTime(); !got.Equal(t0.Add(time.Millisecond)) {
		t.Errorf("child ended at %v; want when it was queued, %v", got, t0.Add(time.Millisecond))
	}
	if got := ended[1].EndTime(); !got.Equal(t0.Add(2 * time.Millisecond)) {
		t.Errorf("parent ended at %v; want %v", got, t0.Add(2*time.Millisecond))
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range c.Attributes() {
		got[kv.Key] = kv.Value
	}
	if got["n"].AsInt64() != 1 || got["read"].AsString() != "later" || notes.calls != 1 {
		t.Errorf("child attributes %v, notes read %d times", c.Attributes(), notes.calls)
	}
	if c.Status().Code != codes.Error || c.Status().Description != "upstream" {
		t.Errorf("child status %v", c.Status())
	}
	if d.armed || len(d.queue) != 0 {
		t.Errorf("ender armed %v with %d waiting after its run", d.armed, len(d.queue))
	}
}

// Settle ends what waits at once; past the limit a span ends on the
// caller's goroutine; a span that does not record is dropped.
func TestEndLaterSettleAndLimit(t *testing.T) {
	clk, d, rec, tr := setupEnder(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), time.Second, 1)
	_, a := tr.Start(context.Background(), "a")
	_, b := tr.Start(context.Background(), "b")
	d.add(Ending{Span: a})
	d.add(Ending{Span: b}) // past the limit of 1
	if got := names(rec.Ended()); len(got) != 1 || got[0] != "b" {
		t.Fatalf("ended %v; want b alone, at once", got)
	}
	d.add(Ending{Span: trace.SpanFromContext(context.Background()), Attrs: Attrs()})
	d.run()
	if got := names(rec.Ended()); len(got) != 2 || got[1] != "a" {
		t.Fatalf("ended %v after a settle; want b, a", got)
	}
	if clk.Advance(time.Second); len(rec.Ended()) != 2 {
		t.Errorf("the timer ended %d spans; want none more", len(rec.Ended())-2)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

// panicky are notes whose reading panics.
type panicky struct{}

func (panicky) AppendAttrs([]attribute.KeyValue) []attribute.KeyValue { panic("malformed") }

// A span whose ending panics is dropped and reported; the spans queued
// after it still end, and the process goes on.
func TestEndLaterReportsAPanicAndGoesOn(t *testing.T) {
	errs := handledErrors(t)

	clk, d, rec, tr := setupEnder(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), time.Millisecond, 10)
	_, bad := tr.Start(context.Background(), "bad")
	_, good := tr.Start(context.Background(), "good")
	d.add(Ending{Span: bad, Notes: panicky{}})
	d.add(Ending{Span: good})
	clk.Advance(time.Millisecond)
	if got := names(rec.Ended()); len(got) != 1 || got[0] != "good" {
		t.Errorf("ended %v; want good alone", got)
	}
	if handled := errs(); len(handled) != 1 || !strings.Contains(handled[0].Error(), "malformed") {
		t.Errorf("reported %v; want the panic", handled)
	}
}
