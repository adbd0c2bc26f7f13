package provider

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
	"github.com/weir-gateway/weir/internal/jsontest"
	"github.com/weir-gateway/weir/provider/mock"
)

// recorded is what an upstream received.
type recorded struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// recorder serves h and keeps each request it received.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	// inject is set on each request before h sees it: the X-Mock-*
	// headers that steer the mock, which no adapter forwards.
	inject http.Header
}

func (rec *recorder) set(h ...string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.inject = http.Header{}
	for i := 0; i < len(h); i += 2 {
		rec.inject.Set(h[i], h[i+1])
	}
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		for k, v := range rec.inject {
			r.Header[k] = v
		}
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// count is how many requests the upstream received.
func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.reqs)
}

func (rec *recorder) last(t *testing.T) recorded {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return rec.reqs[len(rec.reqs)-1]
}

type geminiBundle struct {
	ad   *Gemini
	rec  *recorder
	mock *mock.Server
}

// setupGemini is a Gemini adapter against the mock provider, the clock
// fixed so that answers are dated alike.
func setupGemini(t *testing.T, cfg mock.Config) geminiBundle {
	t.Helper()
	m := mock.New(cfg)
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(m))
	t.Cleanup(srv.Close)
	clk := clock.NewFake(time.Unix(1700000000, 0))
	return geminiBundle{ad: &Gemini{BaseURL: srv.URL + "/v1beta/", APIKey: "AIza-platform-key", Clock: clk, AbortGrace: -1}, rec: rec, mock: m}
}

func chatCall(body string) Call {
	var v struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	return Call{Path: "/chat/completions", Body: []byte(body), Stream: v.Stream, Header: http.Header{"User-Agent": {"test-client/1"}}}
}

func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	return b
}

func TestGeminiChat(t *testing.T) {
	t.Parallel()
	b := setupGemini(t, mock.Config{CompletionTokens: 6})
	resp, err := b.ad.Do(t.Context(), chatCall(`{"model":"gemini-2.5-flash","max_tokens":50,"temperature":0.2,
		"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the mock provider."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := readBody(t, resp)

	// What Gemini received.
	req := b.rec.last(t)
	if req.Method != http.MethodPost || req.Path != "/v1beta/models/gemini-2.5-flash:generateContent" || req.Query != "" {
		t.Fatalf("sent %s %s?%s", req.Method, req.Path, req.Query)
	}
	if req.Header.Get("X-Goog-Api-Key") != "AIza-platform-key" || req.Header.Get("Authorization") != "" ||
		req.Header.Get("Content-Type") != "application/json" || req.Header.Get("User-Agent") != "test-client/1" {
		t.Fatalf("headers %v", req.Header)
	}
	wantSent := `{"contents":[{"role":"user","parts":[{"text":"Say hello to the mock provider."}]}],
		"systemInstruction":{"parts":[{"text":"Be brief."}]},"generationConfig":{"temperature":0.2,"maxOutputTokens":50}}`
	if jsontest.Canonical(t, req.Body) != jsontest.Canonical(t, []byte(wantSent)) {
		t.Fatalf("sent %s", req.Body)
	}

	// What the client gets.
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(got)) {
		t.Fatalf("answer %d %q, length %d of %d", resp.StatusCode, ct, resp.ContentLength, len(got))
	}
	var cc struct {
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role, Content string
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
			TotalTokens      int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(got, &cc); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if cc.Object != "chat.completion" || cc.Created != 1700000000 || cc.Model != "gemini-2.5-flash" ||
		cc.Choices[0].Message.Role != "assistant" || cc.Choices[0].Message.Content != "This is a mock answer. Done." ||
		cc.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %s", got)
	}
	// The mock counts 3 + 3 a turn, the system's included, and a token
	// for four bytes of text.
	if u := cc.Usage; u.PromptTokens != 3+3+3+3+8 || u.CompletionTokens != 6 || u.TotalTokens != u.PromptTokens+6 {
		t.Fatalf("usage %+v", cc.Usage)
	}
}

func TestGeminiStreamChunkByChunk(t *testing.T) {
	t.Parallel()
	b := setupGemini(t, mock.Config{CompletionTokens: 3})
	resp, err := b.ad.Do(t.Context(), chatCall(`{"model":"gemini-2.5-flash","stream":true,"stream_options":{"include_usage":true},
		"messages":[{"role":"user","content":"Say hello to the mock provider."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := readBody(t, resp)
	req := b.rec.last(t)
	if req.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || req.Query != "alt=sse" || req.Header.Get("Accept") != "text/event-stream" {
		t.Fatalf("sent %s?%s, Accept %q", req.Path, req.Query, req.Header.Get("Accept"))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.ContentLength != -1 {
		t.Fatalf("Content-Type %q, length %d", ct, resp.ContentLength)
	}
	events := strings.Split(strings.TrimSuffix(string(got), "\n\n"), "\n\n")
	// A chunk a token (the first with the role), the finish, the usage,
	// [DONE].
	if len(events) != 3+1+1+1 || events[len(events)-1] != "data: [DONE]" {
		t.Fatalf("%d events:\n%s", len(events), got)
	}
	var text strings.Builder
	for i, ev := range events[:len(events)-1] {
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("event %d %q: %v", i, ev, err)
		}
		switch {
		case i < 3:
			if (c.Choices[0].Delta.Role == "assistant") != (i == 0) || c.Choices[0].FinishReason != nil {
				t.Fatalf("event %d: %s", i, ev)
			}
			text.WriteString(*c.Choices[0].Delta.Content)
		case i == 3:
			if *c.Choices[0].FinishReason != "stop" || c.Usage != nil {
				t.Fatalf("finish event: %s", ev)
			}
		case i == 4:
			if len(c.Choices) != 0 || c.Usage == nil || c.Usage.CompletionTokens != 3 || c.Usage.PromptTokens != 3+3+8 {
				t.Fatalf("usage event: %s", ev)
			}
		}
	}
	if text.String() != "That is all." {
		t.Fatalf("text %q", text.String())
	}
}

func TestGeminiToolRoundTrip(t *testing.T) {
	t.Parallel()
	b := setupGemini(t, mock.Config{})
	tools := `"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	resp, err := b.ad.Do(t.Context(), chatCall(`{"model":"m",`+tools+`,"tool_choice":"required","messages":[{"role":"user","content":"Weather in Oslo?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
	}
	got := readBody(t, resp)
	if err := json.Unmarshal(got, &cc); err != nil || cc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("answer %s: %v", got, err)
	}
	var msg struct {
		ToolCalls []struct {
			ID           string `json:"id"`
			Function     struct{ Name, Arguments string }
			ExtraContent struct {
				Google struct {
					ThoughtSignature string `json:"thought_signature"`
				} `json:"google"`
			} `json:"extra_content"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(cc.Choices[0].Message, &msg); err != nil {
		t.Fatal(err)
	}
	tc := msg.ToolCalls[0]
	if tc.ID == "" || tc.Function.Name != "weather" || !strings.Contains(tc.Function.Arguments, `"city"`) || tc.ExtraContent.Google.ThoughtSignature == "" {
		t.Fatalf("tool call %s", cc.Choices[0].Message)
	}

	// The assistant's message sent back as it came, and the result: the
	// mock takes the call only with its signature.
	second := `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"Weather in Oslo?"},` + string(cc.Choices[0].Message) +
		`,{"role":"tool","tool_call_id":"` + tc.ID + `","content":"rain"}]}`
	resp, err = b.ad.Do(t.Context(), chatCall(second))
	if err != nil {
		t.Fatalf("the second turn: %v", err)
	}
	readBody(t, resp)
	sent := string(b.rec.last(t).Body)
	for _, want := range []string{`"thoughtSignature":"` + tc.ExtraContent.Google.ThoughtSignature + `"`,
		`"functionResponse":{"id":"` + tc.ID + `","name":"weather","response":{"content":"rain"}}`} {
		if !strings.Contains(sent, want) {
			t.Fatalf("sent %s\nwithout %s", sent, want)
		}
	}
}

// upstreamErr runs c and returns the *Error it fails with.
func upstreamErr(t *testing.T, ad Adapter, c Call) *Error {
	t.Helper()
	resp, err := ad.Do(t.Context(), c)
	if err == nil {
		b := readBody(t, resp)
		t.Fatalf("answered %d: %s", resp.StatusCode, b)
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("err %v; want an *Error", err)
	}
	return pe
}

func openAIError(t *testing.T, body []byte) (msg, param, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not OpenAI's error shape: %s", body)
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Message, param, code
}

func TestGeminiErrors(t *testing.T) {
	t.Parallel()
	b := setupGemini(t, mock.Config{RetryAfter: 1500 * time.Millisecond})
	hello := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	with := func(h ...string) Call {
		b.rec.set(h...)
		return chatCall(hello)
	}

	// 429 RESOURCE_EXHAUSTED: its RetryInfo is the pause, exact to the
	// millisecond (Retry-After says 2).
	pe := upstreamErr(t, b.ad, with("X-Mock-Status", "429"))
	if pe.Status != http.StatusTooManyRequests || pe.RetryAfter != 1500*time.Millisecond || !pe.Retryable() {
		t.Fatalf("429: %+v", pe)
	}
	if _, _, code := openAIError(t, pe.Body); code != "resource_exhausted" {
		t.Fatalf("429 code %q", code)
	}
	// 503 UNAVAILABLE: passing, the next candidate tries.
	if pe := upstreamErr(t, b.ad, with("X-Mock-Status", "503")); pe.Status != http.StatusServiceUnavailable || !pe.Retryable() || pe.Credential {
		t.Fatalf("503: %+v", pe)
	}
	// 400 INVALID_ARGUMENT: the client's, in OpenAI's shape.
	pe = upstreamErr(t, b.ad, with("X-Mock-Status", "400"))
	if msg, _, code := openAIError(t, pe.Body); pe.Retryable() || code != "invalid_argument" || !strings.HasPrefix(msg, "Gemini: ") {
		t.Fatalf("400: %+v %s", pe, pe.Body)
	}
	// A refused key, by 400 API_KEY_INVALID or 403: the platform's, never
	// shown.
	for _, key := range []string{mock.InvalidGeminiKey, ""} {
		ad := *b.ad
		ad.APIKey = key
		if pe := upstreamErr(t, &ad, with()); !pe.Credential || pe.Body != nil || !pe.Retryable() {
			t.Fatalf("key %q: %+v", key, pe)
		}
	}
	// What Gemini cannot be asked, and what it does not serve.
	pe = upstreamErr(t, b.ad, chatCall(`{"model":"m","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`))
	if _, param, _ := openAIError(t, pe.Body); pe.Status != http.StatusBadRequest || param != "logprobs" {
		t.Fatalf("logprobs: %+v %s", pe, pe.Body)
	}
	pe = upstreamErr(t, b.ad, Call{Path: "/embeddings", Body: []byte(`{"model":"m","input":"x"}`)})
	if msg, _, _ := openAIError(t, pe.Body); pe.Status != http.StatusBadRequest || !strings.Contains(msg, "/embeddings") {
		t.Fatalf("embeddings: %+v %s", pe, pe.Body)
	}
}

func TestGeminiBlockedPrompt(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("alt") == "sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"},\"usageMetadata\":{\"promptTokenCount\":5}}\r\n\r\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5}}`)
	}))
	t.Cleanup(srv.Close)
	ad := &Gemini{BaseURL: srv.URL, APIKey: "k"}
	for _, stream := range []bool{false, true} {
		c := chatCall(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		c.Stream = stream
		c.Body = []byte(strings.Replace(string(c.Body), `"model"`, `"stream":`+map[bool]string{true: "true", false: "false"}[stream]+`,"model"`, 1))
		pe := upstreamErr(t, ad, c)
		if _, _, code := openAIError(t, pe.Body); pe.Status != http.StatusBadRequest || pe.Retryable() || code != "content_filter" {
			t.Fatalf("stream %v: %+v %s", stream, pe, pe.Body)
		}
	}
}

func TestGeminiStreamCutShort(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}]}}],\"responseId\":\"r\"}\r\n\r\n")
	}))
	t.Cleanup(srv.Close)
	ad := &Gemini{BaseURL: srv.URL, APIKey: "k"}
	resp, err := ad.Do(t.Context(), chatCall(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != http.StatusBadGateway || !strings.Contains(string(got), `"content":"Hel"`) || strings.Contains(string(got), "[DONE]") {
		t.Fatalf("read %q, %v; want the chunk, then an *Error and no [DONE]", got, err)
	}
}

func TestGeminiIdleTimeoutThroughTheTranslation(t *testing.T) {
	t.Parallel()
	url, ended := stallingUpstream(t, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}]}}],\"responseId\":\"r\"}\r\n\r\n")
	clk := clock.NewFake(time.Unix(0, 0))
	ad := &Gemini{BaseURL: url, APIKey: "k", IdleTimeout: 10 * time.Second, Clock: clk, AbortGrace: testGrace}
	resp, err := ad.Do(t.Context(), chatCall(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 4096)
	if n, err := resp.Body.Read(first); err != nil || !strings.Contains(string(first[:n]), `"content":"Hel"`) {
		t.Fatalf("first read: %q, %v", first[:n], err)
	}
	got := make(chan struct{})
	var readErr error
	go func() { _, readErr = io.ReadAll(resp.Body); close(got) }()
	advanceUntil(t, clk, 5*time.Second, time.Minute, got)
	var pe *Error
	if !errors.As(readErr, &pe) || !pe.Timeout {
		t.Fatalf("read after the stall: %v; want a timeout *Error", readErr)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the upstream saw the call end")
	}
}
