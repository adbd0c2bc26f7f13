package edge

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

// A traced run carries its trace context to the node in its Offer,
// across a relay between replicas too; an untraced one carries none.
func TestRunCarriesTraceContext(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	traced := trace.ContextWithSpanContext(t.Context(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	const want = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name string
		r    *Relay
		ctx  context.Context
		want string
	}{
		{"on this replica's hub", rb.here, traced, want},
		{"relayed from another replica", rb.there, traced, want},
		{"untraced", rb.there, t.Context(), ""},
	} {
		res := relayDo(tc.ctx, tc.r, rb.target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
		o := rb.s.offer()
		if o.Traceparent != tc.want {
			t.Errorf("%s: the offer's traceparent %q, want %q", tc.name, o.Traceparent, tc.want)
		}
		rs, err := rb.openRun(t, "wn-a", o.RunId, rb.s.gen)
		if err != nil {
			t.Fatal(err)
		}
		if got := readBody(t, rs); !strings.Contains(got, "{}") {
			t.Fatalf("body %q", got)
		}
		for _, m := range []any{streamHead, &edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}} {
			if err := rs.Send(up(m)); err != nil {
				t.Fatal(err)
			}
		}
		if r := <-res; r.err != nil {
			t.Fatalf("%s: %v", tc.name, r.err)
		}
	}
}
