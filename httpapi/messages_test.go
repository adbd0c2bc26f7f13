package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// The Messages API in front, against an OpenAI-compatible upstream (the
// default catalog) and an Anthropic one (anthropicCatalog).

func anthropicCatalog() *weir.Catalog {
	return &weir.Catalog{
		Platforms:      []weir.Platform{{Name: "ant", Kind: "anthropic", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "ant/c", Platform: "ant", Upstream: "claude-up"}},
		Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "ant/c", Weight: 1}}}},
	}
}

// postMessages sends body to path as Anthropic's SDK does: the key as
// x-api-key, with anthropic-version.
func (b *testBundle) postMessages(t *testing.T, path, body string) *http.Response {
	t.Helper()
	return b.post(t, path, body, http.Header{"Authorization": nil, "X-Api-Key": {b.key}, "Anthropic-Version": {"2023-06-01"}})
}

func decodeMessagesJSON(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return m
}

// anthropicErrorOf checks an answer in Anthropic's error shape and
// returns its error.
func anthropicErrorOf(t *testing.T, resp *http.Response, status int, typ string) map[string]any {
	t.Helper()
	m := decodeMessagesJSON(t, resp)
	e, _ := m["error"].(map[string]any)
	if resp.StatusCode != status || m["type"] != "error" || e == nil || e["type"] != typ || e["message"] == "" || m["request_id"] == "" {
		t.Fatalf("status %d, %v; want %d with an error of type %s", resp.StatusCode, m, status, typ)
	}
	return e
}

type messagesEvent struct {
	name string
	data map[string]any
}

func readMessagesEvents(t *testing.T, resp *http.Response) []messagesEvent {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []messagesEvent
	for _, ev := range strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n") {
		name, data, _ := strings.Cut(ev, "\n")
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(data, "data: ")), &m); err != nil || "event: "+m["type"].(string) != name {
			t.Fatalf("bad event %q", ev)
		}
		out = append(out, messagesEvent{strings.TrimPrefix(name, "event: "), m})
	}
	return out
}

func TestMessagesAnswer(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			o := setupOpts{mock: mock.Config{CompletionTokens: 6}}
			if kind == "anthropic" {
				o.catalog = anthropicCatalog()
			}
			b := setup(t, o)
			resp := b.postMessages(t, "/v1/messages", `{"model":"m","max_tokens":100,"system":"Be brief.","messages":[{"role":"user","content":"Say hello."}]}`)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Request-Id") == "" {
				t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
			}
			m := decodeMessagesJSON(t, resp)
			content := m["content"].([]any)
			if m["type"] != "message" || m["role"] != "assistant" || len(content) != 1 || content[0].(map[string]any)["text"] != "This is a mock answer. Done." {
				t.Fatalf("answer %v", m)
			}
			u := m["usage"].(map[string]any)
			if m["stop_reason"] != "end_turn" || u["output_tokens"] != 6.0 || u["input_tokens"].(float64) < 1 {
				t.Fatalf("stop %v, usage %v", m["stop_reason"], u)
			}
			if n := b.mock.Stats().Requests; n != 1 {
				t.Fatalf("the mock saw %d requests", n)
			}
		})
	}
}

func TestMessagesStream(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			o := setupOpts{mock: mock.Config{CompletionTokens: 4}}
			if kind == "anthropic" {
				o.catalog = anthropicCatalog()
			}
			b := setup(t, o)
			resp := b.postMessages(t, "/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			evs := readMessagesEvents(t, resp)
			var names []string
			var text string
			for _, ev := range evs {
				names = append(names, ev.name)
				if d, ok := ev.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
					text += d["text"].(string)
				}
			}
			// Translated, the ping comes first and message_delta says the
			// input tokens; passed through, as Anthropic sends them.
			want := "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
			if kind == "anthropic" {
				want = "message_start content_block_start ping content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
			}
			if strings.Join(names, " ") != want || text != "And that is all." {
				t.Fatalf("events %v, text %q", names, text)
			}
			md := evs[len(evs)-2].data
			u := md["usage"].(map[string]any)
			if kind == "anthropic" {
				u["input_tokens"] = evs[0].data["message"].(map[string]any)["usage"].(map[string]any)["input_tokens"]
			}
			if md["delta"].(map[string]any)["stop_reason"] != "end_turn" || u["output_tokens"] != 4.0 || u["input_tokens"].(float64) < 1 {
				t.Fatalf("message_delta %v", md)
			}
		})
	}
}

func TestMessagesToolRoundTrip(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			o := setupOpts{}
			if kind == "anthropic" {
				o.catalog = anthropicCatalog()
			}
			b := setup(t, o)
			tools := `"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
			resp := b.postMessages(t, "/v1/messages", `{"model":"m","max_tokens":200,"tool_choice":{"type":"any"},`+tools+`,"messages":[{"role":"user","content":"Weather?"}]}`)
			m := decodeMessagesJSON(t, resp)
			use := m["content"].([]any)[0].(map[string]any)
			if resp.StatusCode != 200 || m["stop_reason"] != "tool_use" || use["type"] != "tool_use" || use["name"] != "get_weather" || use["input"].(map[string]any)["city"] == nil {
				t.Fatalf("status %d, answer %v", resp.StatusCode, m)
			}
			turn, _ := json.Marshal(map[string]any{"role": "assistant", "content": m["content"]})
			resp = b.postMessages(t, "/v1/messages", `{"model":"m","max_tokens":200,`+tools+`,"messages":[{"role":"user","content":"Weather?"},`+string(turn)+
				`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+use["id"].(string)+`","content":"sunny"}]}]}`)
			m = decodeMessagesJSON(t, resp)
			if resp.StatusCode != 200 || m["stop_reason"] != "end_turn" {
				t.Fatalf("after the result: status %d, %v", resp.StatusCode, m)
			}
		})
	}
}

// TestChatOverAnthropic: a Chat Completions client served by a platform
// of kind anthropic, streamed and not.
func TestChatOverAnthropic(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: anthropicCatalog(), mock: mock.Config{CompletionTokens: 5}})
	resp := b.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	m := decodeMessagesJSON(t, resp)
	if resp.StatusCode != 200 || m["object"] != "chat.completion" || m["usage"].(map[string]any)["completion_tokens"] != 5.0 {
		t.Fatalf("status %d, %v", resp.StatusCode, m)
	}
	resp = b.post(t, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasSuffix(string(raw), "data: [DONE]\n\n") || !strings.Contains(string(raw), `"completion_tokens":5`) {
		t.Fatalf("status %d, stream %s", resp.StatusCode, raw)
	}
	// Embeddings are not Anthropic's to serve: the catalog cannot say so
	// for a chat model, and the request is refused.
	resp = b.post(t, "/v1/embeddings", `{"model":"m","input":"x"}`, nil)
	if resp.StatusCode < 400 {
		t.Fatalf("embeddings on an anthropic platform: %d", resp.StatusCode)
	}
}

func TestMessagesAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	resp := b.post(t, "/v1/messages", body, http.Header{"Authorization": nil, "X-Api-Key": {"sk-wrong"}})
	anthropicErrorOf(t, resp, http.StatusUnauthorized, "authentication_error")
	resp = b.post(t, "/v1/messages", body, nil) // the bearer token
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer: %d", resp.StatusCode)
	}
}

func TestMessagesErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tc := range []struct {
		name, body string
		status     int
		typ, code  string
	}{
		{"not JSON", `{`, 400, "invalid_request_error", "invalid_request"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request"},
		// Only an anthropic platform serves it, and the model has none.
		{"server tool", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 400, "invalid_request_error", "no_candidate"},
		{"unknown model", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "not_found_error", "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := anthropicErrorOf(t, b.postMessages(t, "/v1/messages", tc.body), tc.status, tc.typ)
			if e["code"] != tc.code {
				t.Fatalf("code %v, want %s", e["code"], tc.code)
			}
		})
	}
}

func TestMessagesUpstreamErrors(t *testing.T) {
	t.Parallel()
	// The upstream refuses the model: its 404 goes back as Anthropic's.
	b := setup(t, setupOpts{mock: mock.Config{Models: []string{"other"}}})
	e := anthropicErrorOf(t, b.postMessages(t, "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), 404, "not_found_error")
	if !strings.Contains(e["message"].(string), "does not exist") {
		t.Fatalf("message %v", e["message"])
	}
	// Every attempt fails: api_error, with Weir's code.
	b = setup(t, setupOpts{mock: mock.Config{ErrorRate: 1}})
	e = anthropicErrorOf(t, b.postMessages(t, "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), 500, "api_error")
	if e["code"] != "upstream_error" {
		t.Fatalf("code %v", e["code"])
	}
}

func TestAnthropicErrorTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e      apiError
		status int
		typ    string
	}{
		{apiError{Code: weir.CodeInvalidRequest}, 400, "invalid_request_error"},
		{apiError{Code: weir.CodeUnauthorized}, 401, "authentication_error"},
		{apiError{Code: weir.CodeForbidden}, 403, "permission_error"},
		{apiError{Code: weir.CodeNotFound}, 404, "not_found_error"},
		{apiError{Code: weir.CodePayloadTooLarge}, 413, "request_too_large"},
		{apiError{Code: weir.CodeRateLimited}, 429, "rate_limit_error"},
		{apiError{Code: weir.CodeQueueFull}, 429, "rate_limit_error"},
		{apiError{Code: weir.CodeQueueTimeout}, 529, "overloaded_error"},
		{apiError{Code: weir.CodeNoCandidate}, 529, "overloaded_error"},
		{apiError{Code: weir.CodeNoCandidate, Client: true}, 400, "invalid_request_error"},
		{apiError{Code: weir.CodeStoreUnavailable}, 529, "overloaded_error"},
		{apiError{Code: weir.CodeUpstreamError}, 500, "api_error"},
		{apiError{Code: weir.CodeUpstreamTimeout}, 504, "timeout_error"},
		{apiError{Code: weir.CodeInternal}, 500, "api_error"},
	} {
		status, d := anthropicError(&tc.e)
		if status != tc.status || d.Type != tc.typ || d.Code != string(tc.e.Code) {
			t.Errorf("%s (client %v): %d %s %s; want %d %s", tc.e.Code, tc.e.Client, status, d.Type, d.Code, tc.status, tc.typ)
		}
	}
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp := b.postMessages(t, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}]}`)
	m := decodeMessagesJSON(t, resp)
	if resp.StatusCode != 200 || len(m) != 1 || m["input_tokens"].(float64) < 5 {
		t.Fatalf("status %d, %v", resp.StatusCode, m)
	}
	if n := b.mock.Stats().Requests; n != 0 {
		t.Fatalf("counting called the upstream %d times", n)
	}
	anthropicErrorOf(t, b.postMessages(t, "/v1/messages/count_tokens", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`), 404, "not_found_error")
	anthropicErrorOf(t, b.post(t, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, http.Header{"Authorization": nil}), 401, "authentication_error")
}

func TestWriteAnthropicErrHeaders(t *testing.T) {
	t.Parallel()
	s := New(Config{}, Deps{})
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	status := s.writeAnthropicErr(w, r, &apiError{Code: weir.CodeQueueTimeout, Message: "no capacity in time", RetryAfter: 1500 * time.Millisecond, NoRetry: true})
	if status != 529 || w.Code != 529 || w.Header().Get("Retry-After") != "2" || w.Header().Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
	var body struct {
		Type  string
		Error struct{ Type, Message, Code string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Type != "error" || body.Error.Type != "overloaded_error" ||
		body.Error.Code != "queue_timeout" || body.Error.Message != "no capacity in time" {
		t.Fatalf("body %s", w.Body.Bytes())
	}
}
