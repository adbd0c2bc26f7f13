package webhook_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir/webhook"
)

// A delivery sent in a traced context carries its traceparent to the
// receiver; one sent in an untraced context carries none.
func TestSendPropagatesTraceContext(t *testing.T) {
	t.Parallel()
	secret := mustSecret(t)
	rcv := newReceiver(t, secret, fixedNow, http.StatusOK)
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true, Now: fixedNow})
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	traced := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	for _, ctx := range []context.Context{traced, context.Background()} {
		msg := webhook.Message{URL: rcv.srv.URL, ID: "evt_1", Body: []byte(`{}`), Signer: mustSigner(t, secret)}
		if a, err := sender.Send(ctx, msg); err != nil || a.Outcome != webhook.Delivered {
			t.Fatalf("Send = %+v, %v", a, err)
		}
	}
	got := rcv.requests()
	if tp := got[0].header.Get("Traceparent"); tp != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Errorf("traced delivery's traceparent %q", tp)
	}
	if tp := got[1].header.Get("Traceparent"); tp != "" {
		t.Errorf("untraced delivery's traceparent %q", tp)
	}
}
