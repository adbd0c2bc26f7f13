package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestServeDoesNotFollowAnUpstreamsRedirect: a platform whose upstream
// redirects an inference call is a failed attempt, logged as the
// operator's to fix, and the next candidate serves the request; the
// place the redirect named never hears from the gateway.
func TestServeDoesNotFollowAnUpstreamsRedirect(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(target.Close)
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusPermanentRedirect)
	}))
	t.Cleanup(moved.Close)
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { c.Platforms[0].BaseURL = moved.URL + "/v1" }})
	out := &recordedAnswer{}
	if err := b.svc.Serve(t.Context(), b.chat(t), out); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target was called %d times", n)
	}
	if l := b.logs.String(); !strings.Contains(l, `"platform":"up"`) || !strings.Contains(l, "a redirect to "+target.URL+"/v1/chat/completions") {
		t.Errorf("logs: %s", l)
	}
}
