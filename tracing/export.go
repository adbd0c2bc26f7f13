package tracing

import (
	"context"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// exporter is the OTLP exporter, with the client (OTLP/HTTP or gRPC,
// configured by the OTEL_EXPORTER_OTLP_* variables) sending what it
// converts: otlptrace.Exporter's start and shutdown, and ExportSpans of
// its own. The library's conversion of a batch to protobuf allocates
// three objects an attribute (its key and value, and the value's oneof)
// and six a span; this one makes the messages of a batch in a few
// slices, one of each kind, kept from one export to the next, and sends
// the same messages (TestProtoSpansAreTheLibrarys).
type exporter struct {
	*otlptrace.Exporter
	client otlptrace.Client

	mu   sync.Mutex
	kept batch // the slices of the last export, cleared
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
// environment says). The messages are made in the slices the last
// export used: an upload is done with them when it returns, the
// client's retries included, and they are cleared then, so that they
// keep no span's strings alive.
func (e *exporter) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := protoSpans(&e.kept, ss)
	defer e.kept.clear()
	if len(rs) == 0 {
		return nil
	}
	if err := e.client.UploadTraces(ctx, rs); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

// batch holds the messages of one batch's spans, made together: each
// span and each of its attributes takes the next of each slice, sized
// by newBatch from the same spans (the SDK's ended spans, which do not
// change). Events, links, the values other than strings, numbers,
// booleans and string slices, and resources and scopes (a batch has one
// or a few) are made one by one.
type batch struct {
	spans    []tracepb.Span
	statuses []tracepb.Status
	ids      []byte
	kvs      []commonpb.KeyValue
	kvPtrs   []*commonpb.KeyValue
	values   []commonpb.AnyValue
	strs     []commonpb.AnyValue_StringValue
	ints     []commonpb.AnyValue_IntValue
	floats   []commonpb.AnyValue_DoubleValue
	bools    []commonpb.AnyValue_BoolValue
	// A string slice (a span's finish reasons, a queue's scopes) takes
	// the next of slices (its elements, as newBatch read them), an array
	// and its wrapper, and a pointer, a value and a string value an
	// element.
	slices    [][]string
	arrays    []commonpb.ArrayValue
	arrayVals []commonpb.AnyValue_ArrayValue
	valuePtrs []*commonpb.AnyValue
}

// newBatch sizes kept's slices for ss, reusing their arrays where they
// are long enough, and returns a batch of them to take from.
func newBatch(kept *batch, ss []sdktrace.ReadOnlySpan) (batch, int) {
	var n, attrs, strs, ints, floats, bools, elems int
	kept.slices = kept.slices[:0]
	for _, sd := range ss {
		if sd == nil {
			continue
		}
		n++
		for _, kv := range sd.Attributes() {
			attrs++
			switch kv.Value.Type() {
			case attribute.STRING:
				strs++
			case attribute.INT64:
				ints++
			case attribute.FLOAT64:
				floats++
			case attribute.BOOL:
				bools++
			case attribute.STRINGSLICE:
				ss := kv.Value.AsStringSlice() // a copy: kept for keyValues
				kept.slices = append(kept.slices, ss)
				elems += len(ss)
			}
		}
	}
	k := kept
	k.spans, k.statuses, k.ids = fit(k.spans, n), fit(k.statuses, n), fit(k.ids, n*(16+8+8))
	k.kvs, k.kvPtrs, k.values = fit(k.kvs, attrs), fit(k.kvPtrs, attrs), fit(k.values, attrs+elems)
	k.strs, k.ints, k.floats, k.bools = fit(k.strs, strs+elems), fit(k.ints, ints), fit(k.floats, floats), fit(k.bools, bools)
	k.arrays, k.arrayVals, k.valuePtrs = fit(k.arrays, len(k.slices)), fit(k.arrayVals, len(k.slices)), fit(k.valuePtrs, elems)
	return *k, n
}

// fit is s with length n: s's array if its capacity is enough (its
// elements zero, as clear left them), else a new one.
func fit[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// clear zeroes what the last batch used of b's slices.
func (b *batch) clear() {
	clear(b.spans)
	clear(b.statuses)
	clear(b.kvs)
	clear(b.kvPtrs)
	clear(b.values)
	clear(b.strs)
	clear(b.ints)
	clear(b.floats)
	clear(b.bools)
	clear(b.slices)
	clear(b.arrays)
	clear(b.arrayVals)
	clear(b.valuePtrs)
}

// protoSpans is ss as OTLP's ResourceSpans, by resource and then by
// instrumentation scope, in the order each was first seen, made in
// kept's slices (newBatch).
func protoSpans(kept *batch, ss []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	b, n := newBatch(kept, ss)
	if n == 0 {
		return nil
	}
	type scopeKey struct {
		r  attribute.Distinct
		is instrumentation.Scope
	}
	var (
		out       []*tracepb.ResourceSpans
		resources = map[attribute.Distinct]*tracepb.ResourceSpans{}
		scopes    = map[scopeKey]*tracepb.ScopeSpans{}
	)
	for _, sd := range ss {
		if sd == nil {
			continue
		}
		res := sd.Resource()
		k := scopeKey{r: res.Equivalent(), is: sd.InstrumentationScope()}
		ss, ok := scopes[k]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: protoScope(k.is), SchemaUrl: k.is.SchemaURL}
			scopes[k] = ss
			rs := resources[k.r]
			if rs == nil {
				rs = &tracepb.ResourceSpans{SchemaUrl: res.SchemaURL()}
				if res != nil {
					rs.Resource = &resourcepb.Resource{Attributes: keyValues(res.Attributes())}
				}
				resources[k.r] = rs
				out = append(out, rs)
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, b.span(sd))
	}
	return out
}

// span is sd in the batch's next span.
func (b *batch) span(sd sdktrace.ReadOnlySpan) *tracepb.Span {
	s, st := &b.spans[0], &b.statuses[0]
	b.spans, b.statuses = b.spans[1:], b.statuses[1:]
	sc, parent := sd.SpanContext(), sd.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	s.TraceId, s.SpanId = b.bytes(tid[:]), b.bytes(sid[:])
	if psid := parent.SpanID(); psid.IsValid() {
		s.ParentSpanId = b.bytes(psid[:])
	}
	s.TraceState = sc.TraceState().String()
	s.Flags = spanFlags(sc.TraceFlags(), parent)
	s.Name = sd.Name()
	s.Kind = tracepb.Span_SpanKind(spanKind(sd.SpanKind()))
	s.StartTimeUnixNano = uint64(max(0, sd.StartTime().UnixNano())) //nolint:gosec // not negative
	s.EndTimeUnixNano = uint64(max(0, sd.EndTime().UnixNano()))     //nolint:gosec // not negative
	s.Attributes = b.keyValues(sd.Attributes())
	s.DroppedAttributesCount = clampUint32(sd.DroppedAttributes())
	s.Events = events(sd.Events())
	s.DroppedEventsCount = clampUint32(sd.DroppedEvents())
	s.Links = links(sd.Links())
	s.DroppedLinksCount = clampUint32(sd.DroppedLinks())
	status := sd.Status()
	st.Message = status.Description
	switch status.Code {
	case codes.Ok:
		st.Code = tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		st.Code = tracepb.Status_STATUS_CODE_ERROR
	}
	s.Status = st
	return s
}

// bytes is a copy of id in the batch's bytes.
func (b *batch) bytes(id []byte) []byte {
	n := copy(b.ids, id)
	out := b.ids[:n:n]
	b.ids = b.ids[n:]
	return out
}

// keyValues is attrs in the batch's next key-values.
func (b *batch) keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := b.kvPtrs[:len(attrs):len(attrs)]
	b.kvPtrs = b.kvPtrs[len(attrs):]
	for i, kv := range attrs {
		p, av := &b.kvs[0], &b.values[0]
		b.kvs, b.values = b.kvs[1:], b.values[1:]
		switch v := kv.Value; v.Type() {
		case attribute.STRING:
			av.Value = b.str(v.AsString())
		case attribute.STRINGSLICE:
			elems := b.slices[0]
			b.slices = b.slices[1:]
			arr, w := &b.arrays[0], &b.arrayVals[0]
			b.arrays, b.arrayVals = b.arrays[1:], b.arrayVals[1:]
			arr.Values = b.valuePtrs[:len(elems):len(elems)]
			b.valuePtrs = b.valuePtrs[len(elems):]
			for j, e := range elems {
				ev := &b.values[0]
				b.values = b.values[1:]
				ev.Value = b.str(e)
				arr.Values[j] = ev
			}
			w.ArrayValue = arr
			av.Value = w
		case attribute.INT64:
			w := &b.ints[0]
			b.ints = b.ints[1:]
			w.IntValue = v.AsInt64()
			av.Value = w
		case attribute.FLOAT64:
			w := &b.floats[0]
			b.floats = b.floats[1:]
			w.DoubleValue = v.AsFloat64()
			av.Value = w
		case attribute.BOOL:
			w := &b.bools[0]
			b.bools = b.bools[1:]
			w.BoolValue = v.AsBool()
			av.Value = w
		default:
			av.Value = anyValue(v).Value
		}
		p.Key, p.Value = string(kv.Key), av
		out[i] = p
	}
	return out
}

// str is the batch's next string value, s.
func (b *batch) str(s string) *commonpb.AnyValue_StringValue {
	w := &b.strs[0]
	b.strs = b.strs[1:]
	w.StringValue = s
	return w
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

// events is es as OTLP's span events.
func events(es []sdktrace.Event) []*tracepb.Span_Event {
	if len(es) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Event, len(es))
	for i, e := range es {
		out[i] = &tracepb.Span_Event{Name: e.Name, TimeUnixNano: uint64(max(0, e.Time.UnixNano())), //nolint:gosec // not negative
			Attributes: keyValues(e.Attributes), DroppedAttributesCount: clampUint32(e.DroppedAttributeCount)}
	}
	return out
}

// links is ls as OTLP's span links.
func links(ls []sdktrace.Link) []*tracepb.Span_Link {
	if len(ls) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Link, len(ls))
	for i, l := range ls {
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out[i] = &tracepb.Span_Link{TraceId: tid[:], SpanId: sid[:], Attributes: keyValues(l.Attributes), DroppedAttributesCount: clampUint32(l.DroppedAttributeCount),
			Flags: spanFlags(l.SpanContext.TraceFlags(), l.SpanContext)}
	}
	return out
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
