package mock

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The handler's own cost on the 0-latency path, without a network.
func benchmarkHandler(b *testing.B, path, body string) {
	s := New(Config{})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

func BenchmarkChat(b *testing.B) {
	benchmarkHandler(b, "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello to the mock provider."}]}`)
}

func BenchmarkChatStream(b *testing.B) {
	benchmarkHandler(b, "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello to the mock provider."}]}`)
}

func BenchmarkEmbeddings(b *testing.B) {
	benchmarkHandler(b, "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hello","encoding_format":"base64"}`)
}
