// Package tracing is Weir's OpenTelemetry tracing: the tracer provider
// that exports spans by OTLP, configured by the standard OTEL_*
// environment variables, and the few helpers that the request path uses
// to start spans and to carry the W3C trace context (traceparent) across
// HTTP, the edge tunnel, the fleet and durable tasks.
//
// Tracing is off unless configured: then New returns no provider, no
// span is ever started, and the helpers cost a context lookup. A span is
// started below another only while that one records
// (trace.Span.IsRecording), from the provider that started it: only the
// entry points (the HTTP server, an edge node, a task's worker) are
// handed a provider.
package tracing

import (
	"context"
	"encoding/hex"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of Weir's spans.
const Scope = "github.com/weir-gateway/weir"

// Propagator is the W3C trace context, the one format Weir reads and
// writes (traceparent, tracestate).
var Propagator propagation.TraceContext

// Tracer is tp's tracer for Weir's spans; nil if tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Scope)
}

// Child starts a span named name below ctx's span if that one records,
// from the provider that started it. Otherwise it returns ctx and its
// span (one that does not record) as they are: nothing is allocated, and
// End and SetAttributes on it do nothing.
func Child(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, opts...)
}

// Inject writes ctx's trace context into h (traceparent, and tracestate
// if there is one), if ctx has one. It writes what Propagator.Inject
// would, without its carrier's allocations: the canonical header names
// are constants and the value is made in one.
func Inject(ctx context.Context, h http.Header) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	h["Traceparent"] = []string{traceparent(sc)}
	if ts := sc.TraceState().String(); ts != "" {
		h["Tracestate"] = []string{ts}
	} else {
		delete(h, "Tracestate")
	}
}

// traceparent is sc as a W3C traceparent value: version 00, the trace
// and span ids, and the flags the specification defines (sampled and
// random), in lowercase hex.
func traceparent(sc trace.SpanContext) string {
	const size = len("00-") + 32 + 1 + 16 + 1 + 2
	var b [size]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom)
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{byte(flags)})
	return string(b[:])
}

// Extract is ctx with the remote trace context that h carries, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get("Traceparent") == "" {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Traceparent is ctx's trace context as a traceparent value, "" if it
// has none: what a task stores to continue its trace later.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return traceparent(sc)
}

// Remote is the span context that the traceparent value tp names (as
// Traceparent writes it); not valid if tp is "" or malformed.
func Remote(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// attrPool holds the slices that a span's attributes are gathered in
// before SetAttributes, which copies them into the span: each slice
// serves one call after another, not one made for each.
var attrPool = sync.Pool{New: func() any {
	s := make([]attribute.KeyValue, 0, 16)
	return &s
}}

// Attrs is an empty slice to gather a span's attributes in, for one
// SetAttrs.
func Attrs() *[]attribute.KeyValue { return attrPool.Get().(*[]attribute.KeyValue) }

// SetAttrs sets attrs (from Attrs) on span in one call and gives the
// slice back; attrs is not to be used after.
func SetAttrs(span trace.Span, attrs *[]attribute.KeyValue) {
	if len(*attrs) > 0 {
		span.SetAttributes(*attrs...)
	}
	release(attrs)
}

// release gives attrs (from Attrs) back, emptied.
func release(attrs *[]attribute.KeyValue) {
	clear(*attrs)
	*attrs = (*attrs)[:0]
	attrPool.Put(attrs)
}
