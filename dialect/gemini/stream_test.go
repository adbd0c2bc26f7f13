package gemini

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/internal/jsontest"
)

// feed runs events through a Stream and returns the SSE it wrote, each
// event's output apart, and End's.
func feed(t *testing.T, includeUsage bool, events ...string) (outs []string, end string, endErr error) {
	t.Helper()
	s := NewStream(AnswerMeta{Model: "m", Created: 5}, includeUsage)
	for _, e := range events {
		b, err := s.Event(nil, []byte(e))
		if err != nil {
			t.Fatalf("Event(%s): %v", e, err)
		}
		outs = append(outs, string(b))
	}
	b, err := s.End(nil)
	return outs, string(b), err
}

// sseData splits SSE into the canonical JSON of each data line.
func sseData(t *testing.T, sse string) []string {
	t.Helper()
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(sse, "\n\n"), "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("not a data event: %q", ev)
		}
		if data == "[DONE]" {
			out = append(out, data)
			continue
		}
		out = append(out, jsontest.Canonical(t, []byte(data)))
	}
	return out
}

func wantChunks(t *testing.T, got string, want ...string) {
	t.Helper()
	g := sseData(t, got)
	if len(g) != len(want) {
		t.Fatalf("%d chunks; want %d:\n%s", len(g), len(want), strings.Join(g, "\n"))
	}
	for i := range want {
		if w := want[i]; w != "[DONE]" {
			w = jsontest.Canonical(t, []byte(w))
			if g[i] != w {
				t.Errorf("chunk %d:\ngot  %s\nwant %s", i, g[i], w)
			}
		} else if g[i] != w {
			t.Errorf("chunk %d: %s; want [DONE]", i, g[i])
		}
	}
}

const head = `"id":"chatcmpl-r1","object":"chat.completion.chunk","created":5,"model":"gemini-2.5-flash","system_fingerprint":null`

func TestStreamTextEventByEvent(t *testing.T) {
	t.Parallel()
	outs, end, err := feed(t, true,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}],"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"pondering","thought":true}]}}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"thoughtsTokenCount":1,"totalTokenCount":10,"cachedContentTokenCount":3},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	// Each event's chunks come out as it arrives; thinking alone makes none.
	wantChunks(t, outs[0], `{`+head+`,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"logprobs":null,"finish_reason":null}]}`)
	wantChunks(t, outs[1])
	wantChunks(t, outs[2],
		`{`+head+`,"choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}]}`,
		`{`+head+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`)
	wantChunks(t, end,
		`{`+head+`,"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":1}}}`,
		"[DONE]")
}

func TestStreamUsageOnTheFinishChunkWhenNotAskedFor(t *testing.T) {
	t.Parallel()
	outs, end, err := feed(t, false,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":1,"totalTokenCount":5},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	wantChunks(t, outs[0],
		`{`+head+`,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":null}]}`,
		`{`+head+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)
	wantChunks(t, end, "[DONE]")
}

func TestStreamToolCalls(t *testing.T) {
	t.Parallel()
	outs, end, err := feed(t, false,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"a","args":{"x":1}},"thoughtSignature":"c2ln"}]}}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"g2","name":"b","args":{}}}]},"finishReason":"STOP"}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	wantChunks(t, outs[0], `{`+head+`,"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_r1_1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"},"extra_content":{"google":{"thought_signature":"c2ln"}}}]},"logprobs":null,"finish_reason":null}]}`)
	wantChunks(t, outs[1],
		`{`+head+`,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"g2","type":"function","function":{"name":"b","arguments":"{}"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{`+head+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`)
	wantChunks(t, end, "[DONE]")
}

func TestStreamSeveralCandidates(t *testing.T) {
	t.Parallel()
	_, end, err := feed(t, false,
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":0},{"content":{"parts":[{"text":"b"}]},"index":1}],"responseId":"r1"}`,
		`{"candidates":[{"content":{"parts":[{"text":"."}]},"finishReason":"STOP","index":0}],"responseId":"r1"}`,
	)
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("End with candidate 1 unfinished: %v, %q; want ErrIncomplete", err, end)
	}
}

func TestStreamIncomplete(t *testing.T) {
	t.Parallel()
	if _, _, err := feed(t, true); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("no event: %v; want ErrIncomplete", err)
	}
	if _, _, err := feed(t, true, `{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"responseId":"r1"}`); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("no finish reason: %v; want ErrIncomplete", err)
	}
}

func TestStreamBlockedAndBroken(t *testing.T) {
	t.Parallel()
	s := NewStream(AnswerMeta{}, false)
	_, err := s.Event(nil, []byte(`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"}}`))
	var be *BlockedError
	if !errors.As(err, &be) || be.Reason != "PROHIBITED_CONTENT" {
		t.Fatalf("blocked prompt: %v", err)
	}
	b, err := NewStream(AnswerMeta{}, false).Event([]byte("kept"), []byte(`{"candidates":`))
	if err == nil || !bytes.Equal(b, []byte("kept")) {
		t.Fatalf("broken event: %q, %v; want an error and b untouched", b, err)
	}
}
