package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkChat is one non-streamed chat request through the whole API
// (authentication, admission, the mock upstream over a real connection,
// usage): its allocations are the hot path's.
func BenchmarkChat(b *testing.B) {
	bundle := setup(b, setupOpts{})
	h := bundle.srv.Handler()
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+bundle.key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
