package mock

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

var anthropicHeaders = map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-test"}

func messagesWith(extra map[string]any) map[string]any {
	m := map[string]any{
		"model":      "claude-test",
		"max_tokens": 1024,
		"messages":   []map[string]any{{"role": "user", "content": "Say hello to the mock provider."}},
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// expectAnthropicError checks Anthropic's error JSON and returns its
// error object.
func expectAnthropicError(t *testing.T, resp *http.Response, status int, typ string) map[string]any {
	t.Helper()
	b := expectStatus(t, resp, status)
	m := obj(t, b)
	if m["type"] != "error" {
		t.Fatalf("not Anthropic's error shape: %s", b)
	}
	e, ok := m["error"].(map[string]any)
	if !ok || e["type"] != typ || e["message"] == "" {
		t.Fatalf("error %s, want type %s and a message", b, typ)
	}
	return e
}

func TestMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 6})
	resp := f.post("/v1/messages", messagesWith(map[string]any{"system": "Be brief."}), anthropicHeaders)
	m := obj(t, expectStatus(t, resp, http.StatusOK))
	hasKeys(t, "message", m, "id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage")
	if !strings.HasPrefix(m["id"].(string), "msg_") || m["type"] != "message" || m["role"] != "assistant" || m["model"] != "claude-test" {
		t.Errorf("message head %v", m)
	}
	content := m["content"].([]any)
	block := content[0].(map[string]any)
	if len(content) != 1 || block["type"] != "text" || block["text"] != "This is a mock answer. Done." {
		t.Errorf("content %v", content)
	}
	if m["stop_reason"] != "end_turn" || m["stop_sequence"] != nil {
		t.Errorf("stop %v %v", m["stop_reason"], m["stop_sequence"])
	}
	u := m["usage"].(map[string]any)
	// 3 + 3 for the turn + 8 for its text + 3 for the system prompt.
	if u["input_tokens"] != 17.0 || u["output_tokens"] != 6.0 || u["cache_read_input_tokens"] != 0.0 || u["cache_creation_input_tokens"] != 0.0 {
		t.Errorf("usage %v", u)
	}
}

func TestMessageMaxTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 10})
	m := obj(t, expectStatus(t, f.post("/v1/messages", messagesWith(map[string]any{"max_tokens": 3}), anthropicHeaders), http.StatusOK))
	if m["stop_reason"] != "max_tokens" || m["usage"].(map[string]any)["output_tokens"] != 3.0 {
		t.Fatalf("got %v", m)
	}
}

var weatherTool = map[string]any{"name": "get_weather", "description": "Weather", "input_schema": map[string]any{
	"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}

func TestMessageToolUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	m := obj(t, expectStatus(t, f.post("/v1/messages", messagesWith(map[string]any{"tools": []any{weatherTool}}), anthropicHeaders), http.StatusOK))
	block := m["content"].([]any)[0].(map[string]any)
	if m["stop_reason"] != "tool_use" || block["type"] != "tool_use" || block["name"] != "get_weather" || !strings.HasPrefix(block["id"].(string), "toolu_") {
		t.Fatalf("got %v", m)
	}
	if city, ok := block["input"].(map[string]any)["city"].(string); !ok || city == "" {
		t.Fatalf("input %v: want the schema's shape", block["input"])
	}

	// The tool's result answered, "auto" answers in text: the loop ends.
	next := messagesWith(map[string]any{"tools": []any{weatherTool}, "messages": []any{
		map[string]any{"role": "user", "content": "Weather?"},
		map[string]any{"role": "assistant", "content": []any{block}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": block["id"], "content": "sunny"}}},
	}})
	m = obj(t, expectStatus(t, f.post("/v1/messages", next, anthropicHeaders), http.StatusOK))
	if m["stop_reason"] != "end_turn" || m["content"].([]any)[0].(map[string]any)["type"] != "text" {
		t.Fatalf("after the result: %v", m)
	}
	// "any" calls a tool all the same; "none" never does.
	next["tool_choice"] = map[string]any{"type": "any"}
	m = obj(t, expectStatus(t, f.post("/v1/messages", next, anthropicHeaders), http.StatusOK))
	if m["stop_reason"] != "tool_use" {
		t.Fatalf("any: %v", m)
	}
	m = obj(t, expectStatus(t, f.post("/v1/messages", messagesWith(map[string]any{"tools": []any{weatherTool}, "tool_choice": map[string]any{"type": "none"}}), anthropicHeaders), http.StatusOK))
	if m["stop_reason"] != "end_turn" {
		t.Fatalf("none: %v", m)
	}
	expectAnthropicError(t, f.post("/v1/messages", messagesWith(map[string]any{"tools": []any{weatherTool}, "tool_choice": map[string]any{"type": "tool", "name": "nope"}}), anthropicHeaders),
		http.StatusBadRequest, "invalid_request_error")
}

// anthropicEvents splits a Messages stream into its events, checking the
// framing: "event: <type>" then "data: <json of that type>", then a
// blank line.
func anthropicEvents(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\n")
		name, ok1 := strings.CutPrefix(name, "event: ")
		data, ok2 := strings.CutPrefix(data, "data: ")
		if !ok || !ok1 || !ok2 {
			t.Fatalf("bad event %q", ev)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil || m["type"] != name {
			t.Fatalf("event %s with data %s", name, data)
		}
		out = append(out, m)
	}
	return out
}

func TestMessageStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 4})
	resp := f.post("/v1/messages", messagesWith(map[string]any{"stream": true}), anthropicHeaders)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	evs := anthropicEvents(t, expectStatus(t, resp, http.StatusOK))
	var types []string
	var text string
	for _, ev := range evs {
		types = append(types, ev["type"].(string))
		if d, ok := ev["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			text += d["text"].(string)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	if text != "And that is all." {
		t.Errorf("text %q", text)
	}
	start := evs[0]["message"].(map[string]any)
	if start["usage"].(map[string]any)["input_tokens"] != 14.0 || start["stop_reason"] != nil || len(start["content"].([]any)) != 0 {
		t.Errorf("message_start %v", start)
	}
	md := evs[len(evs)-2]
	if md["delta"].(map[string]any)["stop_reason"] != "end_turn" || md["usage"].(map[string]any)["output_tokens"] != 4.0 {
		t.Errorf("message_delta %v", md)
	}
}

// TestMessageStreamError: X-Mock-Stream-Error ends a stream after half
// its tokens with an error event of that type, as Anthropic's overload.
func TestMessageStreamError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 4})
	h := map[string]string{"X-Mock-Stream-Error": "overloaded_error"}
	for k, v := range anthropicHeaders {
		h[k] = v
	}
	evs := anthropicEvents(t, expectStatus(t, f.post("/v1/messages", messagesWith(map[string]any{"stream": true}), h), http.StatusOK))
	var types []string
	for _, ev := range evs {
		types = append(types, ev["type"].(string))
	}
	if want := "message_start content_block_start ping content_block_delta content_block_delta error"; strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	if e := evs[len(evs)-1]["error"].(map[string]any); e["type"] != "overloaded_error" || e["message"] == "" {
		t.Errorf("error event %v", evs[len(evs)-1])
	}
}

func TestMessageStreamToolUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	evs := anthropicEvents(t, expectStatus(t, f.post("/v1/messages", messagesWith(map[string]any{"stream": true, "tools": []any{weatherTool}}), anthropicHeaders), http.StatusOK))
	cb := evs[1]["content_block"].(map[string]any)
	if cb["type"] != "tool_use" || cb["name"] != "get_weather" || len(cb["input"].(map[string]any)) != 0 {
		t.Fatalf("content_block_start %v", evs[1])
	}
	var js string
	for _, ev := range evs {
		if d, ok := ev["delta"].(map[string]any); ok && d["type"] == "input_json_delta" {
			js += d["partial_json"].(string)
		}
	}
	var input map[string]any
	if err := json.Unmarshal([]byte(js), &input); err != nil || input["city"] == nil {
		t.Fatalf("the deltas make %q, want the tool's input", js)
	}
	if evs[len(evs)-2]["delta"].(map[string]any)["stop_reason"] != "tool_use" {
		t.Errorf("message_delta %v", evs[len(evs)-2])
	}
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	body := messagesWith(nil)
	delete(body, "max_tokens")
	m := obj(t, expectStatus(t, f.post("/v1/messages/count_tokens", body, anthropicHeaders), http.StatusOK))
	if len(m) != 1 || m["input_tokens"] != 14.0 {
		t.Fatalf("got %v, want {input_tokens: 14}", m)
	}
}

func TestMessageErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{RetryAfter: 3 * time.Second})
	noMax := messagesWith(nil)
	delete(noMax, "max_tokens")
	for _, tc := range []struct {
		name   string
		body   any
		header map[string]string
		status int
		typ    string
	}{
		{"no version", messagesWith(nil), map[string]string{}, 400, "invalid_request_error"},
		{"no max_tokens", noMax, anthropicHeaders, 400, "invalid_request_error"},
		{"no messages", messagesWith(map[string]any{"messages": []any{}}), anthropicHeaders, 400, "invalid_request_error"},
		{"bad role", messagesWith(map[string]any{"messages": []any{map[string]any{"role": "system", "content": "x"}}}), anthropicHeaders, 400, "invalid_request_error"},
		{"not JSON", "{", anthropicHeaders, 400, "invalid_request_error"},
		{"forced 401", messagesWith(nil), map[string]string{"anthropic-version": "2023-06-01", "X-Mock-Status": "401"}, 401, "authentication_error"},
		{"forced 404", messagesWith(nil), map[string]string{"anthropic-version": "2023-06-01", "X-Mock-Status": "404"}, 404, "not_found_error"},
		{"forced 500", messagesWith(nil), map[string]string{"anthropic-version": "2023-06-01", "X-Mock-Status": "500"}, 500, "api_error"},
		{"forced 529", messagesWith(nil), map[string]string{"anthropic-version": "2023-06-01", "X-Mock-Status": "529"}, 529, "overloaded_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.post("/v1/messages", tc.body, tc.header)
			expectAnthropicError(t, resp, tc.status, tc.typ)
			if tc.status == 529 && resp.Header.Get("Retry-After") != "" {
				t.Errorf("a 529 with Retry-After %q", resp.Header.Get("Retry-After"))
			}
		})
	}
	resp := f.post("/v1/messages", messagesWith(nil), map[string]string{"anthropic-version": "2023-06-01", "X-Mock-Status": "429"})
	expectAnthropicError(t, resp, 429, "rate_limit_error")
	reset, err := time.Parse(time.RFC3339, resp.Header.Get("Anthropic-Ratelimit-Requests-Reset"))
	if resp.Header.Get("Retry-After") != "3" || resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" || err != nil || reset.Before(time.Now()) {
		t.Errorf("429 headers %v", resp.Header)
	}
}

func TestMessageCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{MaxConcurrent: 1, Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.ts.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("anthropic-version", "2023-06-01")
		if resp, err := f.ts.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	f.await(f.waiting, "the first request to hold its slot")
	expectAnthropicError(t, f.post("/v1/messages", messagesWith(nil), anthropicHeaders), http.StatusTooManyRequests, "rate_limit_error")
}

// TestMessageThinking: a request that enables thinking is answered with
// a signed thinking block before the text, whole and streamed, its
// tokens counted as output.
func TestMessageThinking(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 4})
	thinking := map[string]any{"type": "enabled", "budget_tokens": 1024}
	resp := f.post("/v1/messages", messagesWith(map[string]any{"max_tokens": 2048, "thinking": thinking}), anthropicHeaders)
	m := obj(t, expectStatus(t, resp, http.StatusOK))
	content := m["content"].([]any)
	th := content[0].(map[string]any)
	if len(content) != 2 || th["type"] != "thinking" || th["thinking"] != mockThinking || th["signature"] != mockSignature ||
		content[1].(map[string]any)["type"] != "text" {
		t.Fatalf("content %v", content)
	}
	if out := m["usage"].(map[string]any)["output_tokens"]; out != 8.0 {
		t.Errorf("output tokens %v, want 4 of text and 4 of thinking", out)
	}

	resp = f.post("/v1/messages", messagesWith(map[string]any{"max_tokens": 2048, "thinking": thinking, "stream": true}), anthropicHeaders)
	evs := anthropicEvents(t, expectStatus(t, resp, http.StatusOK))
	var types []string
	var thought, signature, text string
	for _, ev := range evs {
		types = append(types, ev["type"].(string))
		d, _ := ev["delta"].(map[string]any)
		switch {
		case d["type"] == "thinking_delta" && ev["index"] == 0.0:
			thought += d["thinking"].(string)
		case d["type"] == "signature_delta" && ev["index"] == 0.0:
			signature = d["signature"].(string)
		case d["type"] == "text_delta" && ev["index"] == 1.0:
			text += d["text"].(string)
		}
	}
	want := "message_start content_block_start" + strings.Repeat(" content_block_delta", 5) + " content_block_stop content_block_start ping" +
		strings.Repeat(" content_block_delta", 4) + " content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	if thought != mockThinking || signature != mockSignature || text != "And that is all." {
		t.Errorf("thinking %q, signature %q, text %q", thought, signature, text)
	}
	if out := evs[len(evs)-2]["usage"].(map[string]any)["output_tokens"]; out != 8.0 {
		t.Errorf("message_delta output tokens %v", out)
	}

	// Anthropic's bounds on the budget.
	for _, th := range []map[string]any{{"type": "enabled", "budget_tokens": 512}, {"type": "enabled", "budget_tokens": 4096}, {"type": "on"}} {
		resp = f.post("/v1/messages", messagesWith(map[string]any{"max_tokens": 2048, "thinking": th}), anthropicHeaders)
		expectAnthropicError(t, resp, http.StatusBadRequest, "invalid_request_error")
	}
}
