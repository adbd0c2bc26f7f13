package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider/mock"
)

// The Messages API passed through to platforms of kind anthropic.

// mixedCatalog: model "m" over an openai platform (first in order) and an
// anthropic one; model "o" on the openai platform alone.
func mixedCatalog() *weir.Catalog {
	return &weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}, {Name: "ant", Kind: "anthropic", BaseURL: "UP", APIKey: "sk-ant"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"},
			{Name: "ant/c", Platform: "ant", Upstream: "claude-up"}},
		Models: []weir.Model{
			{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Priority: 2, Weight: 1}, {PlatformModel: "ant/c", Priority: 1, Weight: 1}}},
			{Name: "o", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}},
		},
	}
}

const thinkingBody = `{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` +
	`"messages":[{"role":"user","content":[{"type":"text","text":"Say hello.","cache_control":{"type":"ephemeral"}}]}]}`

// A Messages request whose candidate is on an anthropic platform goes to
// its /messages as the client sent it, the model its upstream name, with
// the client's anthropic-version and anthropic-beta; the answer, whole
// or streamed, thinking blocks and all, comes back as the upstream gave
// it, and its usage is settled and recorded from the Messages shapes.
func TestMessagesPassedThrough(t *testing.T) {
	t.Parallel()
	var tp tap
	var usage usageLog
	b := setup(t, setupOpts{upstream: tp.wrap, catalog: anthropicCatalog(), mock: mock.Config{CompletionTokens: 7},
		deps: func(d *Deps) { d.Usage = usage.record }})
	header := http.Header{"Authorization": nil, "X-Api-Key": {b.key}, "Anthropic-Version": {"2023-06-01"},
		"Anthropic-Beta": {"interleaved-thinking-2025-05-14"}}

	t.Run("whole", func(t *testing.T) {
		resp := b.post(t, "/v1/messages", thinkingBody, header)
		got := readAllBody(t, resp)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Request-Id") == "" {
			t.Fatalf("status %d, headers %v: %s", resp.StatusCode, resp.Header, got)
		}
		ex := tp.last(t, "/v1/messages")
		if want := strings.Replace(thinkingBody, `"m"`, `"claude-up"`, 1); string(ex.body) != want {
			t.Errorf("the upstream received %s\nwant %s", ex.body, want)
		}
		if ex.header.Get("Anthropic-Beta") != "interleaved-thinking-2025-05-14" || ex.header.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("the upstream's headers %v", ex.header)
		}
		if !bytes.Equal(got, ex.answer) {
			t.Errorf("the client got %s\nthe upstream answered %s", got, ex.answer)
		}
		var m struct {
			Content []struct{ Type, Signature string }
		}
		if err := json.Unmarshal(got, &m); err != nil || len(m.Content) != 2 || m.Content[0].Type != "thinking" || m.Content[0].Signature == "" {
			t.Fatalf("answer %s", got)
		}
		var in struct {
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(got, &in)
		u := usage.last(t, 1)
		if u.Endpoint != "messages" || u.PromptTokens != in.Usage.InputTokens || u.CompletionTokens != in.Usage.OutputTokens || u.CompletionTokens == 0 ||
			u.Outcome != string(gateway.OutcomeOK) {
			t.Errorf("usage record %+v; the answer's usage %+v", u, in.Usage)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		body := strings.Replace(thinkingBody, `{"model"`, `{"stream":true,"model"`, 1)
		resp := b.post(t, "/v1/messages", body, http.Header{"Authorization": nil, "X-Api-Key": {b.key}})
		got := readAllBody(t, resp)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("headers %v", resp.Header)
		}
		ex := tp.last(t, "/v1/messages")
		if ex.header.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("no anthropic-version from the client: the upstream got %q", ex.header.Get("Anthropic-Version"))
		}
		if !bytes.Equal(got, ex.answer) || !strings.Contains(string(got), `"thinking_delta"`) || !strings.Contains(string(got), `"signature_delta"`) {
			t.Errorf("the client got %s\nthe upstream answered %s", got, ex.answer)
		}
		evs := readMessagesEvents(t, resp2(got))
		start := evs[0].data["message"].(map[string]any)["usage"].(map[string]any)
		final := evs[len(evs)-2].data["usage"].(map[string]any)
		u := usage.last(t, 2)
		if u.PromptTokens != int64(start["input_tokens"].(float64)) || u.CompletionTokens != int64(final["output_tokens"].(float64)) ||
			u.Outcome != string(gateway.OutcomeOK) {
			t.Errorf("usage record %+v; message_start %v, message_delta %v", u, start, final)
		}
	})

	t.Run("refused", func(t *testing.T) {
		// The upstream's own refusal, in Anthropic's shape.
		resp := b.post(t, "/v1/messages", `{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":4096},"messages":[{"role":"user","content":"hi"}]}`, header)
		e := anthropicErrorOf(t, resp, http.StatusBadRequest, "invalid_request_error")
		if !strings.Contains(e["message"].(string), "budget_tokens") {
			t.Errorf("error %v", e)
		}
	})
}

// resp2 is a response whose body is b.
func resp2(b []byte) *http.Response {
	return &http.Response{Body: readCloser{bytes.NewReader(b)}}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// What the translation cannot carry goes to an anthropic candidate only,
// though another is first in order; a model with none refuses it naming
// the parameter. What it can carry takes the first candidate, translated.
func TestMessagesUntranslatableGoNative(t *testing.T) {
	t.Parallel()
	var tp tap
	b := setup(t, setupOpts{upstream: tp.wrap, catalog: mixedCatalog()})
	for _, body := range []string{
		thinkingBody,
		`{"model":"m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}},{"type":"text","text":"Sum up."}]}]}`,
		`{"model":"m","max_tokens":50,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"it failed"}]}]}`,
	} {
		resp := b.postMessages(t, "/v1/messages", body)
		got := readAllBody(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", body, resp.StatusCode, got)
		}
		if ex := tp.last(t, "/v1/messages"); !bytes.Equal(ex.answer, got) || !strings.Contains(string(ex.body), `"model":"claude-up"`) {
			t.Errorf("%s: the upstream received %s", body, ex.body)
		}
	}
	if n := len(tp.to("/v1/chat/completions")); n != 0 {
		t.Errorf("the openai candidate, first in order, was sent %d requests", n)
	}
	// Translatable: the openai candidate, translated.
	resp := b.postMessages(t, "/v1/messages", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	if got := readAllBody(t, resp); resp.StatusCode != http.StatusOK || len(tp.to("/v1/chat/completions")) != 1 || !strings.Contains(string(got), `"type":"message"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	// No anthropic candidate.
	e := anthropicErrorOf(t, b.postMessages(t, "/v1/messages", strings.Replace(thinkingBody, `"m"`, `"o"`, 1)), http.StatusBadRequest, "invalid_request_error")
	if e["code"] != string(weir.CodeNoCandidate) || !strings.Contains(e["message"].(string), "thinking") {
		t.Errorf("a model without an anthropic candidate: %v", e)
	}
}

// One request may fall back from an anthropic candidate, sent the
// request as it came, to an openai one, sent its translation; the answer
// writer translates what the second sends.
func TestMessagesFallBackToTranslation(t *testing.T) {
	t.Parallel()
	tp := tap{refuse: func(r *http.Request) int {
		if r.URL.Path == "/v1/messages" {
			return http.StatusServiceUnavailable
		}
		return 0
	}}
	cat := mixedCatalog()
	cat.Models[0].Candidates[0].Priority, cat.Models[0].Candidates[1].Priority = 1, 2 // the anthropic one first
	for _, stream := range []bool{false, true} {
		b := setup(t, setupOpts{upstream: tp.wrap, catalog: cat})
		body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		resp := b.postMessages(t, "/v1/messages", body)
		got := readAllBody(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, got)
		}
		if len(tp.to("/v1/messages")) == 0 || len(tp.to("/v1/chat/completions")) == 0 {
			t.Fatalf("stream %v: calls %v", stream, len(tp.all))
		}
		if !stream {
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil || m["type"] != "message" || m["model"] != "gpt-4o-mini" {
				t.Errorf("the translated answer %s", got)
			}
			continue
		}
		evs := readMessagesEvents(t, resp2(got))
		if evs[0].name != "message_start" || evs[1].name != "ping" || evs[len(evs)-1].name != "message_stop" {
			t.Errorf("the translated stream %s", got)
		}
	}
}

// count_tokens asks the anthropic platform of the model's first
// candidate, as the client sent it but for the model, and passes its
// count back; a model whose first candidate is another's answers Weir's
// estimate, asking no one.
func TestCountTokensAsksAnthropic(t *testing.T) {
	t.Parallel()
	var cannotCount atomic.Bool
	tp := tap{refuse: func(r *http.Request) int {
		if cannotCount.Load() && r.URL.Path == "/v1/messages/count_tokens" {
			return http.StatusServiceUnavailable
		}
		return 0
	}}
	cat := mixedCatalog()
	cat.Models = append(cat.Models, weir.Model{Name: "c", Kind: weir.KindChat, Candidates: []weir.Candidate{
		{PlatformModel: "ant/c", Priority: 2, Weight: 1}, {PlatformModel: "up/m", Priority: 1, Weight: 1}}})
	b := setup(t, setupOpts{upstream: tp.wrap, catalog: cat})
	body := `{"model":"c","system":"Be brief.","messages":[{"role":"user","content":"Hello there, how are you?"}]}`
	resp := b.postMessages(t, "/v1/messages/count_tokens", body)
	got := readAllBody(t, resp)
	ex := tp.last(t, "/v1/messages/count_tokens")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, ex.answer) || string(ex.body) != strings.Replace(body, `"c"`, `"claude-up"`, 1) ||
		ex.header.Get("X-Api-Key") != "sk-ant" {
		t.Fatalf("status %d, %s; the upstream got %s %v and answered %s", resp.StatusCode, got, ex.body, ex.header, ex.answer)
	}
	// Its refusal, in Anthropic's shape.
	resp = b.postMessages(t, "/v1/messages/count_tokens", `{"model":"c","thinking":{"type":"on"},"messages":[{"role":"user","content":"x"}]}`)
	e := anthropicErrorOf(t, resp, http.StatusBadRequest, "invalid_request_error")
	if !strings.Contains(e["message"].(string), "thinking.type") {
		t.Fatalf("a refused count: %v", e)
	}
	n := len(tp.to("/v1/messages/count_tokens"))
	// "m" tries the openai candidate first: the estimate.
	resp = b.postMessages(t, "/v1/messages/count_tokens", strings.Replace(body, `"c"`, `"m"`, 1))
	var m map[string]any
	if err := json.Unmarshal(readAllBody(t, resp), &m); err != nil || resp.StatusCode != http.StatusOK || m["input_tokens"].(float64) < 5 {
		t.Fatalf("status %d, %v", resp.StatusCode, m)
	}
	if len(tp.to("/v1/messages/count_tokens")) != n {
		t.Errorf("counting for an openai candidate asked the upstream")
	}
	// A platform that cannot count now: the estimate.
	cannotCount.Store(true)
	resp = b.postMessages(t, "/v1/messages/count_tokens", body)
	m = nil
	if err := json.Unmarshal(readAllBody(t, resp), &m); err != nil || resp.StatusCode != http.StatusOK || m["input_tokens"].(float64) < 5 ||
		len(tp.to("/v1/messages/count_tokens")) != n+1 {
		t.Fatalf("status %d, %v", resp.StatusCode, m)
	}
}

// A passed-through stream that the upstream breaks off ends with
// Anthropic's error event, after the events that got through.
func TestMessagesPassedThroughStreamFails(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var usage usageLog
	b := setup(t, setupOpts{
		clock:   clk,
		catalog: anthropicCatalog(),
		gwCfg:   gateway.Config{UpstreamIdleTimeout: 10 * time.Second},
		mock:    mock.Config{StallRate: 1, StallFor: time.Hour, CompletionTokens: 10},
		deps:    func(d *Deps) { d.Usage = usage.record },
	})
	var got []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.http.URL+"/v1/messages",
			strings.NewReader(`{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			return
		}
		req.Header.Set("X-Api-Key", b.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		got, _ = io.ReadAll(resp.Body)
	}()
	advanceUntil(t, clk, 5*time.Second, time.Minute, done)
	evs := readMessagesEvents(t, resp2(got))
	last := evs[len(evs)-1]
	e, _ := last.data["error"].(map[string]any)
	if last.name != "error" || e["type"] != "timeout_error" || e["code"] != string(weir.CodeUpstreamTimeout) || evs[len(evs)-2].name != "content_block_delta" {
		t.Fatalf("stream %s", got)
	}
	if got := usage.outcomes(t, 1); len(got) != 1 || got[0] != string(weir.CodeUpstreamTimeout) {
		t.Errorf("outcomes %v", got)
	}
}

// An anthropic platform's refusal keeps its type; an OpenAI one's gets
// the type of its status.
func TestRefusalOfKeepsAnthropicsType(t *testing.T) {
	t.Parallel()
	status, d := refusalOf(&gateway.RefusedError{Status: http.StatusBadRequest,
		Body: []byte(`{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low."},"request_id":"req_1"}`)})
	if status != http.StatusBadRequest || d.Type != "billing_error" || d.Message != "Your credit balance is too low." {
		t.Errorf("Anthropic's refusal: %d %+v", status, d)
	}
	status, d = refusalOf(&gateway.RefusedError{Status: http.StatusNotFound,
		Body: []byte(`{"error":{"type":"invalid_request_error","message":"no such model"}}`)})
	if status != http.StatusNotFound || d.Type != "not_found_error" || d.Message != "no such model" {
		t.Errorf("OpenAI's refusal: %d %+v", status, d)
	}
}
