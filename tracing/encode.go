package tracing

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of OTLP's messages that encode.go writes
// (opentelemetry/proto/trace/v1/trace.proto and common/v1/common.proto).
const (
	fieldScopeSpans         protowire.Number = 2 // ScopeSpans.spans
	fieldResourceAttributes protowire.Number = 1 // Resource.attributes
	fieldScopeAttributes    protowire.Number = 3 // InstrumentationScope.attributes

	fieldSpanTraceID      protowire.Number = 1
	fieldSpanSpanID       protowire.Number = 2
	fieldSpanTraceState   protowire.Number = 3
	fieldSpanParentSpanID protowire.Number = 4
	fieldSpanName         protowire.Number = 5
	fieldSpanKind         protowire.Number = 6
	fieldSpanStart        protowire.Number = 7
	fieldSpanEnd          protowire.Number = 8
	fieldSpanAttributes   protowire.Number = 9
	fieldSpanDroppedAttrs protowire.Number = 10
	fieldSpanEvents       protowire.Number = 11
	fieldSpanDroppedEvts  protowire.Number = 12
	fieldSpanLinks        protowire.Number = 13
	fieldSpanDroppedLinks protowire.Number = 14
	fieldSpanStatus       protowire.Number = 15
	fieldSpanFlags        protowire.Number = 16

	fieldStatusMessage protowire.Number = 2
	fieldStatusCode    protowire.Number = 3

	fieldEventTime         protowire.Number = 1
	fieldEventName         protowire.Number = 2
	fieldEventAttributes   protowire.Number = 3
	fieldEventDroppedAttrs protowire.Number = 4

	fieldLinkTraceID      protowire.Number = 1
	fieldLinkSpanID       protowire.Number = 2
	fieldLinkAttributes   protowire.Number = 4
	fieldLinkDroppedAttrs protowire.Number = 5
	fieldLinkFlags        protowire.Number = 6

	fieldKeyValueKey   protowire.Number = 1
	fieldKeyValueValue protowire.Number = 2

	fieldAnyString protowire.Number = 1
	fieldAnyBool   protowire.Number = 2
	fieldAnyInt    protowire.Number = 3
	fieldAnyDouble protowire.Number = 4
	fieldAnyArray  protowire.Number = 5
	fieldAnyKVList protowire.Number = 6
	fieldAnyBytes  protowire.Number = 7

	fieldListValues protowire.Number = 1 // ArrayValue.values, KeyValueList.values
)

// openLen starts field num, a message or bytes whose length is not yet
// known, and returns where its content starts (for closeLen). It
// leaves one byte for the length, enough for content under 128 bytes.
func openLen(b []byte, num protowire.Number) ([]byte, int) {
	b = appendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

// closeLen ends the field whose content started at at: it writes the
// content's length in the byte openLen left (closeLong, for content of
// 128 bytes or more).
func closeLen(b []byte, at int) []byte {
	n := len(b) - at
	if n >= 0x80 {
		return closeLong(b, at)
	}
	b[at-1] = byte(n)
	return b
}

// closeLong is closeLen for content of 128 bytes or more: it moves the
// content along by the length's bytes after the first.
func closeLong(b []byte, at int) []byte {
	n := len(b) - at
	size := protowire.SizeVarint(uint64(n)) //nolint:gosec // a length
	b = append(b, make([]byte, size-1)...)
	copy(b[at-1+size:], b[at:at+n])
	protowire.AppendVarint(b[at-1:at-1], uint64(n)) //nolint:gosec // a length
	return b
}

// appendTag is protowire.AppendTag for a field numbered 1 to 15, whose
// tag is one byte: small enough to inline, where a constant field's tag
// is a constant.
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return append(b, byte(num)<<3|byte(typ))
}

// appendUvarint is protowire.AppendVarint, one byte appended at once
// for the values under 128 that most tags, lengths and enums are.
func appendUvarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// appendBytes is protowire.AppendString: s's length and s.
func appendBytes(b []byte, s string) []byte {
	if len(s) < 0x80 {
		return append(append(b, byte(len(s))), s...)
	}
	return protowire.AppendString(b, s)
}

// appendString appends field num, s, unless s is "" (proto3's default,
// not sent).
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = appendTag(b, num, protowire.BytesType)
	return appendBytes(b, s)
}

// appendVarint appends field num, v, unless v is 0.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, protowire.VarintType)
	return appendUvarint(b, v)
}

// appendFixed64 appends field num, v, unless v is 0.
func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// appendFixed32 appends field num (of any number: a span's flags are
// 16), v, unless v is 0.
func appendFixed32(b []byte, num protowire.Number, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, v)
}

// appendSpan appends sd as field num, an OTLP Span, with what the
// library's conversion gives it.
func appendSpan(b []byte, num protowire.Number, sd sdktrace.ReadOnlySpan) []byte {
	b, at := openLen(b, num)
	sc, parent := sd.SpanContext(), sd.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendTag(b, fieldSpanTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = appendTag(b, fieldSpanSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	b = appendString(b, fieldSpanTraceState, sc.TraceState().String())
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendTag(b, fieldSpanParentSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, psid[:])
	}
	b = appendString(b, fieldSpanName, sd.Name())
	b = appendVarint(b, fieldSpanKind, uint64(spanKind(sd.SpanKind())))             //nolint:gosec // 0 to 5
	b = appendFixed64(b, fieldSpanStart, uint64(max(0, sd.StartTime().UnixNano()))) //nolint:gosec // not negative
	b = appendFixed64(b, fieldSpanEnd, uint64(max(0, sd.EndTime().UnixNano())))     //nolint:gosec // not negative
	for _, kv := range sd.Attributes() {
		b = appendKeyValue(b, fieldSpanAttributes, kv)
	}
	b = appendVarint(b, fieldSpanDroppedAttrs, uint64(clampUint32(sd.DroppedAttributes())))
	for _, e := range sd.Events() {
		b = appendEvent(b, e)
	}
	b = appendVarint(b, fieldSpanDroppedEvts, uint64(clampUint32(sd.DroppedEvents())))
	for _, l := range sd.Links() {
		b = appendLink(b, l)
	}
	b = appendVarint(b, fieldSpanDroppedLinks, uint64(clampUint32(sd.DroppedLinks())))
	// A span's status is always sent, empty or not, as the library does.
	b, st := openLen(b, fieldSpanStatus)
	status := sd.Status()
	b = appendString(b, fieldStatusMessage, status.Description)
	switch status.Code {
	case codes.Ok:
		b = appendVarint(b, fieldStatusCode, uint64(tracepb.Status_STATUS_CODE_OK))
	case codes.Error:
		b = appendVarint(b, fieldStatusCode, uint64(tracepb.Status_STATUS_CODE_ERROR))
	}
	b = closeLen(b, st)
	b = appendFixed32(b, fieldSpanFlags, spanFlags(sc.TraceFlags(), parent))
	return closeLen(b, at)
}

// appendEvent appends e as a span's event.
func appendEvent(b []byte, e sdktrace.Event) []byte {
	b, at := openLen(b, fieldSpanEvents)
	b = appendFixed64(b, fieldEventTime, uint64(max(0, e.Time.UnixNano()))) //nolint:gosec // not negative
	b = appendString(b, fieldEventName, e.Name)
	for _, kv := range e.Attributes {
		b = appendKeyValue(b, fieldEventAttributes, kv)
	}
	b = appendVarint(b, fieldEventDroppedAttrs, uint64(clampUint32(e.DroppedAttributeCount)))
	return closeLen(b, at)
}

// appendLink appends l as a span's link.
func appendLink(b []byte, l sdktrace.Link) []byte {
	b, at := openLen(b, fieldSpanLinks)
	tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
	b = appendTag(b, fieldLinkTraceID, protowire.BytesType)
	b = protowire.AppendBytes(b, tid[:])
	b = appendTag(b, fieldLinkSpanID, protowire.BytesType)
	b = protowire.AppendBytes(b, sid[:])
	for _, kv := range l.Attributes {
		b = appendKeyValue(b, fieldLinkAttributes, kv)
	}
	b = appendVarint(b, fieldLinkDroppedAttrs, uint64(clampUint32(l.DroppedAttributeCount)))
	b = appendFixed32(b, fieldLinkFlags, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
	return closeLen(b, at)
}

// appendKeyValue appends kv as field num, a KeyValue.
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, at := openLen(b, num)
	b = appendString(b, fieldKeyValueKey, string(kv.Key))
	b, v := openLen(b, fieldKeyValueValue)
	b = appendAnyValue(b, kv.Value)
	b = closeLen(b, v)
	return closeLen(b, at)
}

// appendAnyValue appends v's AnyValue content (anyValue's): its one
// field, which is sent even when it holds its type's zero; an empty
// value none, an invalid one the string "INVALID".
func appendAnyValue(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		b = appendTag(b, fieldAnyBool, protowire.VarintType)
		return appendUvarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = appendTag(b, fieldAnyInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(v.AsInt64())) //nolint:gosec // int64's two's complement, as protobuf sends it
	case attribute.FLOAT64:
		b = appendTag(b, fieldAnyDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = appendTag(b, fieldAnyString, protowire.BytesType)
		return appendBytes(b, v.AsString())
	case attribute.BYTESLICE:
		b = appendTag(b, fieldAnyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		return appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		b, at := openLen(b, fieldAnyKVList)
		for _, kv := range v.AsMap() {
			b = appendKeyValue(b, fieldListValues, kv)
		}
		return closeLen(b, at)
	case attribute.EMPTY:
		return b
	default:
		b = appendTag(b, fieldAnyString, protowire.BytesType)
		return protowire.AppendString(b, "INVALID")
	}
}

// appendArray appends vals, each made a Value by value, as an
// AnyValue's array.
func appendArray[T any](b []byte, vals []T, value func(T) attribute.Value) []byte {
	b, at := openLen(b, fieldAnyArray)
	for _, e := range vals {
		var ev int
		b, ev = openLen(b, fieldListValues)
		b = appendAnyValue(b, value(e))
		b = closeLen(b, ev)
	}
	return closeLen(b, at)
}
