package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/gateway"
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

// messagesText is the text of the first part of the first message of
// gen_ai.output.messages (or of gen_ai.input.messages' last message).
func messagesText(t *testing.T, v any, last bool) string {
	t.Helper()
	s, _ := v.(string)
	var msgs []struct {
		Role  string
		Parts []struct {
			Type    string
			Content string
		}
		FinishReason string `json:"finish_reason"`
	}
	if err := json.Unmarshal([]byte(s), &msgs); err != nil || len(msgs) == 0 || len(msgs[0].Parts) == 0 {
		t.Fatalf("messages %q: %v", s, err)
	}
	m := msgs[0]
	if last {
		m = msgs[len(msgs)-1]
	}
	return m.Parts[0].Content
}

// With content capture on, each client span records the messages sent
// (gen_ai.input.messages) and those that came back
// (gen_ai.output.messages), from a whole answer and from a stream, each
// cut at its bound with a mark; the access log has no prompt still.
func TestTraceContentCaptured(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	b, rcv := tracedSetup(t, setupOpts{gwCfg: gateway.Config{CaptureContent: true},
		deps: func(d *Deps) { d.Logger = slog.New(slog.NewJSONHandler(logs, nil)) }})
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","stream":` + map[bool]string{false: "false", true: "true"}[stream] +
			`,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"a captured prompt"}]}`
		resp := b.post(t, "/v1/chat/completions", body, nil)
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, answer)
		}
		spans := rcv.WaitFor(t, func(spans []otlptest.Span) bool {
			n := 0
			for _, s := range spans {
				if s.Name == "chat gpt-4o-mini" {
					n++
				}
			}
			return n == map[bool]int{false: 1, true: 2}[stream]
		})
		var client *otlptest.Span
		for i := range spans {
			if spans[i].Name == "chat gpt-4o-mini" {
				client = &spans[i]
			}
		}
		if got := messagesText(t, client.Attrs["gen_ai.input.messages"], true); got != "a captured prompt" {
			t.Errorf("stream %v: input messages %v", stream, client.Attrs["gen_ai.input.messages"])
		}
		out := messagesText(t, client.Attrs["gen_ai.output.messages"], false)
		if out == "" || !strings.Contains(string(answer), strings.Fields(out)[0]) {
			t.Errorf("stream %v: output messages %v; the answer %s", stream, client.Attrs["gen_ai.output.messages"], answer)
		}
		if client.Attrs["weir.content.truncated"] != nil {
			t.Errorf("stream %v: marked truncated", stream)
		}
	}
	if l := logs.String(); !strings.Contains(l, `"msg":"request"`) || strings.Contains(l, "captured prompt") {
		t.Errorf("the access log:\n%s", l)
	}
}

// A captured prompt past the bound is cut with a mark, and the span says
// it was.
func TestTraceContentBounded(t *testing.T) {
	t.Parallel()
	b, rcv := tracedSetup(t, setupOpts{gwCfg: gateway.Config{CaptureContent: true}})
	long := strings.Repeat("many words ", 4000) // 44 KB
	client := tracedCall(t, b, rcv, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"`+long+`"}]}`, "chat gpt-4o-mini", nil)
	in, _ := client.Attrs["gen_ai.input.messages"].(string)
	if len(in) > 17<<10 || !strings.Contains(in, "…[truncated]") {
		t.Errorf("input messages of %d bytes, ending %q", len(in), in[max(len(in)-40, 0):])
	}
	if client.Attrs["weir.content.truncated"] != true {
		t.Errorf("not marked truncated: %v", client.Attrs["weir.content.truncated"])
	}
}
