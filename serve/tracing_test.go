package serve

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/internal/otlptest"
)

// TestServeExportsTraces: with an OTLP endpoint in the environment the
// gateway traces its requests, and a clean stop flushes the spans still
// batched.
func TestServeExportsTraces(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // only the stop exports
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	m, stop, _, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Tracing == nil {
		t.Fatal("no tracer provider with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	for _, path := range []string{"/v1/models", "/healthz"} {
		resp, err := http.Get("http://" + m.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Name != "GET /v1/models" || spans[0].Resource["service.name"] != "weir" {
		t.Fatalf("spans %+v; want GET /v1/models alone, from service weir", spans)
	}
}

// TestServeCapturesContentWhenAsked: the GenAI instrumentations'
// variable makes the gateway's spans record messages, with a warning at
// start; tracing alone does not.
func TestServeCapturesContentWhenAsked(t *testing.T) {
	rcv := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	for _, on := range []bool{false, true} {
		t.Setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", map[bool]string{false: "", true: "true"}[on])
		cfg := config.Default()
		cfg.Server.Listen = "127.0.0.1:0"
		m, stop, logs, err := startMain(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.gatewayConfig().CaptureContent; got != on {
			t.Errorf("capture %v: the gateway's CaptureContent is %v", on, got)
		}
		if warned := strings.Contains(logs.String(), "traces record prompts and completions"); warned != on {
			t.Errorf("capture %v: warned %v:\n%s", on, warned, logs)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeNoTracesByDefault: without the OTEL_* environment there is
// no tracer provider.
func TestServeNoTracesByDefault(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	m, _, _, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Tracing != nil {
		t.Fatal("a tracer provider without the OTEL_* environment")
	}
}
