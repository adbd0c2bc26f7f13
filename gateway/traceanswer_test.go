package gateway

import (
	"context"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// noted is what notes, having read each of reads, record on a span.
func noted(t *testing.T, reads ...string) map[string]any {
	t.Helper()
	var a answerNotes
	a.start()
	for _, r := range reads {
		a.read([]byte(r))
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	a.record(span)
	span.End()
	attrs := map[string]any{}
	for _, kv := range rec.Ended()[0].Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	return attrs
}

// answerNotes reads the response model, id and finish reasons of a whole
// answer and of a stream's chunks, in Chat Completions' shape,
// Anthropic's Messages' and the Responses API's, and nothing else.
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
			attrs := noted(t, tc.reads...)
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
	var a answerNotes
	a.start()
	chunk := []byte(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024","choices":[{"index":0,"delta":{"content":"a few words"},"logprobs":null,"finish_reason":null}]}`)
	a.read(chunk)
	if n := testing.AllocsPerRun(100, func() { a.read(chunk) }); n != 0 {
		t.Errorf("%v allocations a chunk", n)
	}
}
