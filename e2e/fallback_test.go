package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// twoPlatforms is a catalog of one chat model, "chat", served first by
// platform a (upstream model name "model-a") and then by platform b
// ("model-b"), each on its own mock provider, so an answer's "model" says
// which one served it.
func twoPlatforms(a, b *upstream) string {
	return fmt.Sprintf(`platforms:
  - name: a
    base_url: %s
  - name: b
    base_url: %s
platform_models:
  - name: a/chat
    platform: a
    upstream: model-a
  - name: b/chat
    platform: b
    upstream: model-b
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: a/chat
        priority: 10
      - platform_model: b/chat
        priority: 0
`, a.URL, b.URL)
}

// servedBy returns the "model" of a chat completion.
func servedBy(t *testing.T, rep *reply) string {
	t.Helper()
	if rep.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	var v struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(rep.Body, &v); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, rep.Body)
	}
	return v.Model
}

// TestFallbackOnUpstreamFailure: when the preferred platform answers 429 or
// 500, the request is served by the next candidate, and the client never
// sees the failure.
func TestFallbackOnUpstreamFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		fail   func(a *upstream)
	}{
		// The mock's per-request status control, as a provider at its quota.
		{"429", http.StatusTooManyRequests, func(a *upstream) { a.force.Store(http.StatusTooManyRequests) }},
		// The mock's error rate, as a provider having a bad day.
		{"500", http.StatusInternalServerError, func(a *upstream) {
			if err := a.Mock.Update(func(c *mock.Config) { c.ErrorRate = 1 }); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := startUpstream(t, mock.Config{})
			b := startUpstream(t, mock.Config{})
			g := startGateway(t, "", twoPlatforms(a, b))
			_, key := g.createKey(t)

			// Healthy, the preferred platform serves.
			if got := servedBy(t, g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})); got != "model-a" {
				t.Fatalf("healthy: served by %q, want model-a", got)
			}
			tc.fail(a)
			rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
			if got := servedBy(t, rep); got != "model-b" {
				t.Fatalf("with a failing: served by %q, want model-b", got)
			}
			if n := a.Mock.Stats().ByStatus[tc.status]; n != 1 {
				t.Errorf("platform a answered %d %d times, want 1: %v", tc.status, n, a.Mock.Stats().ByStatus)
			}
			if n := b.Mock.Stats().ByStatus[http.StatusOK]; n != 1 {
				t.Errorf("platform b answered 200 %d times, want 1", n)
			}
			for name, s := range g.scopes(t) {
				if s.InFlight != 0 || s.Waiting != 0 {
					t.Errorf("after the fallback %s: in flight %d, waiting %d", name, s.InFlight, s.Waiting)
				}
			}
		})
	}
}

// TestCooldownAndRecovery: after server.cooldown.failures consecutive
// failures a platform model is skipped (not even tried) for
// server.cooldown.duration; once that has passed, a request tries it again
// and, as it answers, it serves again.
func TestCooldownAndRecovery(t *testing.T) {
	t.Parallel()
	const cooldown = 2 * time.Second
	a := startUpstream(t, mock.Config{ErrorRate: 1})
	b := startUpstream(t, mock.Config{})
	g := startGateway(t, "  cooldown:\n    failures: 2\n    duration: 2s", twoPlatforms(a, b))
	_, key := g.createKey(t)
	chat := request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")}

	for i := range 2 {
		if got := servedBy(t, g.do(t, chat)); got != "model-b" {
			t.Fatalf("failure %d: served by %q, want model-b", i+1, got)
		}
	}
	cooling := time.Now() // the cooldown began before this
	if n := a.Mock.Stats().Requests; n != 2 {
		t.Fatalf("platform a saw %d requests, want 2", n)
	}
	// a is healthy again, but in cooldown: it is not tried at all.
	if err := a.Mock.Update(func(c *mock.Config) { c.ErrorRate = 0 }); err != nil {
		t.Fatal(err)
	}
	if got := servedBy(t, g.do(t, chat)); got != "model-b" {
		t.Fatalf("in cooldown: served by %q, want model-b", got)
	}
	if elapsed := time.Since(cooling); elapsed < cooldown/2 {
		if n := a.Mock.Stats().Requests; n != 2 {
			t.Errorf("platform a was tried %s into its cooldown (saw %d requests, want 2)", elapsed, n)
		}
	} else {
		t.Logf("the in-cooldown request took until %s after the cooldown began; not checking it", elapsed)
	}

	// Recovery: poll until platform a serves again.
	var recovered time.Duration
	waitFor(t, cooldown+5*time.Second, "platform a to serve again after its cooldown", func() bool {
		if servedBy(t, g.do(t, chat)) == "model-a" {
			recovered = time.Since(cooling)
			return true
		}
		return false
	})
	// It must not have come back before the cooldown ended (the clock in
	// the test started after the gateway's, so this only errs short).
	if recovered < cooldown-100*time.Millisecond {
		t.Errorf("platform a served again %s after its cooldown began, before the %s cooldown ended", recovered, cooldown)
	}
	t.Logf("platform a served again %s after its cooldown began", recovered)
	if got := servedBy(t, g.do(t, chat)); got != "model-a" {
		t.Errorf("after recovery: served by %q, want model-a", got)
	}
}
