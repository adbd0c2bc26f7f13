package anthropic

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/internal/jsontest"
)

// anthropicStream is a Messages stream as Anthropic sends one: thinking
// with its signature, text, a tool call, pings, usage at both ends.
const anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1,"cache_creation_input_tokens":3,"cache_read_input_tokens":10}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hmm."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" there"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"SF\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

`

// dataLines is the data of an SSE stream's events, in order.
func dataLines(t *testing.T, stream []byte) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(string(stream), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestChatStream(t *testing.T) {
	t.Parallel()
	// One byte a read: the translation cannot lean on reads that line up
	// with events.
	s := NewChatStream(io.NopCloser(strings.NewReader(anthropicStream)), 1700000000)
	var got bytes.Buffer
	p := make([]byte, 1)
	for {
		n, err := s.Read(p)
		got.Write(p[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	const head = `"id":"msg_1","object":"chat.completion.chunk","created":1700000000,"model":"claude-x"`
	want := []string{
		`{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"reasoning_content":"Hmm."},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\": "}}]},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"SF\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`,
		`{` + head + `,"choices":[],"usage":{"prompt_tokens":38,"completion_tokens":89,"total_tokens":127,"prompt_tokens_details":{"cached_tokens":10}}}`,
		`[DONE]`,
	}
	lines := dataLines(t, got.Bytes())
	if len(lines) != len(want) {
		t.Fatalf("got %d chunks, want %d:\n%s", len(lines), len(want), got.Bytes())
	}
	for i := range want {
		if want[i] == "[DONE]" {
			if lines[i] != "[DONE]" {
				t.Fatalf("chunk %d: got %s, want [DONE]", i, lines[i])
			}
			continue
		}
		jsontest.Equal(t, []byte(lines[i]), want[i])
	}
}

// TestChatStreamEventByEvent checks that each event is translated as it
// arrives: the chunk of the first is read before the second is sent.
func TestChatStreamEventByEvent(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	s := NewChatStream(pr, 0)
	defer s.Close()
	events := strings.SplitAfter(anthropicStream, "\n\n")
	go func() {
		_, _ = pw.Write([]byte(events[0]))
	}()
	p := make([]byte, 4096)
	n, err := s.Read(p)
	if err != nil || !strings.Contains(string(p[:n]), `"role":"assistant"`) {
		t.Fatalf("first read: %q, %v; want the role chunk", p[:n], err)
	}
	go func() {
		_, _ = pw.Write([]byte(strings.Join(events[1:], "")))
		_ = pw.Close()
	}()
	rest, err := io.ReadAll(s)
	if err != nil || !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("rest: %v, ends %q", err, rest[max(0, len(rest)-40):])
	}
}

func TestChatStreamError(t *testing.T) {
	t.Parallel()
	in := strings.SplitAfter(anthropicStream, "\n\n")[0] +
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	got, err := io.ReadAll(NewChatStream(io.NopCloser(strings.NewReader(in)), 0))
	var se *StreamError
	if !errors.As(err, &se) || se.Detail.Type != ErrOverloaded || se.Detail.Message != "Overloaded" {
		t.Fatalf("got %v, want the overloaded_error event", err)
	}
	if !strings.Contains(string(got), `"role":"assistant"`) {
		t.Fatalf("the chunks before the error were lost: %q", got)
	}
}

func TestChatStreamCutShort(t *testing.T) {
	t.Parallel()
	events := strings.SplitAfter(anthropicStream, "\n\n")
	in := strings.Join(events[:9], "")
	got, err := io.ReadAll(NewChatStream(io.NopCloser(strings.NewReader(in)), 0))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got, []byte("[DONE]")) || bytes.Contains(got, []byte(`"usage"`)) {
		t.Fatalf("a stream cut short ended as if whole: %s", got)
	}
}

// chatStream is a Chat Completions stream as OpenAI sends one, with
// reasoning_content as DeepSeek and vLLM add it.
var chatStream = func() string {
	head := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":`
	tail := `,"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	var b strings.Builder
	for _, d := range []string{
		`{"role":"assistant","content":"","refusal":null}`,
		`{"reasoning_content":"Think."}`,
		`{"content":"Hel"}`,
		`{"content":"lo"}`,
		`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`,
		`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`,
	} {
		b.WriteString(head + d + tail)
	}
	b.WriteString(head + `{}` + strings.Replace(tail, `"finish_reason":null`, `"finish_reason":"tool_calls"`, 1))
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":2}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}()

// events is an SSE stream as (event, data) pairs, checking that each
// event line names its data's type.
func events(t *testing.T, stream []byte) [][2]string {
	t.Helper()
	var out [][2]string
	for _, ev := range strings.Split(strings.TrimSuffix(string(stream), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(ev, "\n")
		name, ok1 := strings.CutPrefix(name, "event: ")
		data, ok2 := strings.CutPrefix(data, "data: ")
		if !ok || !ok1 || !ok2 || !strings.Contains(data, `"type":"`+name+`"`) {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, [2]string{name, data})
	}
	return out
}

func TestMessagesStream(t *testing.T) {
	t.Parallel()
	want := [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"chatcmpl-1","type":"message","role":"assistant","model":"gpt-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`},
		{"ping", `{"type":"ping"}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Think."}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":1}`},
		{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"call_1","name":"f","input":{}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":2}`},
		{"content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"call_2","name":"g","input":{}}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{}"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":3}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":7,"output_tokens":4,"cache_read_input_tokens":2}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	for _, size := range []int{1, 3, 7, 64, len(chatStream)} {
		var out bytes.Buffer
		s := NewMessagesStream(&out)
		for in := []byte(chatStream); len(in) > 0; {
			k := min(size, len(in))
			if n, err := s.Write(in[:k]); err != nil || n != k {
				t.Fatalf("write: %d, %v", n, err)
			}
			in = in[k:]
		}
		if err := s.End(); err != nil {
			t.Fatal(err)
		}
		got := events(t, out.Bytes())
		if len(got) != len(want) {
			t.Fatalf("writes of %d bytes: got %d events, want %d:\n%s", size, len(got), len(want), out.Bytes())
		}
		for i := range want {
			if got[i][0] != want[i][0] {
				t.Fatalf("writes of %d bytes: event %d is %s, want %s", size, i, got[i][0], want[i][0])
			}
			jsontest.Equal(t, []byte(got[i][1]), want[i][1])
		}
	}
}

func TestMessagesStreamEnd(t *testing.T) {
	t.Parallel()
	// No [DONE]: End finishes the message with what is known.
	in := strings.Split(chatStream, "\n\n")
	var out bytes.Buffer
	s := NewMessagesStream(&out)
	if err := s.End(); err != nil || out.Len() != 0 {
		t.Fatalf("End before anything: %q, %v; want nothing", out.Bytes(), err)
	}
	if _, err := s.Write([]byte(in[0] + "\n\n" + in[2] + "\n\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.End(); err != nil {
		t.Fatal(err)
	}
	got := events(t, out.Bytes())
	names := make([]string, len(got))
	for i, e := range got {
		names[i] = e[0]
	}
	if want := "message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop"; strings.Join(names, " ") != want {
		t.Fatalf("got %v, want %s", names, want)
	}
	// Once ended, nothing more is written.
	n := out.Len()
	_ = s.End()
	_ = s.Fail(ErrorDetail{Type: ErrAPI, Message: "late"})
	if out.Len() != n {
		t.Fatalf("wrote after the end: %q", out.Bytes()[n:])
	}
}

func TestMessagesStreamErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	s := NewMessagesStream(&out)
	_, _ = s.Write([]byte(strings.Split(chatStream, "\n\n")[2] + "\n\n"))
	if err := s.Fail(ErrorDetail{Type: ErrOverloaded, Message: "no capacity", Code: "queue_timeout"}); err != nil {
		t.Fatal(err)
	}
	got := events(t, out.Bytes())
	last := got[len(got)-1]
	jsontest.Equal(t, []byte(last[1]), `{"type":"error","error":{"type":"overloaded_error","message":"no capacity","code":"queue_timeout"}}`)

	// An error chunk in the upstream's stream ends it the same way.
	out.Reset()
	s = NewMessagesStream(&out)
	_, _ = s.Write([]byte(`data: {"error":{"message":"boom","type":"server_error","code":null}}` + "\n\n" + "data: [DONE]\n\n"))
	got = events(t, out.Bytes())
	if len(got) != 1 || got[0][0] != "error" || !strings.Contains(got[0][1], `"boom"`) {
		t.Fatalf("got %v, want one error event", got)
	}
}

// A text or thinking delta is written as appendEvent writes it.
func TestAppendTextDeltaIsAppendEvent(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "a <b> & \"c\"\u2028\n", "plain"} {
		want := appendEvent(nil, EventContentBlockDelta, blockDelta{Type: EventContentBlockDelta, Index: 3, Delta: textDelta{DeltaText, text}})
		if got := appendTextDelta(nil, 3, DeltaText, `,"text":`, text); string(got) != string(want) {
			t.Errorf("text:\n%s\nwant\n%s", got, want)
		}
		want = appendEvent(nil, EventContentBlockDelta, blockDelta{Type: EventContentBlockDelta, Index: 0, Delta: thinkingDelta{DeltaThinking, text}})
		if got := appendTextDelta(nil, 0, DeltaThinking, `,"thinking":`, text); string(got) != string(want) {
			t.Errorf("thinking:\n%s\nwant\n%s", got, want)
		}
	}
}
