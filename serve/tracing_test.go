package serve

import (
	"net/http"
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
