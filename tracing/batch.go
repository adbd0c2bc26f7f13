package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// spanBatch is spans encoded for export as they end, in OTLP's wire
// format (encode.go), one after another in one buffer: what waits for
// an export holds bytes, not the spans with their attributes, which are
// garbage at once rather than held (and scanned by every collection)
// until the export. Each span is a ScopeSpans.spans field, noted with
// its resource and instrumentation scope (its group).
type spanBatch struct {
	buf    []byte
	spans  []batchSpan
	groups []spanGroup // in the order first seen
}

// batchSpan is a span of a spanBatch: its group, and where its bytes
// end in the buffer (they start where the one before ends).
type batchSpan struct {
	group int
	end   int
}

// spanGroup is a resource and instrumentation scope that spans share:
// one ScopeSpans of one ResourceSpans in the export.
type spanGroup struct {
	res   *resource.Resource
	key   attribute.Distinct // res's
	scope instrumentation.Scope
}

// len is the number of spans in b.
func (b *spanBatch) len() int { return len(b.spans) }

// add encodes sd at the end of b; a nil span is skipped.
func (b *spanBatch) add(sd sdktrace.ReadOnlySpan) {
	if sd == nil {
		return
	}
	g := b.group(sd.Resource(), sd.InstrumentationScope())
	b.buf = appendSpan(b.buf, fieldScopeSpans, sd)
	b.spans = append(b.spans, batchSpan{group: g, end: len(b.buf)})
}

// group is the index of the group of res and scope, added if new. The
// spans of one provider share their resource and, mostly, their scope:
// the last group is looked at first.
func (b *spanBatch) group(res *resource.Resource, scope instrumentation.Scope) int {
	for i := len(b.groups) - 1; i >= 0; i-- {
		if g := &b.groups[i]; g.scope == scope && (g.res == res || g.key == res.Equivalent()) {
			return i
		}
	}
	b.groups = append(b.groups, spanGroup{res: res, key: res.Equivalent(), scope: scope})
	return len(b.groups) - 1
}

// span is the bytes of b's i-th span.
func (b *spanBatch) span(i int) []byte {
	start := 0
	if i > 0 {
		start = b.spans[i-1].end
	}
	return b.buf[start:b.spans[i].end]
}

// reset empties b, keeping its room.
func (b *spanBatch) reset() {
	b.buf = b.buf[:0]
	b.spans = b.spans[:0]
	clear(b.groups)
	b.groups = b.groups[:0]
}

// moveFirst moves b's first n spans (fewer than all) to the empty
// batch to, and what is left of b to its start.
func (b *spanBatch) moveFirst(n int, to *spanBatch) {
	cut := b.spans[n-1].end
	to.buf = append(to.buf, b.buf[:cut]...)
	to.spans = append(to.spans, b.spans[:n]...)
	to.groups = append(to.groups, b.groups...)
	b.buf = b.buf[:copy(b.buf, b.buf[cut:])]
	rest := copy(b.spans, b.spans[n:])
	b.spans = b.spans[:rest]
	for i := range b.spans {
		b.spans[i].end -= cut
	}
}
