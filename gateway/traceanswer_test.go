package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// noted is what notes, having read each of reads, record on a span.
func noted(t *testing.T, capture bool, reads ...string) map[string]any {
	t.Helper()
	a := newAnswerNotes(capture)
	for _, r := range reads {
		a.read([]byte(r))
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	span.SetAttributes(a.appendAttrs(nil)...)
	span.End()
	attrs := map[string]any{}
	for _, kv := range rec.Ended()[0].Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	return attrs
}

// answerNotes reads the response model, id and finish reasons of a whole
// answer and of a stream's chunks, in Chat Completions' shape,
// Anthropic's Messages' and the Responses API's, and nothing else
// unless content is captured.
func TestAnswerNotes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reads     []string
		model, id string
		reasons   []string
	}{
		{"chat", []string{`{"id":"x","model":"gpt-4o-2024","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"},{"finish_reason":"length"}],"usage":{"prompt_tokens":1}}`},
			"gpt-4o-2024", "x", []string{"stop", "length"}},
		{"messages", []string{`{"id":"msg_1","type":"message","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`}, "claude-x", "msg_1", []string{"end_turn"}},
		{"null reason", []string{`{"model":"m","choices":[{"finish_reason":null}]}`}, "m", "", nil},
		{"unheard-of reason", []string{`{"model":"m","choices":[{"finish_reason":"unheard_of"}]}`}, "m", "", []string{"unheard_of"}},
		{"not json", []string{`not json`}, "", "", nil},
		{"chat stream", []string{
			`{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-2024","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-2024","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-2024","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-2024","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
		}, "gpt-4o-2024", "c1", []string{"length"}},
		{"messages stream", []string{
			`{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-y","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
			`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":5}}`,
			`{"type":"message_stop"}`,
		}, "claude-y", "msg_2", []string{"max_tokens"}},
		{"responses stream", []string{
			`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","model":"gpt-5","status":"in_progress","output":[]}}`,
			`{"type":"response.output_text.delta","item_id":"msg_9","delta":"hi"}`,
			`{"type":"response.incomplete","response":{"id":"resp_1","model":"gpt-5","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"text":{"format":{"type":"text"}}}}`,
		}, "gpt-5", "resp_1", []string{"max_output_tokens"}},
		{"responses", []string{`{"id":"resp_2","object":"response","model":"gpt-5","status":"completed","incomplete_details":null,"output":[]}`}, "gpt-5", "resp_2", []string{"completed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := noted(t, false, tc.reads...)
			if got, _ := attrs["gen_ai.response.model"].(string); got != tc.model {
				t.Errorf("response model %q, want %q", got, tc.model)
			}
			if got, _ := attrs["gen_ai.response.id"].(string); got != tc.id {
				t.Errorf("response id %q, want %q", got, tc.id)
			}
			if got, _ := attrs["gen_ai.response.finish_reasons"].([]string); !slices.Equal(got, tc.reasons) {
				t.Errorf("finish reasons %v, want %v", got, tc.reasons)
			}
			if len(attrs) > 3 {
				t.Errorf("recorded %v", attrs)
			}
		})
	}
}

// A stream's chunks are read without an allocation each once its model
// and id are known.
func TestAnswerNotesChunkAllocs(t *testing.T) {
	a := newAnswerNotes(false)
	chunk := []byte(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024","choices":[{"index":0,"delta":{"content":"a few words"},"logprobs":null,"finish_reason":null}]}`)
	a.read(chunk)
	if n := testing.AllocsPerRun(100, func() { a.read(chunk) }); n != 0 {
		t.Errorf("%v allocations a chunk", n)
	}
}

// With content captured, the output is the conventions' output messages:
// each choice's text and tool calls and its finish reason, from a whole
// answer or a stream's chunks.
func TestAnswerNotesOutput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads []string
		want  string
	}{
		{"chat", []string{`{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}`},
			`[{"role":"assistant","parts":[{"type":"text","content":"hi"},{"type":"tool_call","id":"call_1","name":"f","arguments":"{\"a\":1}"}],"finish_reason":"tool_calls"}]`},
		{"chat stream", []string{
			`{"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`,
			`{"id":"c","model":"m","choices":[{"index":1,"delta":{"content":"Bye"},"finish_reason":"stop"}]}`,
			`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"length"}]}`,
		}, `[{"role":"assistant","parts":[{"type":"text","content":"Hello"}],"finish_reason":"length"},{"role":"assistant","parts":[{"type":"text","content":"Bye"}],"finish_reason":"stop"}]`},
		{"messages", []string{`{"id":"msg_1","model":"c","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}],"stop_reason":"tool_use"}`},
			`[{"role":"assistant","parts":[{"type":"text","content":"hi"},{"type":"tool_call","id":"toolu_1","name":"f","arguments":{"a":1}}],"finish_reason":"tool_use"}]`},
		{"messages stream", []string{
			`{"type":"message_start","message":{"id":"msg_2","model":"c","content":[]}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`,
		}, `[{"role":"assistant","parts":[{"type":"text","content":"Hello"}],"finish_reason":"end_turn"}]`},
		{"responses stream", []string{
			`{"type":"response.created","response":{"id":"r","model":"g","status":"in_progress","output":[]}}`,
			`{"type":"response.output_text.delta","delta":"Hel"}`,
			`{"type":"response.completed","response":{"id":"r","model":"g","status":"completed","output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[]}]},{"type":"function_call","call_id":"call_2","name":"f","arguments":"{}"}]}}`,
		}, `[{"role":"assistant","parts":[{"type":"text","content":"Hello"},{"type":"tool_call","id":"call_2","name":"f","arguments":"{}"}],"finish_reason":"completed"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := noted(t, true, tc.reads...)
			if got := attrs["gen_ai.output.messages"]; got != tc.want {
				t.Errorf("output messages\n%v\nwant\n%v", got, tc.want)
			}
			if attrs["weir.content.truncated"] != nil {
				t.Errorf("marked truncated: %v", attrs)
			}
		})
	}
	many := `{"model":"m","choices":[`
	for i := range maxOutputChoices + 1 {
		many += fmt.Sprintf(`%s{"index":%d,"message":{"content":"c%d"},"finish_reason":"stop"}`, map[bool]string{true: ",", false: ""}[i > 0], i, i)
	}
	attrs := noted(t, true, many+`]}`)
	if out, _ := attrs["gen_ai.output.messages"].(string); strings.Count(out, `"role"`) != maxOutputChoices || attrs["weir.content.truncated"] != true {
		t.Errorf("%d choices: %v", maxOutputChoices+1, attrs)
	}
	if attrs := noted(t, false, `{"model":"m","choices":[{"message":{"content":"a secret"},"finish_reason":"stop"}]}`); attrs["gen_ai.output.messages"] != nil {
		t.Errorf("output recorded without capture: %v", attrs)
	}
}

// A stream's output is held up to the bound, cut there with the mark.
func TestAnswerNotesOutputBound(t *testing.T) {
	chunk := `{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("é", 500) + `"},"finish_reason":null}]}`
	var reads []string
	for range 100 { // 100 KB of text
		reads = append(reads, chunk)
	}
	attrs := noted(t, true, reads...)
	out, _ := attrs["gen_ai.output.messages"].(string)
	var msgs []struct {
		Parts []struct{ Content string }
	}
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		t.Fatalf("output messages are not JSON: %v\n%.200s", err, out)
	}
	text := msgs[0].Parts[0].Content
	if !strings.HasSuffix(text, truncatedMark) || len(text) > maxContentBytes+len(truncatedMark) || len(text) < maxContentBytes-2 {
		t.Errorf("output text of %d bytes, ends %q", len(text), text[max(len(text)-20, 0):])
	}
	if attrs["weir.content.truncated"] != true {
		t.Errorf("not marked truncated: %v", attrs["weir.content.truncated"])
	}
}

// The request sent upstream is recorded as the conventions' input
// messages (and system instructions, where its API keeps them apart),
// in Chat Completions', Messages' and the Responses API's shapes.
func TestInputMessages(t *testing.T) {
	for _, tc := range []struct {
		name, body, msgs, system string
	}{
		{"chat", `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"42"}],"temperature":0}`,
			`[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"hi"},{"type":"image_url"}]},` +
				`{"role":"assistant","parts":[{"type":"tool_call","id":"call_1","name":"f","arguments":"{}"}]},{"role":"tool","parts":[{"type":"tool_call_response","id":"call_1","response":"42"}]}]`, ""},
		{"messages", `{"model":"c","system":"be brief","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"}]}]}`,
			`[{"role":"user","parts":[{"type":"text","content":"hi"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"t1","name":"f","arguments":{"a":1}}]},{"role":"user","parts":[{"type":"tool_call_response","id":"t1","response":"42"}]}]`,
			`[{"type":"text","content":"be brief"}]`},
		{"responses string", `{"model":"g","instructions":"be brief","input":"hi"}`, `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, `[{"type":"text","content":"be brief"}]`},
		{"responses items", `{"model":"g","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"reasoning","id":"rs"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}]}`,
			`[{"role":"user","parts":[{"type":"text","content":"hi"}]},{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"f","arguments":"{}"}]},{"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"42"}]}]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]any{}
			for _, kv := range inputMessages([]byte(tc.body)) {
				attrs[string(kv.Key)] = kv.Value.AsInterface()
			}
			if got, _ := attrs["gen_ai.input.messages"].(string); got != tc.msgs {
				t.Errorf("input messages\n%s\nwant\n%s", got, tc.msgs)
			}
			if got, _ := attrs["gen_ai.system_instructions"].(string); got != tc.system {
				t.Errorf("system instructions %s, want %s", got, tc.system)
			}
			if len(attrs) > 2 {
				t.Errorf("recorded %v", attrs)
			}
		})
	}
}

// A request's messages are recorded up to the bound: a text past it is
// cut with the mark, the messages after it are left out, and the span
// says so; what is recorded is JSON still.
func TestInputMessagesBound(t *testing.T) {
	long := strings.Repeat("word ", 5000) // 25 KB
	body := `{"model":"m","messages":[{"role":"user","content":"first"},{"role":"user","content":"` + long + `"},{"role":"user","content":"last"}]}`
	attrs := map[string]any{}
	for _, kv := range inputMessages([]byte(body)) {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	got, _ := attrs["gen_ai.input.messages"].(string)
	var msgs []struct {
		Role  string
		Parts []struct{ Content string }
	}
	if err := json.Unmarshal([]byte(got), &msgs); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if len(got) > maxContentBytes+200 || len(msgs) != 2 || msgs[0].Parts[0].Content != "first" || !strings.HasSuffix(msgs[1].Parts[0].Content, truncatedMark) {
		t.Errorf("%d bytes, %d messages", len(got), len(msgs))
	}
	if attrs["weir.content.truncated"] != true {
		t.Errorf("not marked truncated: %v", attrs)
	}
}

// Notes read whatever an upstream sends without panicking, with the
// output captured or not: they are read off the request's goroutine,
// where a panic would end the process, not the request.
func FuzzAnswerNotes(f *testing.F) {
	for _, seed := range []string{
		`{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`,
		`{"type":"message","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`,
		`{"type":"response.completed","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}}`,
		`{"choices":[{"index":99999999999,"delta":{"content":"x"}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":"{"}}]}}]}`,
		`{"id":`, `[`, `{"choices":[1,"a",null,{"finish_reason":7}]}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, capture bool) {
		a := newAnswerNotes(capture)
		a.hold(b, nil)
		a.AppendAttrs(nil)
		a.read(b) // a second read, as a stream's chunks are
		a.appendAttrs(nil)
	})
}
