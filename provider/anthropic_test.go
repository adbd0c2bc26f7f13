package provider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
)

// anthropicBundle is the anthropic adapter against the mock provider,
// with what the mock received and a status the mock is to force.
type anthropicBundle struct {
	ad   *provider.Anthropic
	mock *mock.Server

	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	force  string // X-Mock-Status for the next calls
}

func anthropicSetup(t *testing.T, cfg mock.Config) *anthropicBundle {
	t.Helper()
	b := &anthropicBundle{mock: mock.New(cfg)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.got, b.bodies = append(b.got, r), append(b.bodies, body)
		if b.force != "" {
			r.Header.Set("X-Mock-Status", b.force)
		}
		b.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		b.mock.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.ad = &provider.Anthropic{BaseURL: srv.URL + "/v1/", APIKey: "sk-ant-test", Clock: clock.NewFake(time.Unix(1700000000, 0))}
	return b
}

// last is the last request the mock received, and its body decoded.
func (b *anthropicBundle) last(t *testing.T) (*http.Request, map[string]any) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) == 0 {
		t.Fatal("the mock received nothing")
	}
	var m map[string]any
	if err := json.Unmarshal(b.bodies[len(b.bodies)-1], &m); err != nil {
		t.Fatal(err)
	}
	return b.got[len(b.got)-1], m
}

func (b *anthropicBundle) do(t *testing.T, body string, stream bool) ([]byte, error) {
	t.Helper()
	resp, err := b.ad.Do(t.Context(), provider.Call{Path: "/chat/completions", Body: []byte(body), Stream: stream,
		Header: http.Header{"User-Agent": {"test-agent"}, "Authorization": {"Bearer weir-key"}, "Anthropic-Beta": {"beta-1"}}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := "application/json"
	if stream {
		want = "text/event-stream"
	}
	if ct := resp.Header.Get("Content-Type"); ct != want || resp.ContentLength != -1 {
		t.Fatalf("Content-Type %q, length %d; want %s of no declared length", ct, resp.ContentLength, want)
	}
	out, err := io.ReadAll(resp.Body)
	return out, err
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return m
}

func TestAnthropicChat(t *testing.T) {
	t.Parallel()
	b := anthropicSetup(t, mock.Config{CompletionTokens: 6})
	out, err := b.do(t, `{"model":"claude-test","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello."}],"temperature":0.2,"stop":"END"}`, false)
	if err != nil {
		t.Fatal(err)
	}
	req, sent := b.last(t)
	if req.Method != http.MethodPost || req.URL.Path != "/v1/messages" {
		t.Errorf("sent %s %s", req.Method, req.URL.Path)
	}
	for k, v := range map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json",
		"User-Agent": "test-agent", "Anthropic-Beta": "beta-1", "Authorization": ""} {
		if got := req.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	wantSent := `{"model":"claude-test","max_tokens":4096,"system":[{"type":"text","text":"Be brief."}],
		"messages":[{"role":"user","content":[{"type":"text","text":"Say hello."}]}],"temperature":0.2,"stop_sequences":["END"]}`
	if !sameJSON(t, sent, wantSent) {
		t.Errorf("sent %v, want %s", sent, wantSent)
	}
	got := decode(t, out)
	msg := got["choices"].([]any)[0].(map[string]any)
	if got["object"] != "chat.completion" || got["created"] != 1700000000.0 || !strings.HasPrefix(got["id"].(string), "msg_") || got["model"] != "claude-test" {
		t.Errorf("answer head %v", got)
	}
	if msg["finish_reason"] != "stop" || msg["message"].(map[string]any)["content"] != "This is a mock answer. Done." {
		t.Errorf("choice %v", msg)
	}
	// The mock counts 3 + 3 + 3 (the text) + 3 (the system prompt).
	u := got["usage"].(map[string]any)
	if u["prompt_tokens"] != 12.0 || u["completion_tokens"] != 6.0 || u["total_tokens"] != 18.0 {
		t.Errorf("usage %v", u)
	}
}

func sameJSON(t *testing.T, got map[string]any, want string) bool {
	t.Helper()
	w := decode(t, []byte(want))
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

const weatherTools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

func TestAnthropicToolRoundTrip(t *testing.T) {
	t.Parallel()
	b := anthropicSetup(t, mock.Config{})
	out, err := b.do(t, `{"model":"c","messages":[{"role":"user","content":"Weather?"}],`+weatherTools+`,"tool_choice":"required"}`, false)
	if err != nil {
		t.Fatal(err)
	}
	_, sent := b.last(t)
	if tc := sent["tool_choice"].(map[string]any); tc["type"] != "any" {
		t.Errorf("tool_choice sent %v", tc)
	}
	choice := decode(t, out)["choices"].([]any)[0].(map[string]any)
	call := choice["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	fn := call["function"].(map[string]any)
	id := call["id"].(string)
	if choice["finish_reason"] != "tool_calls" || !strings.HasPrefix(id, "toolu_") || fn["name"] != "get_weather" || !strings.Contains(fn["arguments"].(string), `"city"`) {
		t.Fatalf("choice %v", choice)
	}
	// The call answered: the next request carries it, its id kept, and
	// the mock answers in text.
	next, _ := json.Marshal(map[string]any{"model": "c", "messages": []any{
		map[string]any{"role": "user", "content": "Weather?"},
		choice["message"],
		map[string]any{"role": "tool", "tool_call_id": id, "content": "sunny"},
	}})
	out, err = b.do(t, strings.TrimSuffix(string(next), "}")+","+weatherTools+"}", false)
	if err != nil {
		t.Fatal(err)
	}
	_, sent = b.last(t)
	msgs := sent["messages"].([]any)
	use := msgs[1].(map[string]any)["content"].([]any)[0].(map[string]any)
	result := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	if use["type"] != "tool_use" || use["id"] != id || result["type"] != "tool_result" || result["tool_use_id"] != id {
		t.Fatalf("sent %v", msgs)
	}
	if choice := decode(t, out)["choices"].([]any)[0].(map[string]any); choice["finish_reason"] != "stop" {
		t.Fatalf("after the result: %v", choice)
	}
}

// chunks is a Chat Completions stream's chunks, checking it ends with
// [DONE].
func chunks(t *testing.T, stream []byte) []map[string]any {
	t.Helper()
	s := strings.TrimSuffix(string(stream), "\n\n")
	evs := strings.Split(s, "\n\n")
	if evs[len(evs)-1] != "data: [DONE]" {
		t.Fatalf("the stream ends %q", evs[len(evs)-1])
	}
	var out []map[string]any
	for _, ev := range evs[:len(evs)-1] {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("bad event %q", ev)
		}
		out = append(out, decode(t, []byte(data)))
	}
	return out
}

func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	b := anthropicSetup(t, mock.Config{CompletionTokens: 4})
	out, err := b.do(t, `{"model":"c","messages":[{"role":"user","content":"Say hello."}],"stream":true,"max_tokens":3}`, true)
	if err != nil {
		t.Fatal(err)
	}
	req, sent := b.last(t)
	if sent["stream"] != true || sent["max_tokens"] != 3.0 || req.Header.Get("Accept") != "text/event-stream" {
		t.Errorf("sent %v, Accept %q", sent, req.Header.Get("Accept"))
	}
	cs := chunks(t, out)
	var text string
	for _, c := range cs[1 : len(cs)-2] {
		text += c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["content"].(string)
	}
	if text != "And that is" {
		t.Errorf("text %q", text)
	}
	if d := cs[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any); d["role"] != "assistant" {
		t.Errorf("first chunk %v", cs[0])
	}
	if f := cs[len(cs)-2]["choices"].([]any)[0].(map[string]any)["finish_reason"]; f != "length" {
		t.Errorf("finish %v", f)
	}
	u := cs[len(cs)-1]["usage"].(map[string]any)
	if u["prompt_tokens"] != 9.0 || u["completion_tokens"] != 3.0 {
		t.Errorf("usage %v", u)
	}
}

func TestAnthropicStreamToolCall(t *testing.T) {
	t.Parallel()
	b := anthropicSetup(t, mock.Config{})
	out, err := b.do(t, `{"model":"c","messages":[{"role":"user","content":"Weather?"}],"stream":true,`+weatherTools+`}`, true)
	if err != nil {
		t.Fatal(err)
	}
	cs := chunks(t, out)
	var args, id string
	for _, c := range cs {
		for _, ch := range c["choices"].([]any) {
			calls, _ := ch.(map[string]any)["delta"].(map[string]any)["tool_calls"].([]any)
			for _, tc := range calls {
				m := tc.(map[string]any)
				if v, ok := m["id"].(string); ok {
					id = v
				}
				args += m["function"].(map[string]any)["arguments"].(string)
			}
		}
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(args), &in); err != nil || in["city"] == nil || !strings.HasPrefix(id, "toolu_") {
		t.Fatalf("call %s with %q", id, args)
	}
}

func TestAnthropicErrors(t *testing.T) {
	t.Parallel()
	b := anthropicSetup(t, mock.Config{RetryAfter: 3 * time.Second})
	for _, tc := range []struct {
		status     string
		wantStatus int
		retry      time.Duration
		overloaded bool
		credential bool
		typ        string
	}{
		{"429", 429, 3 * time.Second, false, false, "rate_limit_error"},
		{"529", 529, provider.OverloadPause, true, false, "overloaded_error"},
		{"500", 500, 0, false, false, "api_error"},
		{"401", 401, 0, false, true, ""},
		{"404", 404, 0, false, false, "not_found_error"},
		{"400", 400, 0, false, false, "invalid_request_error"},
	} {
		b.mu.Lock()
		b.force = tc.status
		b.mu.Unlock()
		_, err := b.do(t, `{"model":"c","messages":[{"role":"user","content":"hi"}]}`, false)
		var pe *provider.Error
		if !errors.As(err, &pe) {
			t.Fatalf("%s: got %v", tc.status, err)
		}
		if pe.Status != tc.wantStatus || pe.RetryAfter != tc.retry || pe.Overloaded != tc.overloaded || pe.Credential != tc.credential {
			t.Errorf("%s: got %+v", tc.status, pe)
		}
		if pauses := tc.status == "429" || tc.status == "529"; pe.Pauses() != pauses {
			t.Errorf("%s: Pauses() = %v", tc.status, pe.Pauses())
		}
		if tc.credential {
			if pe.Body != nil || !pe.Retryable() {
				t.Errorf("%s: a refused credential with body %s, retryable %v", tc.status, pe.Body, pe.Retryable())
			}
			continue
		}
		e := decode(t, pe.Body)["error"].(map[string]any)
		if msg, _ := e["message"].(string); e["type"] != tc.typ || msg == "" {
			t.Errorf("%s: body %s, want OpenAI's shape with type %s", tc.status, pe.Body, tc.typ)
		}
	}
}

// TestAnthropicRateLimitReset: without retry-after, a 429 waits for the
// latest reset of the limits it exhausted.
func TestAnthropicRateLimitReset(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		h.Set("Anthropic-Ratelimit-Requests-Reset", now.Add(5*time.Second).UTC().Format(time.RFC3339))
		h.Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "0")
		h.Set("Anthropic-Ratelimit-Input-Tokens-Reset", now.Add(20*time.Second).UTC().Format(time.RFC3339))
		h.Set("Anthropic-Ratelimit-Output-Tokens-Remaining", "1000")
		h.Set("Anthropic-Ratelimit-Output-Tokens-Reset", now.Add(50*time.Second).UTC().Format(time.RFC3339))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	}))
	t.Cleanup(srv.Close)
	ad := &provider.Anthropic{BaseURL: srv.URL, Clock: clock.NewFake(now)}
	_, err := ad.Do(t.Context(), provider.Call{Path: "/chat/completions", Body: []byte(`{"model":"c","messages":[{"role":"user","content":"hi"}]}`)})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.RetryAfter != 20*time.Second || !pe.Pauses() {
		t.Fatalf("got %#v, want a pause of 20s", err)
	}
}

func TestAnthropicStreamErrorEvent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"c\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	}))
	t.Cleanup(srv.Close)
	ad := &provider.Anthropic{BaseURL: srv.URL}
	resp, err := ad.Do(t.Context(), provider.Call{Path: "/chat/completions", Body: []byte(`{"model":"c","messages":[{"role":"user","content":"hi"}],"stream":true}`), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != 529 || !pe.Overloaded || !pe.Retryable() || !pe.Pauses() || pe.RetryAfter != provider.OverloadPause {
		t.Fatalf("got %#v, want the overload as the upstream's error, pausing for OverloadPause", err)
	}
	if !bytes.Contains(out, []byte(`"role":"assistant"`)) {
		t.Fatalf("the chunk before the error was lost: %s", out)
	}
}

func TestAnthropicRefuses(t *testing.T) {
	t.Parallel()
	b := anthropicSetup(t, mock.Config{})
	for _, tc := range []struct {
		call  provider.Call
		param string
		words string
	}{
		{provider.Call{Path: "/embeddings", Body: []byte(`{"model":"c","input":"x"}`)}, "", "chat completions only, not /embeddings"},
		{provider.Call{Path: "/chat/completions", Body: []byte(`{"model":"c","n":2,"messages":[{"role":"user","content":"x"}]}`)}, "n", "n must be 1"},
	} {
		_, err := b.ad.Do(t.Context(), tc.call)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != 400 || pe.Retryable() {
			t.Fatalf("%s: got %v, want a 400 for the client", tc.call.Path, err)
		}
		e := decode(t, pe.Body)["error"].(map[string]any)
		if !strings.Contains(e["message"].(string), tc.words) || (tc.param != "" && e["param"] != tc.param) {
			t.Errorf("%s: body %s", tc.call.Path, pe.Body)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) != 0 {
		t.Fatalf("a refused call reached the upstream %d times", len(b.got))
	}
}

func TestNewAnthropic(t *testing.T) {
	t.Parallel()
	a, err := provider.New(provider.Platform{Kind: "anthropic", BaseURL: "https://api.anthropic.com/v1", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Sync.(*provider.Anthropic); !ok || a.Async != nil {
		t.Fatalf("adapters %#v", a)
	}
}

// TestAnthropicPassThrough: a Messages request goes to /messages as it
// came, with the client's anthropic-version (the adapter's without one)
// and anthropic-beta; its answer and its stream come back untouched, and
// a refusal in Anthropic's shape.
func TestAnthropicPassThrough(t *testing.T) {
	t.Parallel()
	b := anthropicSetup(t, mock.Config{CompletionTokens: 3})
	body := `{"model":"claude-test","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	for _, tc := range []struct {
		name, version string
		stream        bool
	}{{"whole", "2023-06-01", false}, {"default version", "", false}, {"stream", "2023-06-01", true}} {
		h := http.Header{"Anthropic-Beta": {"interleaved-thinking-2025-05-14"}, "X-Api-Key": {"weir-key"}}
		if tc.version != "" {
			h.Set("Anthropic-Version", tc.version)
		}
		in := body
		if tc.stream {
			in = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
		}
		resp, err := b.ad.Do(t.Context(), provider.Call{Path: "/messages", Body: []byte(in), Stream: tc.stream, Header: h})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r, _ := b.last(t)
		b.mu.Lock()
		sent := string(b.bodies[len(b.bodies)-1])
		b.mu.Unlock()
		if r.URL.Path != "/v1/messages" || sent != in || r.Header.Get("Anthropic-Version") != "2023-06-01" ||
			r.Header.Get("Anthropic-Beta") != "interleaved-thinking-2025-05-14" || r.Header.Get("X-Api-Key") != "sk-ant-test" {
			t.Fatalf("%s: the mock got %s %v: %s", tc.name, r.URL.Path, r.Header, sent)
		}
		if !tc.stream && (!strings.Contains(string(out), `"type":"thinking"`) || !strings.Contains(string(out), `"type":"message"`)) {
			t.Errorf("%s: answer %s", tc.name, out)
		}
		if tc.stream && (!strings.HasPrefix(string(out), "event: message_start\n") || !strings.Contains(string(out), `"signature_delta"`) ||
			strings.Contains(string(out), "[DONE]")) {
			t.Errorf("%s: stream %s", tc.name, out)
		}
	}
	// count_tokens too.
	resp, err := b.ad.Do(t.Context(), provider.Call{Path: "/messages/count_tokens", Body: []byte(`{"model":"claude-test","messages":[{"role":"user","content":"hi"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(out), `"input_tokens":`) {
		t.Errorf("count_tokens answered %s", out)
	}
	// A refusal keeps Anthropic's shape.
	_, err = b.ad.Do(t.Context(), provider.Call{Path: "/messages", Body: []byte(`{"model":"claude-test","messages":[{"role":"user","content":"hi"}]}`)})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || !strings.Contains(string(pe.Body), `"type":"error"`) ||
		!strings.Contains(string(pe.Body), `"invalid_request_error"`) {
		t.Fatalf("refusal: %v", err)
	}
}
