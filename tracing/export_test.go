package tracing

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
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
			attribute.ByteSlice("by", []byte{0, 1}), attribute.Slice("sl", attribute.IntValue(4), attribute.StringValue("x"), attribute.BoolValue(false)),
			attribute.Map("m", attribute.String("k", "v"), attribute.Float64("z", 0)), attribute.Int("zero", 0), attribute.String("empty", ""),
		)
		root.AddEvent("ev", trace.WithAttributes(attribute.Int("e", 1)))
		root.AddEvent("crowded", trace.WithAttributes(manyAttrs(10)...)) // past the limit: some dropped
		root.SetStatus(codes.Error, "it broke")
		for _, kind := range []trace.SpanKind{trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindInternal} {
			_, s := tp.Tracer("other").Start(ctx, "child", trace.WithSpanKind(kind),
				trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("l", "v")}},
					trace.Link{SpanContext: remote, Attributes: manyAttrs(10)}))
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

// manyAttrs are n attributes, a0 to a(n-1).
func manyAttrs(n int) []attribute.KeyValue {
	out := make([]attribute.KeyValue, n)
	for i := range out {
		out[i] = attribute.Int("a"+strconv.Itoa(i), i)
	}
	return out
}

// protoSpans is ss as OTLP's ResourceSpans (spanBatch.protoSpans),
// encoded in buf, which is returned grown.
func protoSpans(buf []byte, ss []sdktrace.ReadOnlySpan) ([]*tracepb.ResourceSpans, []byte) {
	b := batchOf(buf, ss)
	return b.protoSpans(), b.buf
}

// What protoSpans makes reaches a collector as the library exporter's
// messages, whose conversion is internal to it; only the order of
// resources (the library's comes from a map) may differ.
func TestProtoSpansAreTheLibrarys(t *testing.T) {
	spans := testSpans(t)
	sameAsLibrary(t, nil, spans)
	if rs, _ := protoSpans(nil, nil); rs != nil {
		t.Error("no spans made ResourceSpans")
	}
	if rs, _ := protoSpans(nil, []sdktrace.ReadOnlySpan{nil}); rs != nil {
		t.Error("a nil span made ResourceSpans")
	}
}

// Spans encoded in the buffer of the last export leave nothing of it:
// each export after the first, smaller or larger, with spans in another
// order, is still the library's.
func TestProtoSpansInTheLastBuffer(t *testing.T) {
	spans := testSpans(t)
	buf := sameAsLibrary(t, nil, spans)
	reversed := slices.Clone(spans)
	slices.Reverse(reversed)
	buf = sameAsLibrary(t, buf[:0], reversed[:3])
	sameAsLibrary(t, buf[:0], reversed)
}

// sameAsLibrary checks that what protoSpans makes of spans, encoding
// them in buf, reaches a collector as what the library's exporter
// makes; it returns buf as protoSpans grew it.
func sameAsLibrary(t *testing.T, buf []byte, spans []sdktrace.ReadOnlySpan) []byte {
	t.Helper()
	lib := &captureClient{}
	if err := otlptrace.NewUnstarted(lib).ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	got, buf := protoSpans(buf, spans)
	want, got := received(t, lib.got), received(t, got)
	if len(got) == 0 || len(got) != len(want) {
		t.Fatalf("%d resources, the library %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("resource %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	return buf
}

// received is rs as a collector reads them, marshaled and unmarshaled,
// ordered by service name (the library orders resources by a map).
func received(t *testing.T, rs []*tracepb.ResourceSpans) []*tracepb.ResourceSpans {
	t.Helper()
	wire, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs})
	if err != nil {
		t.Fatal(err)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(wire, &req); err != nil {
		t.Fatal(err)
	}
	service := func(rs *tracepb.ResourceSpans) string {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				return kv.GetValue().GetStringValue()
			}
		}
		return ""
	}
	sort.Slice(req.ResourceSpans, func(i, j int) bool { return service(req.ResourceSpans[i]) < service(req.ResourceSpans[j]) })
	return req.ResourceSpans
}

// exportBatch sends the batch by its client and says which export
// failed.
func TestExporterSends(t *testing.T) {
	c := &captureClient{}
	e, err := newExporter(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.exportBatch(context.Background(), batchOf(nil, testSpans(t))); err != nil || len(c.got) != 2 {
		t.Fatalf("exportBatch: %v, sent %d resources", err, len(c.got))
	}
	if err := (&exporter{client: &failingClient{}}).exportBatch(context.Background(), batchOf(nil, testSpans(t))); err == nil {
		t.Error("a failed upload is no error")
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// batchOf is ss encoded in a batch, as the batcher queues them, in buf.
func batchOf(buf []byte, ss []sdktrace.ReadOnlySpan) *spanBatch {
	b := &spanBatch{buf: buf}
	for _, sd := range ss {
		b.add(sd)
	}
	return b
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
		e := otlptrace.NewUnstarted(&marshalClient{})
		b.ReportAllocs()
		for b.Loop() {
			_ = e.ExportSpans(context.Background(), spans)
		}
	})
	b.Run("weir", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			rs, grown := protoSpans(buf[:0], spans)
			if _, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs}); err != nil {
				b.Fatal(err)
			}
			buf = grown
		}
	})
}

type discardClient struct{ captureClient }

// marshalClient marshals what it is asked to send, as the OTLP clients
// do, and drops it.
type marshalClient struct{ captureClient }

func (marshalClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	_, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs})
	return err
}

func (discardClient) UploadTraces(context.Context, []*tracepb.ResourceSpans) error { return nil }

// A batch split where the batcher splits it, its spans of two resources
// and three scopes interleaved, is still the library's in each part;
// and the part left, its offsets moved, takes more spans after.
func TestSpanBatchSplitIsTheLibrarys(t *testing.T) {
	spans := testSpans(t)
	spans = spans[:len(spans)-1] // the nil
	for _, n := range []int{1, 5, len(spans) - 1} {
		var b, first spanBatch
		for _, sd := range spans {
			b.add(sd)
		}
		b.moveFirst(n, &first)
		if first.len() != n || b.len() != len(spans)-n {
			t.Fatalf("split at %d: %d and %d spans", n, first.len(), b.len())
		}
		sameBatch(t, &first, spans[:n])
		b.add(spans[0])
		sameBatch(t, &b, append(slices.Clone(spans[n:]), spans[0]))
	}
}

// sameBatch checks that b's ResourceSpans reach a collector as what the
// library's exporter makes of spans.
func sameBatch(t *testing.T, b *spanBatch, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	lib := &captureClient{}
	if err := otlptrace.NewUnstarted(lib).ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	want, got := received(t, lib.got), received(t, b.protoSpans())
	if len(got) == 0 || len(got) != len(want) {
		t.Fatalf("%d resources, the library %d", len(got), len(want))
	}
	for i := range got {
		if len(got[i].ScopeSpans) != len(want[i].ScopeSpans) {
			t.Fatalf("resource %d: %d scopes, the library %d", i, len(got[i].ScopeSpans), len(want[i].ScopeSpans))
		}
		// The library orders a resource's scopes by a map; so are they.
		byName := func(a, b *tracepb.ScopeSpans) int {
			return strings.Compare(a.GetScope().GetName(), b.GetScope().GetName())
		}
		slices.SortFunc(got[i].ScopeSpans, byName)
		slices.SortFunc(want[i].ScopeSpans, byName)
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("resource %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}
