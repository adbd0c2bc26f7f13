package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// nativeCall is b.chat with its Responses form for the platforms that
// speak it.
func (b *testBundle) nativeCall(t *testing.T, n Native) *Call {
	c := b.chat(t)
	n.Path, n.Body = "/responses", rawBody(`{"model":"m","input":"hi"}`)
	if n.API == "" {
		n.API = APIResponses
	}
	c.Native = &n
	return c
}

// TestNativeCallsByCandidate: a Responses request goes as it came to a
// platform that speaks the API and translated to an edge node; what only
// the former can serve skips the nodes, and a bound response's platform
// is the only one tried.
func TestNativeCallsByCandidate(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	b := setup(t, setupOpts{nodes: nodes})
	nodes.set(b.nodeTarget(t, "node_a", 1))

	// Translatable: the node, first in order, gets the chat completion.
	c := b.nativeCall(t, Native{})
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || out.head.Native {
		t.Fatalf("serve: %v, head %+v", err, out.head)
	}
	if len(nodes.calls) != 1 || !strings.Contains(nodes.calls[0], `"messages"`) {
		t.Fatalf("node calls %q", nodes.calls)
	}

	// Only natively: the node is skipped, up/m gets the Responses body.
	c = b.nativeCall(t, Native{Only: "tools[0].type"})
	out = recordedAnswer{}
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || !out.head.Native || out.head.Platform != "up" {
		t.Fatalf("serve: %v, head %+v", err, out.head)
	}
	if len(nodes.calls) != 1 || c.Usage.PlatformModel != "up/m" || !strings.Contains(out.body.String(), `"object":"response"`) {
		t.Fatalf("node calls %q, served by %s: %s", nodes.calls, c.Usage.PlatformModel, out.body.String())
	}
	if c.Usage.PromptTokens == 0 || c.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v: the Responses usage was not read", c.Usage)
	}

	// Bound to up2: up/m, first in order, is passed over.
	c = b.nativeCall(t, Native{Only: "previous_response_id", Platform: "up2"})
	out = recordedAnswer{}
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || out.head.Platform != "up2" || c.Usage.PlatformModel != "up2/m" {
		t.Fatalf("serve: %v, head %+v, served by %s", err, out.head, c.Usage.PlatformModel)
	}
	// Bound to a platform the model has no candidate on: refused.
	c = b.nativeCall(t, Native{Only: "previous_response_id", Platform: "elsewhere"})
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var e *Error
	if !errors.As(err, &e) || e.Category != ErrUnservable || e.Param != "previous_response_id" {
		t.Fatalf("serve: %v", err)
	}
}

// TestNativeOnlyWithoutNativeCandidates: a model whose platforms all
// translate refuses what only a native candidate serves, naming it.
func TestNativeOnlyWithoutNativeCandidates(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		for i := range c.Platforms {
			c.Platforms[i].TranslateResponses = true
		}
	}})
	c := b.nativeCall(t, Native{Only: "store"})
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var e *Error
	if !errors.As(err, &e) || e.Category != ErrUnservable || e.Param != "store" || c.Usage.Outcome != string(weir.CodeNoCandidate) {
		t.Fatalf("serve: %v, outcome %s", err, c.Usage.Outcome)
	}
	// Translatable, it is served translated.
	c = b.nativeCall(t, Native{})
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || out.head.Native {
		t.Fatalf("serve: %v, head %+v", err, out.head)
	}
}

// TestNativeMessages: a Messages request goes as it came to a candidate
// on an anthropic platform, translated to the others; its stream passes
// through whole, and its tokens are read from message_start's usage and
// message_delta's.
func TestNativeMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.Platforms[0].Kind = "anthropic" // up/m: first in order
	}})
	const stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":20,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	var got provider.Call
	b.setExec("up", func(_ context.Context, call provider.Call) (*http.Response, error) {
		got = call
		resp, _ := answerWith("text/event-stream", strings.NewReader(stream))
		return resp, nil
	})
	c := b.chat(t)
	c.Stream = true
	c.Native = &Native{API: APIMessages, Path: "/messages", Body: rawBody(`{"model":"m","max_tokens":5,"stream":true,"messages":[]}`)}
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil || out.head == nil || !out.head.Native || out.head.Platform != "up" {
		t.Fatalf("serve: %v, head %+v", err, out.head)
	}
	if got.Path != "/messages" || !strings.Contains(string(got.Body), `"max_tokens":5`) || out.body.String() != stream {
		t.Fatalf("sent %s %s; passed back %q", got.Path, got.Body, out.body.String())
	}
	if c.Usage.PromptTokens != 25 || c.Usage.CompletionTokens != 9 || c.Usage.Outcome != string(OutcomeOK) {
		t.Errorf("usage %+v: want 25 prompt tokens, 9 completion tokens, ok", c.Usage)
	}

	// The Responses API is not the anthropic platform's: what only a
	// native candidate serves goes to none of it.
	c = b.nativeCall(t, Native{Only: "store"})
	c.Model.Candidates = c.Model.Candidates[:1]
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var e *Error
	if !errors.As(err, &e) || e.Category != ErrUnservable || e.Param != "store" {
		t.Fatalf("serve: %v", err)
	}
	// And a Messages request only an anthropic candidate serves skips
	// the others.
	c = b.chat(t)
	c.Native = &Native{API: APIMessages, Path: "/messages", Only: "thinking", Body: rawBody(`{"model":"m","max_tokens":5,"messages":[]}`)}
	c.Model.Candidates = c.Model.Candidates[1:]
	err = b.svc.Serve(t.Context(), c, &recordedAnswer{})
	if !errors.As(err, &e) || e.Category != ErrUnservable || e.Param != "thinking" || !strings.Contains(e.Message, "Messages API") {
		t.Fatalf("serve: %v", err)
	}
	// So does a model of no platform's (edge nodes' alone).
	c.Model.Candidates = nil
	err = b.svc.Serve(t.Context(), c, &recordedAnswer{})
	if !errors.As(err, &e) || e.Category != ErrUnservable || e.Param != "thinking" {
		t.Fatalf("serve, a model without candidates: %v", err)
	}
}
