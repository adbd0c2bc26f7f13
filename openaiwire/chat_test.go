package openaiwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestContentParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, text, joined string
		parts            int // -1: nil
		null             bool
		err              error
	}{
		{in: ``, parts: -1, null: true},
		{in: ` null `, parts: -1, null: true},
		{in: `"hi"`, text: "hi", joined: "hi", parts: -1},
		{in: `""`, parts: -1},
		{in: `[]`, parts: 0},
		{in: `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"b"}]`, joined: "ab", parts: 3},
		{in: `5`, parts: -1, err: ErrContent},
	} {
		c := Content(tc.in)
		text, parts, err := c.Parse()
		if !errors.Is(err, tc.err) || text != tc.text || (parts == nil) != (tc.parts < 0) || tc.parts >= 0 && len(parts) != tc.parts {
			t.Errorf("%s: got %q, %v, %v; want %q, %d parts, %v", tc.in, text, parts, err, tc.text, tc.parts, tc.err)
		}
		if got := c.Text(); got != tc.joined {
			t.Errorf("%s: text %q, want %q", tc.in, got, tc.joined)
		}
		if c.IsNull() != tc.null {
			t.Errorf("%s: null %v, want %v", tc.in, c.IsNull(), tc.null)
		}
	}
}

// A message's content is written as it came, and null when it has none;
// a text part keeps its text even when empty, as OpenAI requires.
func TestMessageJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    Message
		want string
	}{
		{Message{Role: "assistant"}, `{"role":"assistant","content":null}`},
		{Message{Role: "user", Content: TextContent("<b> & \"q\"")}, `{"role":"user","content":"\u003cb\u003e \u0026 \"q\""}`},
		{Message{Role: "user", Content: PartsContent([]Part{{Type: "text"}, {Type: "image_url", ImageURL: &ImageURL{URL: "u"}}})},
			`{"role":"user","content":[{"type":"text","text":""},{"type":"image_url","image_url":{"url":"u"}}]}`},
		{Message{Role: "user", Content: PartsContent(nil)}, `{"role":"user","content":[]}`},
	} {
		b, err := json.Marshal(tc.m)
		if err != nil || string(b) != tc.want {
			t.Errorf("got %s, %v; want %s", b, err, tc.want)
		}
		var back Message
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(back); string(again) != tc.want {
			t.Errorf("read back and written again: %s, want %s", again, tc.want)
		}
	}
}

// An answer's message always has its refusal, null when the model did
// not refuse, as OpenAI's answers have it; a chunk's delta leaves out
// what it does not add.
func TestAnswerJSON(t *testing.T) {
	t.Parallel()
	stop := "stop"
	a := ChatCompletion{ID: "c", Object: "chat.completion", Created: 1, Model: "m",
		Choices: []Choice{{Message: AnswerMessage{Role: "assistant", Content: TextContent("hi")}, FinishReason: &stop}},
		Usage:   &Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}}
	want := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}`
	if b, _ := json.Marshal(a); string(b) != want {
		t.Errorf("answer\n got %s\nwant %s", b, want)
	}
	a.SystemFingerprint = Null
	want = want[:len(want)-1] + `,"system_fingerprint":null}`
	if b, _ := json.Marshal(a); string(b) != want {
		t.Errorf("answer with a null fingerprint\n got %s\nwant %s", b, want)
	}
	text := "x"
	c := ChatChunk{ID: "c", Object: "chat.completion.chunk", Model: "m", Choices: []ChunkChoice{{Delta: Delta{Content: &text}}}}
	want = `{"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"logprobs":null,"finish_reason":null}]}`
	if b, _ := json.Marshal(c); string(b) != want {
		t.Errorf("chunk\n got %s\nwant %s", b, want)
	}
}

func TestFunctionChoice(t *testing.T) {
	t.Parallel()
	b, _ := json.Marshal(FunctionChoice("f"))
	if want := `{"function":{"name":"f"},"type":"function"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestErrorJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status           int
		msg, param, code string
		want             string
	}{
		{400, "bad", "model", "", `{"error":{"message":"bad","type":"invalid_request_error","param":"model","code":null}}`},
		{502, "down", "", "upstream", `{"error":{"message":"down","type":"server_error","param":null,"code":"upstream"}}`},
	} {
		if got := ErrorJSON(ErrorType(tc.status), tc.msg, tc.param, tc.code); string(got) != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
	// Read, a code or param may be a number, as some upstreams send it.
	var e ErrorBody
	if err := json.Unmarshal([]byte(`{"error":{"message":"m","type":"t","param":1,"code":429}}`), &e); err != nil || e.Error.Message != "m" {
		t.Errorf("got %+v, %v", e, err)
	}
}

// A string content's text is what json.Unmarshal reads of it, whether
// or not it has anything to unescape.
func TestContentStringAsUnmarshal(t *testing.T) {
	for _, lit := range []string{`""`, `"hi"`, `"a \"q\""`, `"tab\there"`, `"é ü 日本"`, `"<b>&amp;</b>"`, "\"bad \xff utf8\"", "\"ctl \x01\"",
		`"\u00e9"`, `"unterminated`, `"`, `"a"b"`, "\"del \x7f\"", `"\ud800"`} {
		var want string
		werr := json.Unmarshal([]byte(lit), &want)
		got, parts, err := Content(lit).Parse()
		if (err != nil) != (werr != nil) || parts != nil || (werr == nil && got != want) {
			t.Errorf("%q: %q, %v, %v; want %q, %v", lit, got, parts, err, want, werr)
		}
	}
}

func FuzzContentString(f *testing.F) {
	f.Add(`"hi"`)
	f.Add("\"\xff\"")
	f.Fuzz(func(t *testing.T, lit string) {
		// Parse reads c with the space around it trimmed.
		if lit = strings.TrimSpace(lit); lit == "" || lit[0] != '"' {
			return
		}
		var want string
		werr := json.Unmarshal([]byte(lit), &want)
		got, _, err := Content(lit).Parse()
		if (err != nil) != (werr != nil) || (werr == nil && got != want) {
			t.Errorf("%q: %q, %v; want %q, %v", lit, got, err, want, werr)
		}
	})
}
