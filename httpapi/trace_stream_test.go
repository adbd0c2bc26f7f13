package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/internal/otlptest"
)

// tracedCall posts body to path on b and returns the client span of its
// upstream call, named span.
func tracedCall(t *testing.T, b *testBundle, rcv *otlptest.Receiver, path, body, span string, h http.Header) *otlptest.Span {
	t.Helper()
	resp := b.post(t, path, body, h)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	return otlptest.Find(rcv.Named(t, "POST "+path, span), span)
}

// wantAttrs reports each of want that s lacks.
func wantAttrs(t *testing.T, s *otlptest.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if s.Attrs[k] != v {
			t.Errorf("client span %s = %v (%T), want %v", k, s.Attrs[k], s.Attrs[k], v)
		}
	}
}

// noContent reports any content attribute on s, and any attribute that
// holds text.
func noContent(t *testing.T, s *otlptest.Span, text string) {
	t.Helper()
	for k, v := range s.Attrs {
		if strings.HasPrefix(k, "gen_ai.input") || strings.HasPrefix(k, "gen_ai.output") || k == "gen_ai.system_instructions" {
			t.Errorf("content recorded without the opt-in: %s", k)
		}
		if str, ok := v.(string); ok && strings.Contains(str, text) {
			t.Errorf("span records the prompt in %s", k)
		}
	}
}

// A streamed Chat Completions answer gives its client span the response
// model, id and finish reasons read from its chunks, and the usage its
// last chunk reported; nothing of its content.
func TestTraceOfAChatStream(t *testing.T) {
	t.Parallel()
	b, rcv := tracedSetup(t, setupOpts{})
	client := tracedCall(t, b, rcv, "/v1/chat/completions",
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"a secret prompt"}]}`, "chat gpt-4o-mini", nil)
	wantAttrs(t, client, map[string]any{"gen_ai.response.model": "gpt-4o-mini"})
	if id, _ := client.Attrs["gen_ai.response.id"].(string); !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("response id %q", id)
	}
	if !containsAll(client.Attrs["gen_ai.response.finish_reasons"], "stop") {
		t.Errorf("finish reasons %v", client.Attrs["gen_ai.response.finish_reasons"])
	}
	if in, _ := client.Attrs["gen_ai.usage.input_tokens"].(int64); in <= 0 {
		t.Errorf("input tokens %v", client.Attrs["gen_ai.usage.input_tokens"])
	}
	if out, _ := client.Attrs["gen_ai.usage.output_tokens"].(int64); out <= 0 {
		t.Errorf("output tokens %v", client.Attrs["gen_ai.usage.output_tokens"])
	}
	noContent(t, client, "secret prompt")
}

// A stream that reports no usage has none on its span: the gateway's
// count of its chunks is not the upstream's usage.
func TestTraceOfAChatStreamWithoutUsage(t *testing.T) {
	t.Parallel()
	b, rcv := tracedSetup(t, setupOpts{})
	client := tracedCall(t, b, rcv, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "chat gpt-4o-mini", nil)
	wantAttrs(t, client, map[string]any{"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": nil, "gen_ai.usage.output_tokens": nil})
	if !containsAll(client.Attrs["gen_ai.response.finish_reasons"], "stop") {
		t.Errorf("finish reasons %v", client.Attrs["gen_ai.response.finish_reasons"])
	}
}

// Streams passed through in the dialect the client spoke (the Responses
// API to an openai platform, Messages to an anthropic one) give their
// spans the same, read from their events.
func TestTraceOfNativeStreams(t *testing.T) {
	t.Parallel()
	t.Run("responses", func(t *testing.T) {
		t.Parallel()
		b, rcv := tracedSetup(t, setupOpts{})
		client := tracedCall(t, b, rcv, "/v1/responses", `{"model":"m","stream":true,"input":"a secret prompt"}`, "chat gpt-4o-mini", nil)
		wantAttrs(t, client, map[string]any{"gen_ai.response.model": "gpt-4o-mini"})
		if id, _ := client.Attrs["gen_ai.response.id"].(string); !strings.HasPrefix(id, "resp_") {
			t.Errorf("response id %q", id)
		}
		if !containsAll(client.Attrs["gen_ai.response.finish_reasons"], "completed") {
			t.Errorf("finish reasons %v", client.Attrs["gen_ai.response.finish_reasons"])
		}
		if client.Attrs["gen_ai.usage.output_tokens"] == nil {
			t.Errorf("no usage: %v", client.Attrs)
		}
		noContent(t, client, "secret prompt")
	})
	t.Run("messages", func(t *testing.T) {
		t.Parallel()
		b, rcv := tracedSetup(t, setupOpts{catalog: anthropicCatalog()})
		client := tracedCall(t, b, rcv, "/v1/messages", `{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"a secret prompt"}]}`,
			"chat claude-up", http.Header{"Authorization": nil, "X-Api-Key": {b.key}, "Anthropic-Version": {"2023-06-01"}})
		wantAttrs(t, client, map[string]any{"gen_ai.response.model": "claude-up", "gen_ai.provider.name": "anthropic"})
		if id, _ := client.Attrs["gen_ai.response.id"].(string); !strings.HasPrefix(id, "msg_") {
			t.Errorf("response id %q", id)
		}
		if !containsAll(client.Attrs["gen_ai.response.finish_reasons"], "end_turn") {
			t.Errorf("finish reasons %v", client.Attrs["gen_ai.response.finish_reasons"])
		}
		if client.Attrs["gen_ai.usage.output_tokens"] == nil {
			t.Errorf("no usage: %v", client.Attrs)
		}
		noContent(t, client, "secret prompt")
	})
}
