package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
)

// TestWriteErr: how a handler's error becomes an answer: an upstream's
// refusal passes on (its body if OpenAI-shaped, else wrapped; its
// credential refusals never), a gateway error under its code with
// Retry-After, and a foreign error as internal_error, logged, its text
// not shown.
func TestWriteErr(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	s := New(Config{}, Deps{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	openaiBody := `{"error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature","code":null}}`
	for _, tc := range []struct {
		name     string
		err      error
		status   int
		code     weir.Code // "" for a body passed through
		body     string    // the body passed through, or a substring of the message
		retry    string
		logged   bool
		noDetail string // text that must not show
	}{
		{name: "upstream's own error", err: &gateway.RefusedError{Status: 400, Body: []byte(openaiBody)}, status: 400, body: openaiBody},
		{name: "upstream's plain 404", err: &gateway.RefusedError{Status: 404, Body: []byte(" no such thing \n")}, status: 404, code: weir.CodeNotFound, body: "upstream answered 404: no such thing"},
		{name: "upstream's plain 413", err: &gateway.RefusedError{Status: 413, Body: []byte("too big")}, status: 413, code: weir.CodePayloadTooLarge, body: "too big"},
		{name: "upstream's plain 400", err: &gateway.RefusedError{Status: 400, Body: []byte("nope")}, status: 400, code: weir.CodeInvalidRequest, body: "nope"},
		{name: "upstream refused the credential", err: &gateway.RefusedError{Status: 401, Body: []byte(`{"error":{"message":"sk-upstream-secret invalid"}}`)},
			status: 502, code: weir.CodeUpstreamError, body: "credential", noDetail: "sk-upstream-secret"},
		{name: "upstream forbade the credential", err: fmt.Errorf("call: %w", &gateway.RefusedError{Status: 403, Body: []byte("forbidden")}), status: 502, code: weir.CodeUpstreamError, body: "credential"},
		{name: "queue full", err: &gateway.Error{Category: gateway.ErrQueueFull, Message: "the queue is full", RetryAfter: 3 * time.Second},
			status: 429, code: weir.CodeQueueFull, body: "the queue is full", retry: "3"},
		{name: "gateway internal", err: &gateway.Error{Category: gateway.ErrInternal, Message: "internal error", Err: errors.New("disk on fire")},
			status: 500, code: weir.CodeInternal, body: "internal error", noDetail: "disk on fire"},
		{name: "foreign", err: errors.New("secret detail"), status: 500, code: weir.CodeInternal, body: "internal error", logged: true, noDetail: "secret detail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			logs.Reset()
			mu.Unlock()
			w := httptest.NewRecorder()
			var got int
			s.middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = s.writeErr(w, r, tc.err)
			})).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			if got != tc.status || w.Code != tc.status {
				t.Errorf("writeErr = %d, wrote %d, want %d", got, w.Code, tc.status)
			}
			body := w.Body.String()
			if tc.code == "" {
				if body != tc.body {
					t.Errorf("body %s, want %s passed through", body, tc.body)
				}
			} else {
				var e errorBody
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code != string(tc.code) || !strings.Contains(e.Error.Message, tc.body) {
					t.Errorf("body %s, want %s saying %q", body, tc.code, tc.body)
				}
			}
			if tc.noDetail != "" && strings.Contains(body, tc.noDetail) {
				t.Errorf("the answer shows %q: %s", tc.noDetail, body)
			}
			if got := w.Header().Get("Retry-After"); got != tc.retry {
				t.Errorf("Retry-After %q, want %q", got, tc.retry)
			}
			mu.Lock()
			logged := strings.Contains(logs.String(), "request failed")
			mu.Unlock()
			if logged != tc.logged {
				t.Errorf("logged %v, want %v", logged, tc.logged)
			}
		})
	}
	cause := errors.New("the cause")
	if got := causeOf(fmt.Errorf("w: %w", &gateway.Error{Category: gateway.ErrUpstream, Err: cause})); got != cause {
		t.Errorf("causeOf a gateway error = %v", got)
	}
	if got := causeOf(cause); got != cause {
		t.Errorf("causeOf another error = %v", got)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
