package tracing_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/internal/otlptest"
	"github.com/weir-gateway/weir/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
		err  string
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4318/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, want: false},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, want: false},
		{env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, want: true},
		{env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, err: "OTEL_SDK_DISABLED"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
	} {
		got, err := tracing.Enabled(env(tc.env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %v, %v; want %v", tc.env, got, err, tc.want)
		}
	}
}

// Content capture is off unless the GenAI instrumentations' variable
// opts in; a value that says neither is refused.
func TestCaptureContent(t *testing.T) {
	for v, want := range map[string]bool{"": false, "false": false, "FALSE": false, "no_content": false, "EVENT_ONLY": false,
		"true": true, "True": true, " true ": true, "SPAN_ONLY": true, "span_and_event": true} {
		got, err := tracing.CaptureContent(env(map[string]string{tracing.CaptureContentEnv: v}))
		if err != nil || got != want {
			t.Errorf("%s=%q: %v, %v; want %v", tracing.CaptureContentEnv, v, got, err, want)
		}
	}
	if _, err := tracing.CaptureContent(env(map[string]string{tracing.CaptureContentEnv: "yes please"})); err == nil {
		t.Error("no error for a value that is neither true nor false")
	}
	for v, want := range map[string]bool{"": false, "true": true} {
		p, err := tracing.New(context.Background(), tracing.Config{Getenv: env(map[string]string{tracing.CaptureContentEnv: v}), Endpoint: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if p.CaptureContent != want {
			t.Errorf("%s=%q: the provider's CaptureContent is %v", tracing.CaptureContentEnv, v, p.CaptureContent)
		}
		_ = p.Shutdown(context.Background())
	}
	if _, err := tracing.New(context.Background(), tracing.Config{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", tracing.CaptureContentEnv: "1x"})}); err == nil {
		t.Error("New with a malformed capture setting: no error")
	}
}

func TestNewOffIsNil(t *testing.T) {
	p, err := tracing.New(context.Background(), tracing.Config{Getenv: env(nil)})
	if p != nil || err != nil {
		t.Fatalf("New with no OTEL_* = %v, %v; want nil, nil", p, err)
	}
	if _, err := tracing.New(context.Background(), tracing.Config{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})}); err == nil {
		t.Fatal("New with protocol http/json: no error")
	}
}

// TestNewExportsByEnv exports a span over each protocol the environment
// can name, to a real receiver, and flushes it on Shutdown.
func TestNewExportsByEnv(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			r := otlptest.NewGRPC(t)
			endpoint := r.URL
			if protocol == "grpc" {
				endpoint = "http://" + r.GRPCAddr
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_SERVICE_NAME", "weir-test")
			t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
			p, err := tracing.New(context.Background(), tracing.Config{Version: "v9"})
			if err != nil || p == nil {
				t.Fatalf("New: %v, %v", p, err)
			}
			if p.Protocol != protocol {
				t.Errorf("protocol %q, want %q", p.Protocol, protocol)
			}
			_, span := tracing.Tracer(p.TracerProvider()).Start(context.Background(), "root")
			span.End()
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := r.Spans()
			if len(spans) != 1 || spans[0].Name != "root" {
				t.Fatalf("received %v, want the span root", spans)
			}
			if got := spans[0].Resource["service.name"]; got != "weir-test" {
				t.Errorf("service.name %v, want weir-test (OTEL_SERVICE_NAME)", got)
			}
			if got := spans[0].Resource["service.version"]; got != "v9" {
				t.Errorf("service.version %v, want v9", got)
			}
		})
	}
}

func TestChildOnlyUnderARecordingSpan(t *testing.T) {
	ctx := context.Background()
	c2, s := tracing.Child(ctx, "x")
	if c2 != ctx || s.IsRecording() {
		t.Fatal("Child without a span started one")
	}
	r := otlptest.New(t)
	ctx, root := tracing.Tracer(r.Provider(t)).Start(ctx, "root")
	_, child := tracing.Child(ctx, "child")
	if !child.IsRecording() {
		t.Fatal("Child under a recording span did not record")
	}
	child.End()
	root.End()
	spans := r.Named(t, "root", "child")
	if otlptest.Find(spans, "child").ParentSpanID != otlptest.Find(spans, "root").SpanID {
		t.Error("child is not root's child")
	}
}

func TestPropagation(t *testing.T) {
	h := http.Header{}
	tracing.Inject(context.Background(), h)
	if len(h) != 0 {
		t.Fatalf("Inject without a trace wrote %v", h)
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	h.Set("traceparent", tp)
	ctx := tracing.Extract(context.Background(), h)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsRemote() || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("Extract: %v", sc)
	}
	out := http.Header{}
	tracing.Inject(ctx, out)
	if out.Get("traceparent") != tp {
		t.Errorf("Inject wrote %q, want %q", out.Get("traceparent"), tp)
	}
	if got := tracing.Traceparent(ctx); got != tp {
		t.Errorf("Traceparent %q, want %q", got, tp)
	}
	if sc := tracing.Remote(tp); sc.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("Remote(%q) = %v", tp, sc)
	}
	if tracing.Remote("junk").IsValid() {
		t.Error("Remote(junk) is valid")
	}
}

// Inject writes what the W3C propagator writes, whatever the flags and
// tracestate, and replaces a stale tracestate.
func TestInjectIsThePropagators(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=a,other=b")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []trace.SpanContextConfig{
		{TraceID: trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 15: 0x9c}, SpanID: trace.SpanID{0xb7, 7: 0x31}},
		{TraceID: trace.TraceID{1, 15: 0xff}, SpanID: trace.SpanID{0xff, 7: 1}, TraceFlags: trace.FlagsSampled},
		{TraceID: trace.TraceID{2, 15: 2}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled | trace.FlagsRandom | 0x80},
		{TraceID: trace.TraceID{3, 15: 3}, SpanID: trace.SpanID{3}, TraceFlags: trace.FlagsRandom, TraceState: ts},
	} {
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(sc))
		want := http.Header{}
		tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(want))
		got := http.Header{"Tracestate": {"stale=1"}}
		tracing.Inject(ctx, got)
		if sc.TraceState.Len() == 0 {
			want.Del("Tracestate")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Inject wrote %v, want the propagator's %v", got, want)
		}
		if tp := tracing.Traceparent(ctx); tp != want.Get("Traceparent") {
			t.Errorf("Traceparent %q, want %q", tp, want.Get("Traceparent"))
		}
	}
}

func BenchmarkInject(b *testing.B) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 15: 1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	b.ReportAllocs()
	for b.Loop() {
		tracing.Inject(ctx, http.Header{})
	}
}

// Attributes gathered in a slice of Attrs are the span's after SetAttrs,
// whatever the slice holds next: the span keeps its own copy.
func TestSetAttrsCopies(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	for i := range 3 {
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		p := tracing.Attrs()
		if len(*p) != 0 {
			t.Fatalf("Attrs gave %v, want an empty slice", *p)
		}
		*p = append(*p, attribute.Int("n", i), attribute.String("s", strings.Repeat("x", i)))
		tracing.SetAttrs(span, p)
		span.End()
	}
	for i, s := range rec.Ended() {
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			got[kv.Key] = kv.Value
		}
		if len(got) != 2 || got["n"].AsInt64() != int64(i) || got["s"].AsString() != strings.Repeat("x", i) {
			t.Errorf("span %d has %v", i, s.Attributes())
		}
	}
}
