package gateway

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/tracing"
)

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

// An edge node's stream passes the same reader: its client span has the
// response model, id and finish reasons of its chunks, and its usage.
func TestTraceOfANodeStream(t *testing.T) {
	t.Parallel()
	const sse = "data: {\"id\":\"chatcmpl-node\",\"model\":\"llama-3\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"chatcmpl-node\",\"model\":\"llama-3\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n" +
		"data: {\"id\":\"chatcmpl-node\",\"model\":\"llama-3\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\n" +
		"data: [DONE]\n\n"
	nodes := &fakeNodes{answer: func(weir.NodeTarget, provider.Call) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(sse))}, nil
	}}
	b := setup(t, setupOpts{nodes: nodes})
	nodes.set(b.nodeTarget(t, "node_a", 1))
	rec := tracetest.NewSpanRecorder()
	ctx, root := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(t.Context(), "root")
	c := b.chat(t)
	c.Stream = true
	var out recordedAnswer
	if err := b.svc.Serve(ctx, c, &out); err != nil {
		t.Fatal(err)
	}
	root.End()
	tracing.Settle()
	attrs := map[string]any{}
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			for _, kv := range s.Attributes() {
				attrs[string(kv.Key)] = kv.Value.AsInterface()
			}
		}
	}
	want := map[string]any{"gen_ai.provider.name": "weir.node", "gen_ai.response.model": "llama-3", "gen_ai.response.id": "chatcmpl-node",
		"gen_ai.usage.input_tokens": int64(4), "gen_ai.usage.output_tokens": int64(2)}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("client span %s = %v, want %v", k, attrs[k], v)
		}
	}
	if got, _ := attrs["gen_ai.response.finish_reasons"].([]string); !slices.Equal(got, []string{"length"}) {
		t.Errorf("finish reasons %v", attrs["gen_ai.response.finish_reasons"])
	}
}
