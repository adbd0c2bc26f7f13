package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/task"
)

// TestAcceptanceRunMode: an acceptance run that saturates the acceptance
// copy of a platform model (concurrency 1) and queues past production's
// queue limit leaves production's scope alone: a production request is
// admitted at once. The copy has production's limits with the runs'
// queue and wait; the run's usage is reported apart, and its tasks run
// in the copies too. Bad run ids are refused.
func TestAcceptanceRunMode(t *testing.T) {
	t.Parallel()
	var usage usageLog
	var arrivals atomic.Int32
	gate := make(chan struct{})
	cat := weir.Catalog{
		Platforms: []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{
			{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini", Limits: weir.Limits{Concurrency: 1, QueueLimit: 1}},
			{Name: "up/v", Platform: "up", Upstream: "sora-2"},
		},
		Models: []weir.Model{
			{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}},
			{Name: "v", Kind: weir.KindVideo, Candidates: []weir.Candidate{{PlatformModel: "up/v", Weight: 1}}},
		},
		Groups: []weir.Group{{Name: "default", RunModes: []weir.RunMode{weir.RunAcceptance}}},
	}
	b := setup(t, setupOpts{catalog: &cat, tasks: &task.Config{}, deps: func(d *Deps) { d.Usage = usage.record },
		upstream: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrivals.Add(1)
				<-gate // every upstream call waits until the test lets them go
				h.ServeHTTP(w, r)
			})
		}})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	run := http.Header{HeaderRunMode: {"acceptance"}, HeaderRunID: {"new-platform.1"}}
	type sent struct {
		status int
		waited string
	}
	send := func(h http.Header) <-chan sent {
		ch := make(chan sent, 1)
		go func() {
			resp, _ := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, h)
			ch <- sent{resp.StatusCode, resp.Header.Get(HeaderQueueWait)}
		}()
		return ch
	}
	scope := func(name string) weir.Limits {
		t.Helper()
		st, err := b.engine.Scope(t.Context(), name)
		if err != nil {
			t.Fatalf("scope %s: %v", name, err)
		}
		return weir.Limits{Concurrency: st.Used, QueueLimit: st.Queued}
	}
	const prod = "pm:up/m"
	copyOf := weir.AcceptanceScope(prod)

	var runAnswers []<-chan sent
	runAnswers = append(runAnswers, send(run))
	waitUntil(t, "the run's first request upstream", func() bool { return arrivals.Load() == 1 })
	// Two more of the run queue in its copy: past production's queue
	// limit of 1, within the run's.
	runAnswers = append(runAnswers, send(run), send(run))
	waitUntil(t, "two of the run queued in the copy", func() bool { return scope(copyOf).QueueLimit == 2 })
	if got := scope(prod); got.Concurrency != 0 || got.QueueLimit != 0 {
		t.Fatalf("production's scope while the run saturates its copy: %d used, %d queued; want 0, 0", got.Concurrency, got.QueueLimit)
	}
	st, err := b.engine.Scope(t.Context(), copyOf)
	if err != nil || st.Config.Limit != 1 || st.Config.QueueLimit != weir.AcceptanceQueueLimit || st.Config.MaxWait != weir.AcceptanceMaxWait {
		t.Errorf("the acceptance copy: %+v, %v; want production's limit 1, queue %d, wait %s", st.Config, err, weir.AcceptanceQueueLimit, weir.AcceptanceMaxWait)
	}

	// Production is admitted at once, beside the saturated run.
	p := send(nil)
	waitUntil(t, "the production request upstream", func() bool { return arrivals.Load() == 2 })
	if got := scope(prod); got.Concurrency != 1 || got.QueueLimit != 0 {
		t.Errorf("production's scope: %d used, %d queued; want 1, 0", got.Concurrency, got.QueueLimit)
	}
	close(gate)
	if a := <-p; a.status != http.StatusOK || a.waited != "0" {
		t.Errorf("production: %d, queued %s ms; want 200 at once", a.status, a.waited)
	}
	for i, ch := range runAnswers {
		select {
		case a := <-ch:
			if a.status != http.StatusOK {
				t.Errorf("run request %d: %d", i, a.status)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run request %d never answered", i)
		}
	}
	var apart, production int
	for _, u := range usage.wait(t, 4) {
		switch u.PlatformModel {
		case "acceptance:new-platform.1:up/m":
			apart++
		case "up/m":
			production++
		default:
			t.Errorf("usage of platform model %q", u.PlatformModel)
		}
	}
	if apart != 3 || production != 1 {
		t.Errorf("usage: %d of the run, %d of production; want 3 and 1", apart, production)
	}

	for _, c := range []struct {
		h     http.Header
		param string
	}{
		{http.Header{HeaderRunMode: {"acceptance"}}, HeaderRunID},
		{http.Header{HeaderRunMode: {"acceptance"}, HeaderRunID: {"a b"}}, HeaderRunID},
		{http.Header{HeaderRunID: {"r1"}}, HeaderRunID},
	} {
		resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, c.h)
		wantError(t, resp, out, http.StatusBadRequest, weir.CodeInvalidRequest, c.param)
	}
	resp, out := b.call(t, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"p"}`, http.Header{HeaderRunMode: {"acceptance"}})
	wantError(t, resp, out, http.StatusBadRequest, weir.CodeInvalidRequest, HeaderRunID)

	// A task of the run waits and runs in the run's copies too.
	resp, out = b.call(t, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"p"}`, run)
	var v struct {
		ID   string `json:"id"`
		Weir struct {
			RunMode string `json:"run_mode"`
			RunID   string `json:"run_id"`
		} `json:"weir"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &v) != nil || v.Weir.RunMode != "acceptance" || v.Weir.RunID != "new-platform.1" {
		t.Fatalf("a video of the run: %d %s", resp.StatusCode, out)
	}
	waitUntil(t, "the run's video to end", func() bool {
		tk, err := b.db.TaskGet(t.Context(), v.ID)
		return err == nil && tk.Status.Terminal()
	})
	if tk, err := b.db.TaskGet(t.Context(), v.ID); err != nil || tk.Status != weir.TaskSucceeded || tk.PlatformModel != "up/v" {
		t.Errorf("the run's video: %+v, %v; want succeeded on up/v", tk, err)
	}
	if _, err := b.engine.Scope(t.Context(), weir.AcceptanceScope("pm:up/v")); err != nil {
		t.Errorf("the acceptance copy of up/v: %v", err)
	}

	// The task API takes the mode and the run in its body too.
	taskBody := `{"model":"v","input":{"prompt":"p"},"run_mode":"acceptance","run_id":"new-platform.1"}`
	resp, out = b.call(t, http.MethodPost, "/v1/tasks", b.key, taskBody, nil)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(out), `"run_mode":"acceptance","run_id":"new-platform.1"`) {
		t.Errorf("a task of the run by its body: %d %s", resp.StatusCode, out)
	}
	resp, out = b.call(t, http.MethodPost, "/v1/tasks", b.key, taskBody, http.Header{HeaderRunMode: {"simulation"}})
	wantError(t, resp, out, http.StatusBadRequest, weir.CodeInvalidRequest, "run_mode")
}

// TestAcceptanceTaskRunCap: a task submission enters its run, under the
// cap on a key's runs alive (the gateway's, 10): one run more gets 429
// rate_limited with a Retry-After of when the key's earliest run ends,
// 16 minutes after its last request; a run alive takes more tasks, and
// another key starts runs of its own.
func TestAcceptanceTaskRunCap(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	cat := weir.Catalog{
		Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "UP"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/v", Platform: "up", Upstream: "sora-2"}},
		Models:         []weir.Model{{Name: "v", Kind: weir.KindVideo, Candidates: []weir.Candidate{{PlatformModel: "up/v", Weight: 1}}}},
		Groups:         []weir.Group{{Name: "default", RunModes: []weir.RunMode{weir.RunAcceptance}}},
	}
	b := setup(t, setupOpts{clock: clk, catalog: &cat, tasks: &task.Config{}})
	submit := func(key, run string) (*http.Response, []byte) {
		return b.call(t, http.MethodPost, "/v1/videos", key, `{"model":"v","prompt":"p"}`,
			http.Header{HeaderRunMode: {"acceptance"}, HeaderRunID: {run}})
	}
	for i := range 10 {
		if resp, out := submit(b.key, fmt.Sprintf("run-%d", i)); resp.StatusCode != http.StatusOK {
			t.Fatalf("run %d: %d %s", i, resp.StatusCode, out)
		}
		clk.Advance(time.Second)
	}
	resp, out := submit(b.key, "one-more")
	wantError(t, resp, out, http.StatusTooManyRequests, weir.CodeRateLimited, "")
	if got, want := resp.Header.Get("Retry-After"), fmt.Sprint(16*60-10); got != want {
		t.Errorf("Retry-After %q; want %s, when the key's earliest run ends", got, want)
	}
	if resp, out := submit(b.key, "run-3"); resp.StatusCode != http.StatusOK {
		t.Errorf("a run alive: %d %s", resp.StatusCode, out)
	}
	other := b.newKey(t, weir.APIKey{ID: "key_other", Name: "other"})
	if resp, out := submit(other, "one-more"); resp.StatusCode != http.StatusOK {
		t.Errorf("another key's run: %d %s", resp.StatusCode, out)
	}
}
