package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/metrics"
	"github.com/weir-gateway/weir/provider/mock"
)

// setupGenAI is the whole API with the gateway's GenAI metrics on a
// registry of their own.
func setupGenAI(t *testing.T, mc mock.Config) (*testBundle, *metrics.Metrics) {
	t.Helper()
	m := metrics.New(nil)
	b := setup(t, setupOpts{mock: mc, gwDeps: func(d *gateway.Deps) { d.GenAI = m }})
	return b, m
}

// scrape is what /metrics shows.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return w.Body.String()
}

// sample is the value of the series name{labels} in text, -1 if it is
// not there.
func sample(t *testing.T, text, name, labels string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// genAIChat are the labels of a chat call to the bundle's one platform
// model, in Prometheus's order (sorted).
const genAIChat = `gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="m",gen_ai_response_model="gpt-4o-mini"`

// TestGenAIMetrics: a chat request and a streamed one through the
// gateway are counted in the GenAI conventions' client metrics: one
// operation each, their tokens in and out, and the stream's time to its
// first chunk and between its chunks.
func TestGenAIMetrics(t *testing.T) {
	t.Parallel()
	b, m := setupGenAI(t, mock.Config{TokensPerSecond: 200, CompletionTokens: 8})
	for _, body := range []string{chatJSON, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`} {
		resp := b.post(t, "/v1/chat/completions", body, nil)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
	}
	text := scrape(t, m)
	for _, tc := range []struct {
		name, labels string
		min, max     float64
	}{
		{"gen_ai_client_operation_duration_seconds_count", `error_type="",` + genAIChat, 2, 2},
		{"gen_ai_client_token_usage_count", genAIChat + `,gen_ai_token_type="input"`, 2, 2},
		{"gen_ai_client_token_usage_count", genAIChat + `,gen_ai_token_type="output"`, 2, 2},
		{"gen_ai_client_token_usage_sum", genAIChat + `,gen_ai_token_type="output"`, 16, 16},
		{"gen_ai_client_operation_time_to_first_chunk_seconds_count", `error_type="",` + genAIChat, 1, 1},
		// Chunks 5ms apart come in reads of their own but for the odd
		// two read together.
		{"gen_ai_client_operation_time_per_output_chunk_seconds_count", genAIChat, 1, 8},
	} {
		if got := sample(t, text, tc.name, tc.labels); got < tc.min || got > tc.max {
			t.Errorf("%s{%s} = %v, want %v to %v", tc.name, tc.labels, got, tc.min, tc.max)
		}
	}
	if strings.Contains(text, b.key) || strings.Contains(text, "key_") {
		t.Errorf("a GenAI metric names a key")
	}
}

// TestGenAIMetricsError: a call the upstream failed is counted with its
// error type (the upstream's status), and without tokens.
func TestGenAIMetricsError(t *testing.T) {
	t.Parallel()
	b, m := setupGenAI(t, mock.Config{ErrorRate: 1})
	if resp := b.post(t, "/v1/chat/completions", chatJSON, nil); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	text := scrape(t, m)
	if got := sample(t, text, "gen_ai_client_operation_duration_seconds_count", `error_type="500",`+genAIChat); got != 1 {
		t.Errorf("failed operations %v, want 1:\n%s", got, text)
	}
	if strings.Contains(text, "gen_ai_client_token_usage_count{") {
		t.Errorf("a failed call's tokens were counted")
	}
}
