package tracing

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sort"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// captureClient is an OTLP client that keeps what it is asked to send.
type captureClient struct{ got []*tracepb.ResourceSpans }

func (c *captureClient) Start(context.Context) error { return nil }
func (c *captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.got = append(c.got, rs...)
	return nil
}

// testSpans are spans of two resources and three scopes with every kind
// of attribute value, events, links, statuses, a remote parent, a trace
// state and dropped attributes.
func testSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	var spans []sdktrace.ReadOnlySpan
	for _, name := range []string{"weir", "weir-node"} {
		res := resource.NewSchemaless(attribute.String("service.name", name), attribute.Int("n", 7))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res),
			sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{AttributeCountLimit: 16, EventCountLimit: 8, LinkCountLimit: 8,
				AttributeValueLengthLimit: -1, AttributePerEventCountLimit: 8, AttributePerLinkCountLimit: 8}))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		ts, _ := trace.ParseTraceState("vendor=x")
		remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 15: 2}, SpanID: trace.SpanID{3, 7: 4},
			TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
		ctx, root := tp.Tracer(Scope, trace.WithInstrumentationVersion("v1"),
			trace.WithInstrumentationAttributes(attribute.String("scope.attr", "a"))).Start(ctx, "root", trace.WithSpanKind(trace.SpanKindServer))
		root.SetAttributes(
			attribute.String("s", "x"), attribute.Int64("i", -3), attribute.Float64("f", 1.5), attribute.Bool("b", true),
			attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
			attribute.Float64Slice("fs", []float64{0.5}), attribute.BoolSlice("bs", []bool{false, true}),
			attribute.String("", "invalid key"),
		)
		root.AddEvent("ev", trace.WithAttributes(attribute.Int("e", 1)))
		root.SetStatus(codes.Error, "it broke")
		for _, kind := range []trace.SpanKind{trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindInternal} {
			_, s := tp.Tracer("other").Start(ctx, "child", trace.WithSpanKind(kind),
				trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("l", "v")}}))
			for i := range 20 { // past the limit: some dropped
				s.SetAttributes(attribute.Int("a", i), attribute.Int(string(rune('a'+i)), i))
			}
			s.SetStatus(codes.Ok, "")
			s.End()
		}
		_, none := tp.Tracer("").Start(ctx, "no scope")
		none.End()
		root.End()
	}
	spans = rec.Ended()
	if len(spans) != 12 {
		t.Fatalf("recorded %d spans", len(spans))
	}
	return append(spans, nil) // the library skips a nil span; so must this
}

// The messages protoSpans makes are the library exporter's, whose
// conversion is internal to it; only the order of resources (the
// library's comes from a map) may differ.
func TestProtoSpansAreTheLibrarys(t *testing.T) {
	spans := testSpans(t)
	sameAsLibrary(t, &batch{}, spans)
	if protoSpans(&batch{}, nil) != nil || protoSpans(&batch{}, []sdktrace.ReadOnlySpan{nil}) != nil {
		t.Error("no spans made ResourceSpans")
	}
}

// A batch made in the slices of the last leaves nothing of it: each
// export after the first, smaller or larger, with spans in another
// order (a span without a parent where one had it, fewer attributes),
// is still the library's.
func TestProtoSpansInKeptSlices(t *testing.T) {
	spans := testSpans(t)
	var kept batch
	sameAsLibrary(t, &kept, spans)
	kept.clear()
	reversed := slices.Clone(spans)
	slices.Reverse(reversed)
	sameAsLibrary(t, &kept, reversed[:3])
	kept.clear()
	sameAsLibrary(t, &kept, reversed)
	kept.clear()
	for _, v := range []any{kept.spans, kept.kvs, kept.values, kept.strs, kept.slices, kept.valuePtrs} {
		if reflect.ValueOf(v).Len() == 0 {
			t.Fatalf("kept slices emptied: %T", v)
		}
	}
	if kept.spans[0].Name != "" || kept.kvPtrs[0] != nil || kept.strs[0].StringValue != "" {
		t.Error("cleared slices still hold the last batch")
	}
}

// sameAsLibrary checks that protoSpans makes of spans, in kept's
// slices, what the library's exporter makes.
func sameAsLibrary(t *testing.T, kept *batch, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	lib := &captureClient{}
	if err := otlptrace.NewUnstarted(lib).ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	got := protoSpans(kept, spans)
	service := func(rs *tracepb.ResourceSpans) string {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				return kv.GetValue().GetStringValue()
			}
		}
		return ""
	}
	byService := func(rs []*tracepb.ResourceSpans) {
		sort.Slice(rs, func(i, j int) bool { return service(rs[i]) < service(rs[j]) })
	}
	byService(lib.got)
	byService(got)
	if len(got) == 0 || len(got) != len(lib.got) {
		t.Fatalf("%d resources, the library %d", len(got), len(lib.got))
	}
	for i := range got {
		if !proto.Equal(got[i], lib.got[i]) {
			t.Errorf("resource %d:\n got %v\nwant %v", i, got[i], lib.got[i])
		}
	}
}

// ExportSpans sends the batch by its client and says which export
// failed.
func TestExporterSends(t *testing.T) {
	c := &captureClient{}
	e, err := newExporter(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ExportSpans(context.Background(), testSpans(t)); err != nil || len(c.got) != 2 {
		t.Fatalf("ExportSpans: %v, sent %d resources", err, len(c.got))
	}
	if err := (&exporter{client: &failingClient{}}).ExportSpans(context.Background(), testSpans(t)); err == nil {
		t.Error("a failed upload is no error")
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

type failingClient struct{ captureClient }

func (failingClient) UploadTraces(context.Context, []*tracepb.ResourceSpans) error {
	return errors.New("collector down")
}

// BenchmarkProtoSpans converts a batch of 512 spans of a traced
// request's kind (twelve attributes each).
func BenchmarkProtoSpans(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	for range 512 {
		_, s := tp.Tracer(Scope).Start(context.Background(), "chat gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient))
		s.SetAttributes(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
			attribute.String("gen_ai.request.model", "gpt-4o-mini"), attribute.String("weir.platform_model", "openai/gpt-4o-mini"),
			attribute.String("weir.platform", "openai"), attribute.Int("weir.attempt", 0), attribute.String("server.address", "api.openai.com"),
			attribute.String("gen_ai.response.model", "gpt-4o-mini-2024-07-18"), attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}),
			attribute.Int("gen_ai.usage.input_tokens", 31), attribute.Int("gen_ai.usage.output_tokens", 212), attribute.Float64("x", 1))
		s.End()
	}
	spans := rec.Ended()
	b.Run("library", func(b *testing.B) {
		e := otlptrace.NewUnstarted(&discardClient{})
		b.ReportAllocs()
		for b.Loop() {
			_ = e.ExportSpans(context.Background(), spans)
		}
	})
	b.Run("weir", func(b *testing.B) {
		var kept batch
		b.ReportAllocs()
		for b.Loop() {
			_ = protoSpans(&kept, spans)
			kept.clear()
		}
	})
}

type discardClient struct{ captureClient }

func (discardClient) UploadTraces(context.Context, []*tracepb.ResourceSpans) error { return nil }
