package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestRequestIDSetAsTheAnswerStarts checks that every answer carries its
// X-Request-Id — written, written without a status, not written at all,
// or a panic — while the handler sees no header of the middleware's
// before it answers (a queued request holds no header map).
func TestRequestIDSetAsTheAnswerStarts(t *testing.T) {
	t.Parallel()
	s := New(Config{}, Deps{})
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		status int
	}{
		{"status", func(w http.ResponseWriter) { w.WriteHeader(http.StatusTeapot) }, http.StatusTeapot},
		{"write", func(w http.ResponseWriter) { _, _ = w.Write([]byte("hi")) }, http.StatusOK},
		{"error", func(w http.ResponseWriter) { writeError(w, errorf(weir.CodeForbidden, "", "no")) }, http.StatusForbidden},
		{"nothing", func(http.ResponseWriter) {}, http.StatusOK},
		{"panic", func(http.ResponseWriter) { panic("boom") }, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var before string
			h := s.middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				before = w.Header().Get("X-Request-Id")
				tc.answer(w)
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
			if before != "" {
				t.Errorf("the handler saw X-Request-Id %q before answering, want none yet", before)
			}
			if rec.Code != tc.status {
				t.Errorf("status %d, want %d", rec.Code, tc.status)
			}
			if id := rec.Header().Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
				t.Errorf("X-Request-Id %q, want a request id", id)
			}
		})
	}
}

// TestRequestIDOnModelAnswers checks the id on a served chat answer and
// on a refused one, through the whole API.
func TestRequestIDOnModelAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ok := b.post(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
	bad := b.post(t, "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, nil)
	if ok.StatusCode != http.StatusOK || bad.StatusCode != http.StatusNotFound {
		t.Fatalf("statuses %d and %d, want 200 and 404", ok.StatusCode, bad.StatusCode)
	}
	a, z := ok.Header.Get("X-Request-Id"), bad.Header.Get("X-Request-Id")
	if a == "" || z == "" || a == z {
		t.Fatalf("X-Request-Id %q and %q, want two different ids", a, z)
	}
}
