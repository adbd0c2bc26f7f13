package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestSimulationRunMode: a request of a group that allows the simulation
// run mode, asking for it, is admitted and answered as ever, by the
// platform model's simulator: nothing reaches the upstream, its usage
// says simulated, and its scopes counted it. A group that does not allow
// it is refused 403, an unknown mode 400, and a task asking for it is
// refused rather than run for real.
func TestSimulationRunMode(t *testing.T) {
	t.Parallel()
	var usage usageLog
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini",
			Simulate: weir.Simulation{ErrorRate: 0}}},
		Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
		Groups: []weir.Group{{Name: "default", RunModes: []weir.RunMode{weir.RunSimulation}}, {Name: "prod"}},
	}
	b := setup(t, setupOpts{catalog: &cat, deps: func(d *Deps) { d.Usage = usage.record }})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	sim := http.Header{HeaderRunMode: {"simulation"}}
	for _, stream := range []bool{false, true} {
		b2 := body
		if stream {
			b2 = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, b2, sim)
		if resp.StatusCode != http.StatusOK || (stream && !strings.Contains(string(out), "[DONE]")) || (!stream && !strings.Contains(string(out), `"chat.completion"`)) {
			t.Fatalf("simulated (stream %v): %d %s", stream, resp.StatusCode, out)
		}
	}
	if n := b.mock.Stats().Requests; n != 0 {
		t.Errorf("%d requests reached the upstream in simulation", n)
	}
	usage.mu.Lock()
	for _, u := range usage.all {
		if u.PlatformModel != "simulated:up/m" || u.Outcome != "ok" {
			t.Errorf("a simulated request's usage: platform model %q, outcome %q", u.PlatformModel, u.Outcome)
		}
	}
	usage.mu.Unlock()

	prod := b.newKey(t, weir.APIKey{Group: "prod"})
	resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", prod, body, sim)
	wantError(t, resp, out, http.StatusForbidden, CodeForbidden, HeaderRunMode)
	resp, out = b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, http.Header{HeaderRunMode: {"dream"}})
	wantError(t, resp, out, http.StatusBadRequest, CodeInvalidRequest, HeaderRunMode)
	if n := b.mock.Stats().Requests; n != 0 {
		t.Errorf("%d requests reached the upstream after the refusals", n)
	}
	if resp, _ := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, http.Header{HeaderRunMode: {"production"}}); resp.StatusCode != http.StatusOK || b.mock.Stats().Requests != 1 {
		t.Errorf("production asked for by name: %d, %d upstream requests", resp.StatusCode, b.mock.Stats().Requests)
	}
}

// TestSimulatedErrorsStaySimulated: a simulator that fails every call
// fails the simulated request (upstream_error) without cooling down or
// pausing the real platform model, which serves the next production
// request.
func TestSimulatedErrorsStaySimulated(t *testing.T) {
	t.Parallel()
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini",
			Simulate: weir.Simulation{ErrorRate: 1}}},
		Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
		Groups: []weir.Group{{Name: "default", RunModes: []weir.RunMode{weir.RunSimulation}}},
	}
	b := setup(t, setupOpts{catalog: &cat})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for range 3 {
		resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, http.Header{HeaderRunMode: {"simulation"}})
		wantError(t, resp, out, http.StatusBadGateway, CodeUpstreamError, "")
	}
	if resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("production after simulated failures: %d %s", resp.StatusCode, out)
	}
}
