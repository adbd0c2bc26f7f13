package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/internal/jsonlog"
	"github.com/weir-gateway/weir/metrics"
)

// BenchmarkChat is one non-streamed chat request through the whole API
// (authentication, admission, the mock upstream over a real connection,
// usage): its allocations are the hot path's.
func BenchmarkChat(b *testing.B) {
	bundle := setup(b, setupOpts{})
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	benchPost(b, bundle, "/v1/chat/completions", body, http.Header{"Authorization": {"Bearer " + bundle.key}})
}

// BenchmarkChatLogged is BenchmarkChat with weir serve's JSON logger at
// info (to io.Discard): with the access log line, and with the access
// log off.
func BenchmarkChatLogged(b *testing.B) {
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, off := range []bool{false, true} {
		name := map[bool]string{false: "access_log_on", true: "access_log_off"}[off]
		b.Run(name, func(b *testing.B) {
			bundle := setup(b, setupOpts{cfg: Config{NoAccessLog: off},
				deps: func(d *Deps) { d.Logger = slog.New(jsonlog.New(io.Discard, nil)) }})
			benchPost(b, bundle, "/v1/chat/completions", body, http.Header{"Authorization": {"Bearer " + bundle.key}})
		})
	}
}

// BenchmarkChatGenAI is BenchmarkChat with the gateway's GenAI metrics
// wired, as weir serve wires them.
func BenchmarkChatGenAI(b *testing.B) {
	m := metrics.New(nil)
	bundle := setup(b, setupOpts{gwDeps: func(d *gateway.Deps) { d.GenAI = m }})
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	benchPost(b, bundle, "/v1/chat/completions", body, http.Header{"Authorization": {"Bearer " + bundle.key}})
}

// BenchmarkChatChinese is BenchmarkChat with a prompt of 32 KB of
// Chinese, which the gateway counts in gpt-4o-mini's o200k_base.
func BenchmarkChatChinese(b *testing.B) {
	bundle := setup(b, setupOpts{})
	text := strings.Repeat("人工智能网关在请求之间排队，而不是失败。每个请求都有价格，并且支出也是一种限制。", 270)
	body := `{"model":"m","messages":[{"role":"user","content":"` + text + `"}]}`
	benchPost(b, bundle, "/v1/chat/completions", body, http.Header{"Authorization": {"Bearer " + bundle.key}})
}

// BenchmarkResponses is BenchmarkChat's request asked of the Responses
// API, translated to Chat Completions and its answer back.
func BenchmarkResponses(b *testing.B) {
	bundle := setup(b, setupOpts{translateResponses: true})
	const body = `{"model":"m","input":"hi"}`
	benchPost(b, bundle, "/v1/responses", body, http.Header{"Authorization": {"Bearer " + bundle.key}})
}

// BenchmarkMessages is BenchmarkChat's request asked of the Messages API,
// translated to Chat Completions and its answer back.
func BenchmarkMessages(b *testing.B) {
	bundle := setup(b, setupOpts{})
	const body = `{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`
	benchPost(b, bundle, "/v1/messages", body, http.Header{"X-Api-Key": {bundle.key}, "Anthropic-Version": {"2023-06-01"}})
}

func benchPost(b *testing.B, bundle *testBundle, path, body string, header http.Header) {
	h := bundle.srv.Handler()
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		for k, v := range header {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkDecodeChat is what the gateway reads of a chat body (the
// harness's) and the body it sends upstream with the model replaced.
func BenchmarkDecodeChat(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Write one short paragraph on why a gateway queues a burst of work."}]}`)
	b.ReportAllocs()
	for b.Loop() {
		r, aerr := decodeRequest(epChat, body)
		if aerr != nil {
			b.Fatal(aerr)
		}
		if _, err := r.withModel("gpt-4o-mini-2024-07-18"); err != nil {
			b.Fatal(err)
		}
	}
}
