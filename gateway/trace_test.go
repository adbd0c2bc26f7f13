package gateway

import (
	"context"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// answerSeen reads the response model and the finish reasons of an
// answer in Chat Completions' shape and in Anthropic's, and nothing else.
func TestAnswerSeen(t *testing.T) {
	for _, tc := range []struct {
		body, model string
		reasons     []string
	}{
		{`{"id":"x","model":"gpt-4o-2024","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"},{"finish_reason":"length"}],"usage":{"prompt_tokens":1}}`,
			"gpt-4o-2024", []string{"stop", "length"}},
		{`{"type":"message","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`, "claude-x", []string{"end_turn"}},
		{`{"model":"m","choices":[{"finish_reason":null}]}`, "m", nil},
		{`not json`, "", nil},
	} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		answerSeen(span, []byte(tc.body))
		span.End()
		attrs := map[string]any{}
		for _, kv := range rec.Ended()[0].Attributes() {
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		if got, _ := attrs["gen_ai.response.model"].(string); got != tc.model {
			t.Errorf("%s: response model %q, want %q", tc.body, got, tc.model)
		}
		if got, _ := attrs["gen_ai.response.finish_reasons"].([]string); !slices.Equal(got, tc.reasons) {
			t.Errorf("%s: finish reasons %v, want %v", tc.body, got, tc.reasons)
		}
		if len(attrs) > 2 {
			t.Errorf("%s: recorded %v", tc.body, attrs)
		}
	}
}
