package tracing

import (
	"context"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// exporter is the OTLP exporter, with the client (OTLP/HTTP or gRPC,
// configured by the OTEL_EXPORTER_OTLP_* variables) sending what it
// converts: otlptrace.Exporter's start and shutdown, and ExportSpans of
// its own. The library converts a batch to protobuf messages, three
// allocations an attribute and six a span, which its client then
// encodes by reflection; this one makes the resources' and scopes'
// messages alone and writes the spans of each scope in protobuf's wire
// format itself (encode.go), into one buffer kept from one export to
// the next, as the scope's unknown fields: protobuf sends those as they
// are, and a collector reads the same messages
// (TestProtoSpansAreTheLibrarys).
type exporter struct {
	*otlptrace.Exporter
	client otlptrace.Client

	mu  sync.Mutex
	buf []byte // the last export's spans, encoded
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// newExporter starts client and returns the exporter sending by it.
func newExporter(ctx context.Context, client otlptrace.Client) (*exporter, error) {
	e, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, err
	}
	return &exporter{Exporter: e, client: client}, nil
}

// ExportSpans sends ss in one request (the client retries it as the
// environment says). The spans are encoded in the buffer the last
// export used: an upload is done with it when it returns, the client's
// retries included.
func (e *exporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs, buf := protoSpans(e.buf[:0], ss)
	e.buf = buf
	if len(rs) == 0 {
		return nil
	}
	if err := e.client.UploadTraces(ctx, rs); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// protoSpans is ss as OTLP's ResourceSpans, by resource and then by
// instrumentation scope, in the order each was first seen; each scope's
// spans are encoded into buf, which is returned grown.
func protoSpans(buf []byte, ss []sdktrace.ReadOnlySpan) ([]*tracepb.ResourceSpans, []byte) {
	type scopeKey struct {
		r  attribute.Distinct
		is instrumentation.Scope
	}
	type scope struct {
		msg   *tracepb.ScopeSpans
		spans []sdktrace.ReadOnlySpan
	}
	var (
		out       []*tracepb.ResourceSpans
		order     []*scope
		resources = map[attribute.Distinct]*tracepb.ResourceSpans{}
		scopes    = map[scopeKey]*scope{}
	)
	for _, sd := range ss {
		if sd == nil {
			continue
		}
		res := sd.Resource()
		k := scopeKey{r: res.Equivalent(), is: sd.InstrumentationScope()}
		sc, ok := scopes[k]
		if !ok {
			sc = &scope{msg: &tracepb.ScopeSpans{Scope: protoScope(k.is), SchemaUrl: k.is.SchemaURL}}
			scopes[k] = sc
			order = append(order, sc)
			rs := resources[k.r]
			if rs == nil {
				rs = &tracepb.ResourceSpans{SchemaUrl: res.SchemaURL()}
				if res != nil {
					rs.Resource = &resourcepb.Resource{Attributes: keyValues(res.Attributes())}
				}
				resources[k.r] = rs
				out = append(out, rs)
			}
			rs.ScopeSpans = append(rs.ScopeSpans, sc.msg)
		}
		sc.spans = append(sc.spans, sd)
	}
	// The scopes' spans are encoded one scope after the other, and each
	// scope's unknown fields set once the buffer stops growing.
	ends := make([]int, len(order))
	for i, sc := range order {
		for _, sd := range sc.spans {
			buf = appendSpan(buf, fieldScopeSpans, sd)
		}
		ends[i] = len(buf)
	}
	from := 0
	for i, sc := range order {
		sc.msg.ProtoReflect().SetUnknown(protoreflect.RawFields(buf[from:ends[i]:ends[i]]))
		from = ends[i]
	}
	return out, buf
}

// keyValues is attrs as OTLP's key-values, each made on its own.
func keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(attrs))
	for i, kv := range attrs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)}
	}
	return out
}

// anyValue is v as OTLP's AnyValue, as the OTLP exporter makes it: an
// invalid value is the string "INVALID", an empty one has no value.
func anyValue(v attribute.Value) *commonpb.AnyValue {
	av := new(commonpb.AnyValue)
	switch v.Type() {
	case attribute.BOOL:
		av.Value = &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}
	case attribute.INT64:
		av.Value = &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}
	case attribute.FLOAT64:
		av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}
	case attribute.STRING:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: v.AsString()}
	case attribute.BYTESLICE:
		av.Value = &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}
	case attribute.BOOLSLICE:
		av.Value = arrayOf(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		av.Value = arrayOf(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		av.Value = arrayOf(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		av.Value = arrayOf(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		av.Value = arrayOf(v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		av.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}
	case attribute.EMPTY:
	default:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: "INVALID"}
	}
	return av
}

// arrayOf is the array value of vals, each made a Value by value.
func arrayOf[T any](vals []T, value func(T) attribute.Value) *commonpb.AnyValue_ArrayValue {
	out := make([]*commonpb.AnyValue, len(vals))
	for i, v := range vals {
		out[i] = anyValue(value(v))
	}
	return &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: out}}
}

// protoScope is is as OTLP's InstrumentationScope; nil for the zero
// scope.
func protoScope(is instrumentation.Scope) *commonpb.InstrumentationScope {
	if is == (instrumentation.Scope{}) {
		return nil
	}
	return &commonpb.InstrumentationScope{Name: is.Name, Version: is.Version, Attributes: keyValues(is.Attributes.ToSlice())}
}

// spanFlags is OTLP's flags of a span with trace flags tf whose parent
// (or, for a link, the span linked to) is parent: the W3C flags, and
// whether parent is remote.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		flags |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return flags
}

// spanKind is k's OTLP number (trace.SpanKind counts as OTLP does).
func spanKind(k trace.SpanKind) int32 {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return int32(tracepb.Span_SPAN_KIND_UNSPECIFIED)
	}
	return int32(k) //nolint:gosec // 1 to 5
}

// clampUint32 is v within uint32's range.
func clampUint32(v int) uint32 {
	return uint32(min(max(v, 0), math.MaxUint32)) //nolint:gosec // clamped
}
