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
	"google.golang.org/protobuf/encoding/protowire"
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
// the next, as the scope's unknown fields (and the resources' and
// scopes' attributes as theirs): protobuf sends those as they are, and
// a collector reads the same messages (TestProtoSpansAreTheLibrarys).
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
		msg        *tracepb.ScopeSpans
		spans      []sdktrace.ReadOnlySpan
		start, end int // its spans' bytes in buf
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
					rs.Resource = withAttrs(&resourcepb.Resource{}, fieldResourceAttributes, res.Attributes())
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
	for _, sc := range order {
		sc.start = len(buf)
		for _, sd := range sc.spans {
			buf = appendSpan(buf, fieldScopeSpans, sd)
		}
		sc.end = len(buf)
	}
	for _, sc := range order {
		sc.msg.ProtoReflect().SetUnknown(buf[sc.start:sc.end:sc.end])
	}
	return out, buf
}

// protoScope is is as OTLP's InstrumentationScope; nil for the zero
// scope.
func protoScope(is instrumentation.Scope) *commonpb.InstrumentationScope {
	if is == (instrumentation.Scope{}) {
		return nil
	}
	return withAttrs(&commonpb.InstrumentationScope{Name: is.Name, Version: is.Version}, fieldScopeAttributes, is.Attributes.ToSlice())
}

// withAttrs is m with attrs as its field num (a repeated KeyValue),
// written as m's unknown fields as the spans are (encode.go).
func withAttrs[M protoreflect.ProtoMessage](m M, num protowire.Number, attrs []attribute.KeyValue) M {
	if len(attrs) > 0 {
		var b []byte
		for _, kv := range attrs {
			b = appendKeyValue(b, num, kv)
		}
		m.ProtoReflect().SetUnknown(b)
	}
	return m
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
