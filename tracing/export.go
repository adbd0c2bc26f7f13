package tracing

import (
	"context"
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// exporter is the OTLP exporter, with the client (OTLP/HTTP or gRPC,
// configured by the OTEL_EXPORTER_OTLP_* variables) sending what it
// converts: otlptrace.Exporter's start and shutdown, and the export of
// its own. The library converts a batch to protobuf messages, three
// allocations an attribute and six a span, which its client then
// encodes by reflection; this one makes the resources' and scopes'
// messages alone, the spans of each scope being written in protobuf's
// wire format (encode.go; by the batcher, as each ends) as the scope's
// unknown fields (and the resources' and scopes' attributes as theirs):
// protobuf sends those as they are, and a collector reads the same
// messages (TestProtoSpansAreTheLibrarys).
//
// Only the batcher exports through it (exportBatch): the embedded
// Exporter gives the start and the shutdown.
type exporter struct {
	*otlptrace.Exporter
	client otlptrace.Client
}

var _ batchExporter = (*exporter)(nil)

// newExporter starts client and returns the exporter sending by it.
func newExporter(ctx context.Context, client otlptrace.Client) (*exporter, error) {
	e, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, err
	}
	return &exporter{Exporter: e, client: client}, nil
}

// exportBatch sends b in one request (the client retries it as the
// environment says). b is not used after it returns, the client's
// retries included.
func (e *exporter) exportBatch(ctx context.Context, b *spanBatch) error {
	rs := b.protoSpans()
	if len(rs) == 0 {
		return nil
	}
	if err := e.client.UploadTraces(ctx, rs); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// protoSpans is b's spans as OTLP's ResourceSpans, by resource and then
// by instrumentation scope, in the order b first saw each. A scope's
// spans are its unknown fields: b's bytes as they are if all are of one
// scope, else copied after them, a scope's after another's.
func (b *spanBatch) protoSpans() []*tracepb.ResourceSpans {
	if b.len() == 0 {
		return nil
	}
	counts := make([]int, len(b.groups)) // spans a group
	for _, s := range b.spans {
		counts[s.group]++
	}
	var (
		out    []*tracepb.ResourceSpans
		keys   []attribute.Distinct // out's resources
		scopes []*tracepb.ScopeSpans
		bounds [][2]int // each scope's spans in buf
	)
	for g, n := range counts {
		if n == 0 {
			continue
		}
		grp := &b.groups[g]
		r := slices.Index(keys, grp.key)
		if r < 0 {
			r = len(out)
			out = append(out, protoResource(grp.res))
			keys = append(keys, grp.key)
		}
		msg := &tracepb.ScopeSpans{Scope: protoScope(grp.scope), SchemaUrl: grp.scope.SchemaURL}
		out[r].ScopeSpans = append(out[r].ScopeSpans, msg)
		scopes = append(scopes, msg)
		if n == b.len() {
			bounds = append(bounds, [2]int{0, b.spans[n-1].end})
			break
		}
		start := len(b.buf)
		for i, s := range b.spans {
			if s.group == g {
				b.buf = append(b.buf, b.span(i)...)
			}
		}
		bounds = append(bounds, [2]int{start, len(b.buf)})
	}
	// The unknown fields are set once the buffer stops growing.
	for i, msg := range scopes {
		start, end := bounds[i][0], bounds[i][1]
		msg.ProtoReflect().SetUnknown(b.buf[start:end:end])
	}
	return out
}

// protoResource is res as OTLP's ResourceSpans, with no scopes yet.
func protoResource(res *resource.Resource) *tracepb.ResourceSpans {
	rs := &tracepb.ResourceSpans{SchemaUrl: res.SchemaURL()}
	if res != nil {
		rs.Resource = withAttrs(&resourcepb.Resource{}, fieldResourceAttributes, res.Attributes())
	}
	return rs
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
