package gateway

import (
	"context"
	"fmt"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/weir-gateway/weir/provider"
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
		{`{"model":"m","choices":[{"finish_reason":"unheard_of"}]}`, "m", []string{"unheard_of"}},
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

// Span names are made once per operation and model, up to a bound past
// which each is made anew, and always read "{operation} {model}".
func TestSpanNameTable(t *testing.T) {
	tbl := &spanNameTable{names: map[string]map[string]string{}}
	for i := range maxSpanNames + 10 {
		model := fmt.Sprintf("model-%d", i)
		for range 2 {
			if got := tbl.name("chat", model); got != "chat "+model {
				t.Fatalf("name(chat, %s) = %q", model, got)
			}
		}
	}
	if tbl.n != maxSpanNames {
		t.Errorf("table holds %d names, want the bound %d", tbl.n, maxSpanNames)
	}
	if got := tbl.name("embeddings", "model-1"); got != "embeddings model-1" {
		t.Errorf("name(embeddings, model-1) = %q", got)
	}
}

func TestServerAddress(t *testing.T) {
	for _, tc := range []struct {
		cfg  provider.Platform
		want string
	}{
		{provider.Platform{Kind: "openai", BaseURL: "https://api.openai.com/v1"}, "api.openai.com"},
		{provider.Platform{Kind: "openai", BaseURL: "http://127.0.0.1:8080/v1"}, "127.0.0.1"},
		{provider.Platform{Kind: "bedrock", Region: "eu-west-1"}, "bedrock-runtime.eu-west-1.amazonaws.com"},
		{provider.Platform{Kind: "bedrock", BaseURL: "http://localhost:9/", Region: "eu-west-1"}, "localhost"},
		{provider.Platform{Kind: "openai", BaseURL: "::bad"}, ""},
	} {
		if got := serverAddress(tc.cfg); got != tc.want {
			t.Errorf("serverAddress(%+v) = %q, want %q", tc.cfg, got, tc.want)
		}
	}
}
