package mock

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestChatCompletion(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	resp := f.post("/v1/chat/completions", chatBody, nil)
	b := expectStatus(t, resp, http.StatusOK)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "req_") {
		t.Errorf("X-Request-Id %q", resp.Header.Get("X-Request-Id"))
	}
	m := obj(t, b)
	hasKeys(t, "chat.completion", m, "id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier")
	if id, _ := m["id"].(string); !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("id %q", id)
	}
	if m["object"] != "chat.completion" || m["model"] != "gpt-4o-mini" {
		t.Errorf("object %v, model %v", m["object"], m["model"])
	}
	if created, _ := m["created"].(float64); created < 1e9 {
		t.Errorf("created %v", m["created"])
	}
	choices := m["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("%d choices", len(choices))
	}
	ch := choices[0].(map[string]any)
	hasKeys(t, "choice", ch, "index", "message", "finish_reason", "logprobs")
	msg := ch["message"].(map[string]any)
	hasKeys(t, "message", msg, "role", "content", "refusal")
	if msg["role"] != "assistant" || ch["finish_reason"] != "stop" {
		t.Errorf("role %v, finish_reason %v", msg["role"], ch["finish_reason"])
	}
	content, _ := msg["content"].(string)
	if got := len(strings.Fields(content)); got != DefaultCompletionTokens {
		t.Errorf("content has %d words, want %d: %q", got, DefaultCompletionTokens, content)
	}
	u := m["usage"].(map[string]any)
	hasKeys(t, "usage", u, "prompt_tokens", "completion_tokens", "total_tokens")
	// 3 + one message (3 + ceil(31/4) = 11).
	if u["prompt_tokens"] != 14.0 || u["completion_tokens"] != float64(DefaultCompletionTokens) || u["total_tokens"] != 14.0+DefaultCompletionTokens {
		t.Errorf("usage %v", u)
	}
	if st := f.awaitDone(); st != http.StatusOK {
		t.Errorf("counted status %d", st)
	}
}

func TestChatLength(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 10})
	for _, tc := range []struct {
		name       string
		body       map[string]any
		header     map[string]string
		wantTokens float64
		wantFinish string
	}{
		{"config", chatBody, nil, 10, "stop"},
		{"header", chatBody, map[string]string{"X-Mock-Tokens": "30"}, 30, "stop"},
		{"max_tokens cuts", chatWith(map[string]any{"max_tokens": 3}), nil, 3, "length"},
		{"max_completion_tokens wins", chatWith(map[string]any{"max_tokens": 3, "max_completion_tokens": 5}), nil, 5, "length"},
		{"max_tokens above", chatWith(map[string]any{"max_tokens": 100}), nil, 10, "stop"},
		{"long", chatBody, map[string]string{"X-Mock-Tokens": "2000"}, 2000, "stop"},
	} {
		m := obj(t, expectStatus(t, f.post("/v1/chat/completions", tc.body, tc.header), http.StatusOK))
		ch := m["choices"].([]any)[0].(map[string]any)
		content := ch["message"].(map[string]any)["content"].(string)
		if got := m["usage"].(map[string]any)["completion_tokens"]; got != tc.wantTokens || ch["finish_reason"] != tc.wantFinish {
			t.Errorf("%s: %v tokens, finish %v; want %v, %s", tc.name, got, ch["finish_reason"], tc.wantTokens, tc.wantFinish)
		}
		if got := len(strings.Fields(content)); float64(got) != tc.wantTokens {
			t.Errorf("%s: content has %d words", tc.name, got)
		}
	}
}

func TestPromptTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		messages string
		want     int
	}{
		{`[{"role":"user","content":"abcd"}]`, 3 + 3 + 1},
		{`[{"role":"system","content":"abcde"},{"role":"user","content":""}]`, 3 + 3 + 2 + 3},
		{`[{"role":"user","content":[{"type":"text","text":"abcdefgh"},{"type":"image_url","image_url":{"url":"x"}}]}]`, 3 + 3 + 2 + 85},
		{`[{"role":"assistant","content":null,"tool_calls":[]}]`, 3 + 3},
	} {
		var msgs []chatMessage
		if err := json.Unmarshal([]byte(tc.messages), &msgs); err != nil {
			t.Fatal(err)
		}
		if got := promptTokens(msgs); got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.messages, got, tc.want)
		}
	}
}

// streamChunks reads a whole stream and decodes its chunks, checking what
// every chunk must hold; the last event must be [DONE].
func streamChunks(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	events := sseEvents(t, expectStatus(t, resp, http.StatusOK))
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("last event %q, want [DONE]", events[len(events)-1])
	}
	var chunks []map[string]any
	var id any
	for _, ev := range events[:len(events)-1] {
		c := obj(t, []byte(ev))
		hasKeys(t, "chunk", c, "id", "object", "created", "model", "choices")
		if c["object"] != "chat.completion.chunk" {
			t.Errorf("object %v", c["object"])
		}
		if id == nil {
			id = c["id"]
		} else if c["id"] != id {
			t.Errorf("chunk id %v, first was %v", c["id"], id)
		}
		chunks = append(chunks, c)
	}
	return chunks
}

func TestChatStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 7})
	whole := obj(t, expectStatus(t, f.post("/v1/chat/completions", chatBody, nil), http.StatusOK))
	wantText := whole["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)

	for _, includeUsage := range []bool{false, true} {
		body := chatWith(map[string]any{"stream": true})
		if includeUsage {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
		chunks := streamChunks(t, f.post("/v1/chat/completions", body, nil))
		content := chunks
		if includeUsage {
			last := chunks[len(chunks)-1]
			if ch := last["choices"].([]any); len(ch) != 0 {
				t.Errorf("usage chunk has choices %v", ch)
			}
			u, ok := last["usage"].(map[string]any)
			if !ok || u["completion_tokens"] != 7.0 || u["prompt_tokens"] != 14.0 || u["total_tokens"] != 21.0 {
				t.Errorf("usage chunk %v", last["usage"])
			}
			content = chunks[:len(chunks)-1]
		}
		// role, 7 tokens, finish.
		if len(content) != 9 {
			t.Fatalf("include_usage=%v: %d content chunks, want 9", includeUsage, len(content))
		}
		var text strings.Builder
		for i, c := range content {
			u, has := c["usage"]
			if includeUsage != has || u != nil {
				t.Errorf("include_usage=%v: chunk %d usage %v (present %v)", includeUsage, i, u, has)
			}
			ch := c["choices"].([]any)
			if len(ch) != 1 {
				t.Fatalf("chunk %d: %d choices", i, len(ch))
			}
			choice := ch[0].(map[string]any)
			hasKeys(t, "chunk choice", choice, "index", "delta", "finish_reason")
			delta := choice["delta"].(map[string]any)
			switch i {
			case 0:
				if delta["role"] != "assistant" || choice["finish_reason"] != nil {
					t.Errorf("first chunk %v", choice)
				}
			case len(content) - 1:
				if len(delta) != 0 || choice["finish_reason"] != "stop" {
					t.Errorf("last chunk %v", choice)
				}
			default:
				if choice["finish_reason"] != nil {
					t.Errorf("chunk %d finish_reason %v", i, choice["finish_reason"])
				}
				s, _ := delta["content"].(string)
				text.WriteString(s)
			}
		}
		if text.String() != wantText {
			t.Errorf("streamed %q, non-streamed %q", text.String(), wantText)
		}
	}
}

func TestStreamLengthFinish(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	chunks := streamChunks(t, f.post("/v1/chat/completions", chatWith(map[string]any{"stream": true, "max_tokens": 2}), nil))
	if len(chunks) != 4 {
		t.Fatalf("%d chunks, want 4", len(chunks))
	}
	if fr := chunks[3]["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "length" {
		t.Errorf("finish_reason %v", fr)
	}
}

func TestPacing(t *testing.T) {
	t.Parallel()
	// 10 tokens at 1000/s: at least 9 ms between the first and the last,
	// streamed or not; X-Mock-Latency adds its own wait before.
	f := newFixture(t, Config{TokensPerSecond: 1000, CompletionTokens: 10})
	for _, tc := range []struct {
		name   string
		body   map[string]any
		header map[string]string
		least  time.Duration
	}{
		{"stream", chatWith(map[string]any{"stream": true}), nil, 9 * time.Millisecond},
		{"whole", chatBody, nil, 10 * time.Millisecond},
		{"latency", chatBody, map[string]string{"X-Mock-Latency": "15ms"}, 25 * time.Millisecond},
	} {
		start := time.Now()
		expectStatus(t, f.post("/v1/chat/completions", tc.body, tc.header), http.StatusOK)
		if took := time.Since(start); took < tc.least {
			t.Errorf("%s: took %s, want at least %s", tc.name, took, tc.least)
		}
	}
}

func TestStallResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 6})
	start := time.Now()
	chunks := streamChunks(t, f.post("/v1/chat/completions", chatWith(map[string]any{"stream": true}), map[string]string{"X-Mock-Stall": "20ms"}))
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("stalled stream took %s", took)
	}
	if len(chunks) != 8 {
		t.Errorf("%d chunks after the stall, want 8", len(chunks))
	}
	f.await(f.stalling, "stall")
	if got := f.s.Stats().Stalled; got != 1 {
		t.Errorf("Stalled %d", got)
	}
}

func TestStallRate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{StallRate: 1, StallFor: time.Millisecond})
	body := chatWith(map[string]any{"stream": true})
	streamChunks(t, f.post("/v1/chat/completions", body, nil))
	streamChunks(t, f.post("/v1/chat/completions", body, map[string]string{"X-Mock-Stall": "0"}))
	expectStatus(t, f.post("/v1/chat/completions", chatBody, nil), http.StatusOK) // not a stream: no stall
	if got := f.s.Stats().Stalled; got != 1 {
		t.Errorf("Stalled %d, want 1 (X-Mock-Stall: 0 and non-streams never stall)", got)
	}
}

// A client that leaves mid-stream ends the request at once: the stall
// is cut short and its slot comes back.
func TestDisconnectMidStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{StallFor: time.Hour, CompletionTokens: 10})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := f.request(ctx, http.MethodPost, "/v1/chat/completions", chatWith(map[string]any{"stream": true}), map[string]string{"X-Mock-Stall": "1"})
	defer resp.Body.Close()
	f.await(f.stalling, "stall")

	// Everything before the stall was flushed: the role and 5 tokens.
	rd := bufio.NewReader(resp.Body)
	for i := range 6 {
		line, err := rd.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data: {") {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		if blank, err := rd.ReadString('\n'); err != nil || blank != "\n" {
			t.Fatalf("event %d not followed by a blank line: %q, %v", i, blank, err)
		}
	}
	if st := f.s.Stats(); st.InFlight != 1 || st.Stalled != 1 {
		t.Fatalf("while stalled: %+v", st)
	}
	cancel()
	if st := f.awaitDone(); st != statusClientClosed {
		t.Errorf("counted status %d, want %d", st, statusClientClosed)
	}
	if st := f.s.Stats(); st.InFlight != 0 || st.ByStatus[statusClientClosed] != 1 {
		t.Errorf("after disconnect: %+v", st)
	}
}

// TestChatWholeSentences: an answer that ends of itself (finish_reason
// "stop") ends a sentence at every length, has as many words as tokens,
// streamed or not; one cut by max_tokens says "length" and is the start
// of the answer it would have given.
func TestChatWholeSentences(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	content := func(m map[string]any) (string, any) {
		ch := m["choices"].([]any)[0].(map[string]any)
		return ch["message"].(map[string]any)["content"].(string), ch["finish_reason"]
	}
	for _, n := range []int{1, 2, 5, 7, 9, 16, 38, 39, 40, 100, 1500} {
		h := map[string]string{"X-Mock-Tokens": strconv.Itoa(n)}
		whole, finish := content(obj(t, expectStatus(t, f.post("/v1/chat/completions", chatBody, h), http.StatusOK)))
		if finish != "stop" || !strings.HasSuffix(whole, ".") || len(strings.Fields(whole)) != n {
			t.Errorf("%d tokens: finish %v, %d words: %q", n, finish, len(strings.Fields(whole)), whole)
		}
		if n < 3 {
			continue
		}
		cut, finish := content(obj(t, expectStatus(t, f.post("/v1/chat/completions", chatWith(map[string]any{"max_tokens": n - 2}), h), http.StatusOK)))
		if finish != "length" || !strings.HasPrefix(whole, cut) || len(strings.Fields(cut)) != n-2 {
			t.Errorf("%d tokens cut to %d: finish %v, %q of %q", n, n-2, finish, cut, whole)
		}
	}
}
