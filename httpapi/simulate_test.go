package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/task"
)

// TestSimulationRunMode: a request of a group that allows the simulation
// run mode, asking for it, is admitted and answered as ever, by the
// platform model's simulator: nothing reaches the upstream, its usage
// says simulated, and its scopes counted it. A group that does not allow
// it is refused 403, and an unknown mode 400.
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
	for _, u := range usage.wait(t, 2) {
		if u.PlatformModel != "simulated:up/m" || u.Outcome != "ok" {
			t.Errorf("a simulated request's usage: platform model %q, outcome %q", u.PlatformModel, u.Outcome)
		}
	}

	prod := b.newKey(t, weir.APIKey{Group: "prod"})
	resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", prod, body, sim)
	wantError(t, resp, out, http.StatusForbidden, weir.CodeForbidden, HeaderRunMode)
	resp, out = b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, http.Header{HeaderRunMode: {"dream"}})
	wantError(t, resp, out, http.StatusBadRequest, weir.CodeInvalidRequest, HeaderRunMode)
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
		wantError(t, resp, out, http.StatusBadGateway, weir.CodeUpstreamError, "")
	}
	if resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("production after simulated failures: %d %s", resp.StatusCode, out)
	}
}

// TestSimulatedTasks: a thousand video tasks (250 under the race
// detector) in the simulation run mode
// are admitted, queued and run as any task, each answered by the
// platform model's simulator: they end with its job failure rate, say
// so, and not one call reaches the upstream.
func TestSimulatedTasks(t *testing.T) {
	t.Parallel()
	const failureRate = 0.2
	n := 1000
	if raceEnabled {
		n = 250
	}
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/v", Platform: "up", Upstream: "sora-2",
			Limits: weir.Limits{Concurrency: 50}, Simulate: weir.Simulation{JobFailureRate: failureRate}}},
		Models: []weir.Model{{Name: "v", Kind: weir.KindVideo, Candidates: []weir.Candidate{{PlatformModel: "up/v", Weight: 1}}}},
		Groups: []weir.Group{{Name: "default", RunModes: []weir.RunMode{weir.RunSimulation}}},
	}
	// One attempt a task: a failed job fails its task, so the tasks
	// fail at the simulator's rate.
	b := setup(t, setupOpts{catalog: &cat, tasks: &task.Config{Workers: 50, MaxAttempts: 1}})
	sim := http.Header{HeaderRunMode: {"simulation"}}
	var ids []string
	for i := range n {
		resp, out := b.call(t, http.MethodPost, "/v1/videos", b.key, fmt.Sprintf(`{"model":"v","prompt":"take %d","seconds":"4"}`, i), sim)
		var v struct {
			ID   string `json:"id"`
			Weir struct {
				RunMode string `json:"run_mode"`
			} `json:"weir"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &v) != nil || v.Weir.RunMode != "simulation" {
			t.Fatalf("simulated video %d: %d %s", i, resp.StatusCode, out)
		}
		ids = append(ids, v.ID)
	}
	terminal := []weir.TaskStatus{weir.TaskSucceeded, weir.TaskFailed, weir.TaskCancelled, weir.TaskExpired}
	var ended []weir.Task
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var err error
		ended, err = b.db.TaskList(t.Context(), weir.TaskFilter{Statuses: terminal})
		if err != nil {
			t.Fatal(err)
		}
		if len(ended) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d simulated tasks ended within 2 minutes", len(ended), n)
		}
		time.Sleep(20 * time.Millisecond) // the store says nothing when a task ends
	}
	failed := 0
	for _, tk := range ended {
		switch {
		case tk.RunMode != weir.RunSimulation:
			t.Fatalf("task %s stored with run mode %q", tk.ID, tk.RunMode)
		case tk.Status == weir.TaskFailed:
			failed++
		case tk.Status != weir.TaskSucceeded:
			t.Errorf("task %s ended %s (%s)", tk.ID, tk.Status, tk.ErrorMessage)
		}
	}
	// Binomial: within five standard deviations of the expected count.
	t.Logf("%d of %d simulated tasks failed (job_failure_rate %g)", failed, n, failureRate)
	mean, sd := failureRate*float64(n), math.Sqrt(float64(n)*failureRate*(1-failureRate))
	if f := float64(failed); f < mean-5*sd || f > mean+5*sd {
		t.Errorf("%d of %d simulated jobs failed; want about %d (job_failure_rate %g)", failed, n, int(mean), failureRate)
	}
	if r := b.mock.Stats().Requests; r != 0 {
		t.Errorf("%d calls reached the upstream in simulation", r)
	}
	resp, out := b.call(t, http.MethodGet, "/v1/videos/"+ids[0], b.key, "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"run_mode":"simulation"`) {
		t.Errorf("GET of a simulated video: %d %s", resp.StatusCode, out)
	}
}
