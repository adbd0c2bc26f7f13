package task

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
)

// occupy starts a job on the platform with the test's own credential, so
// that a platform with MaxJobs 1 refuses the service's.
func (u *testUpstream) occupy(t *testing.T) provider.Job {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"model": "sora-2", "prompt": "someone else's"})
	j, err := u.adapter.Submit(context.Background(), provider.AsyncCall{Body: body})
	if err != nil {
		t.Fatalf("occupy the platform: %v", err)
	}
	return j
}

// TestFailoverToAnotherCandidate: a platform that refuses a submit for
// capacity (429) or answers it failed (500, 503) sends the task to its
// next candidate at once; its health hears of a failure, and a 429 with
// Retry-After pauses it instead (the platform said when to come back).
func TestFailoverToAnotherCandidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		a      mock.Config
		inject string // X-Mock-Status on vid/a's submits
		status int
		down   bool // vid/a refuses connections
	}{
		{name: "429 at its job cap", a: mock.Config{MaxJobs: 1, JobDuration: time.Hour}, status: http.StatusTooManyRequests},
		{name: "500", a: mock.Config{ErrorRate: 1}, status: http.StatusInternalServerError},
		{name: "503", inject: "503", status: http.StatusServiceUnavailable},
		{name: "unreachable", down: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": tc.a, "vid/b": {}}})
			a := b.up["vid/a"]
			if tc.a.MaxJobs > 0 {
				a.occupy(t)
			}
			if tc.inject != "" {
				a.setInject(func(r *http.Request) {
					if r.Method == http.MethodPost {
						r.Header.Set("X-Mock-Status", tc.inject)
					}
				})
			}
			if tc.down {
				a.ts.Close()
			}
			tk := b.submit(t, s, nil)
			got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
			if got.Status != weir.TaskSucceeded || got.PlatformModel != "vid/b" || got.Candidate != 0 {
				t.Fatalf("task %+v: want succeeded on vid/b (its only candidate left, index 0)", got)
			}
			if n := a.srv.Stats().ByStatus[tc.status]; !tc.down && n != 1 {
				t.Errorf("vid/a answered %d %d(s), want the one submit", n, tc.status)
			}
			if n := b.up["vid/b"].srv.Stats().JobsSubmitted; n != 1 {
				t.Errorf("%d jobs on vid/b, want 1", n)
			}
			h := b.planner.reports()
			paused := tc.status == http.StatusTooManyRequests
			if slices.Contains(h, healthReport{"vid/a", false}) == paused || !slices.Contains(h, healthReport{"vid/b", true}) {
				t.Errorf("health reports %+v, want vid/b ok and vid/a not ok unless it was paused (%v)", h, paused)
			}
			b.planner.mu.Lock()
			pauses := slices.Clone(b.planner.pauses)
			b.planner.mu.Unlock()
			if paused != (len(pauses) == 1 && strings.HasPrefix(pauses[0], "vid/a for ")) {
				t.Errorf("pauses asked for %v; want one of vid/a only for the 429", pauses)
			}
			b.waitReleased(t)
		})
	}
}

// TestRateLimitedWithNoOtherCandidate: a task whose only platform is at
// its cap waits out Retry-After and tries again, until the platform has
// room; it never fails for it.
func TestRateLimitedWithNoOtherCandidate(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {MaxJobs: 1, JobDuration: 5 * time.Second, RetryAfter: 2 * time.Second}}})
	a := b.up["vid/a"]
	other := a.occupy(t)
	tk := b.submit(t, s, nil)
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded {
		t.Fatalf("task %+v, want succeeded once the platform had room", got)
	}
	st := a.srv.Stats()
	if st.JobsRejected < 1 || st.JobsRejected > 3 {
		t.Errorf("%d submits refused while the platform was full for 5s, want 1 to 3 (one per Retry-After of 2s)", st.JobsRejected)
	}
	var otherEnd time.Time
	for _, j := range a.srv.Jobs() {
		if j.ID == other.ID {
			otherEnd = j.EndsAt
		}
	}
	if mine := a.jobByKey(t, tk.ID); mine.CreatedAt.Before(otherEnd) {
		t.Errorf("the task's job started at +%s, before the job holding the cap ended (+%s)", mine.CreatedAt.Sub(testStart), otherEnd.Sub(testStart))
	}
	// Each refusal asked the planner to pause vid/a for its Retry-After,
	// and none counted against its health.
	b.planner.mu.Lock()
	defer b.planner.mu.Unlock()
	if len(b.planner.pauses) < 1 || b.planner.pauses[0] != "vid/a for 2s" {
		t.Errorf("pauses asked for: %v; want vid/a for 2s", b.planner.pauses)
	}
	for _, h := range b.planner.health {
		if !h.ok {
			t.Errorf("a 429 with Retry-After counted against %s's health", h.pm)
		}
	}
}

// TestSubmitFailureWithNoOtherCandidate: a platform answering 500 to the
// only candidate's submit, with no attempts left, fails the task as the
// upstream's error; a refusal (400) fails it as refused.
func TestSubmitFailureWithNoOtherCandidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ status, code string }{{"500", "upstream_error"}, {"400", "upstream_refused"}} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t, setupOpts{Config: Config{MaxAttempts: 1}})
			b.up["vid/a"].setInject(func(r *http.Request) { r.Header.Set("X-Mock-Status", tc.status) })
			tk := b.submit(t, s, nil)
			got := b.driveTo(t, tk.ID, weir.TaskFailed, weir.TaskSucceeded)
			if got.Status != weir.TaskFailed || got.ErrorCode != tc.code {
				t.Fatalf("task %+v: want failed %s", got, tc.code)
			}
			b.waitReleased(t)
		})
	}
}

// TestUpstreamLosesTheJob: a poll that finds the job gone (404) fails the
// task as upstream_lost at once.
func TestUpstreamLosesTheJob(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}}})
	tk := b.submit(t, s, nil)
	running := b.driveTo(t, tk.ID, weir.TaskRunning)
	b.up["vid/a"].setInject(func(r *http.Request) {
		if r.Method == http.MethodGet {
			r.Header.Set("X-Mock-Status", "404")
		}
	})
	got := b.driveTo(t, tk.ID, weir.TaskFailed, weir.TaskSucceeded)
	if got.Status != weir.TaskFailed || got.ErrorCode != "upstream_lost" || got.UpstreamID != running.UpstreamID {
		t.Fatalf("task %+v: want failed upstream_lost", got)
	}
}

// TestFailoverDoesNotBounceBetweenSaturatedPlatforms: a task whose every
// candidate refuses it for capacity is not sent back and forth between
// them at once: once each has refused it, it waits out a Retry-After,
// then runs where there is room.
func TestFailoverDoesNotBounceBetweenSaturatedPlatforms(t *testing.T) {
	t.Parallel()
	full := mock.Config{MaxJobs: 1, JobDuration: time.Hour, RetryAfter: 2 * time.Second}
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": full, "vid/b": full}})
	a, bb := b.up["vid/a"], b.up["vid/b"]
	a.occupy(t)
	held := bb.occupy(t)
	tk := b.submit(t, s, nil)
	rejected := func() int64 { return a.srv.Stats().JobsRejected + bb.srv.Stats().JobsRejected }
	waitFor(t, "both platforms to refuse the task", func() bool { return rejected() >= 2 })
	waitFor(t, "the task to wait out a Retry-After", func() bool {
		if n := rejected(); n > 2 {
			t.Fatalf("%d submits refused: the task bounces between its saturated candidates", n)
		}
		_, ok := b.clock.next()
		return ok
	})
	if got := b.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Errorf("task %s while it waits, want queued", got.Status)
	}
	// vid/b gets room; the task runs there after the wait.
	if err := bb.adapter.Cancel(t.Context(), held.ID); err != nil {
		t.Fatal(err)
	}
	got := b.driveTo(t, tk.ID, weir.TaskRunning, weir.TaskFailed)
	if got.Status != weir.TaskRunning || got.PlatformModel != "vid/b" {
		t.Errorf("task %+v, want it running on vid/b", got)
	}
	if n := rejected(); n > 4 {
		t.Errorf("%d submits refused in all, want a few", n)
	}
}

// TestFailoverDoesNotBounceBetweenFailingPlatforms: a task whose every
// candidate answers its submit 500 is not sent back and forth between
// them: once each has failed it, the task's attempts are spent as with
// one candidate, and it fails when they run out.
func TestFailoverDoesNotBounceBetweenFailingPlatforms(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {ErrorRate: 1}, "vid/b": {ErrorRate: 1}},
		Config:    Config{MaxAttempts: 1},
	})
	tk := b.submit(t, s, nil)
	failed := func() int64 {
		return b.up["vid/a"].srv.Stats().ByStatus[http.StatusInternalServerError] + b.up["vid/b"].srv.Stats().ByStatus[http.StatusInternalServerError]
	}
	var got weir.Task
	waitFor(t, "the task to fail", func() bool {
		if n := failed(); n > 4 {
			t.Fatalf("%d submits failed: the task bounces between its failing candidates", n)
		}
		got = b.get(t, tk.ID)
		return got.Status.Terminal()
	})
	if got.Status != weir.TaskFailed || got.ErrorCode != "upstream_error" {
		t.Errorf("task %+v, want failed upstream_error", got)
	}
}

// TestSubmitThatMayHaveStartedIsRetriedInPlace: a submit answered 504 may
// have started a job, so the task is not sent to another candidate:
// River retries the step on the same platform, with the same
// Idempotency-Key, which finds the job if there is one.
func TestSubmitThatMayHaveStartedIsRetriedInPlace(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {}, "vid/b": {}},
		Config:    Config{MaxAttempts: 2},
	})
	a := b.up["vid/a"]
	var once sync.Once
	a.setInject(func(r *http.Request) {
		if r.Method == http.MethodPost {
			once.Do(func() { r.Header.Set("X-Mock-Status", "504") })
		}
	})
	tk := b.submit(t, s, nil)
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded || got.PlatformModel != "vid/a" {
		t.Fatalf("task %+v: want succeeded on vid/a", got)
	}
	if n := a.srv.Stats().ByStatus[http.StatusGatewayTimeout]; n != 1 {
		t.Errorf("vid/a answered %d 504s, want 1", n)
	}
	if j := a.jobByKey(t, tk.ID); j.ID != got.UpstreamID {
		t.Errorf("the task's job %s, want the one submitted with its id as key (%s)", got.UpstreamID, j.ID)
	}
	if n := b.up["vid/b"].srv.Stats().Requests; n != 0 {
		t.Errorf("%d requests to vid/b, want none", n)
	}
}

// TestRequeuedTaskKeepsItsPlace: a task that its upstream sends back to
// the queue (a 429 on its submit) waits where it first arrived, before
// the tasks submitted after it, not behind them.
func TestRequeuedTaskKeepsItsPlace(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		// A job outlasts the refused submit's Retry-After (1s).
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: 3 * time.Second}},
		Limits:    map[string]int64{"vid/a": 1},
	})
	arrived, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.up["vid/a"].setInject(func(r *http.Request) {
		if r.Method != http.MethodPost {
			return
		}
		first := false
		once.Do(func() { first = true })
		if first {
			// The first task's submit waits until the others queue,
			// then the platform refuses it.
			close(arrived)
			<-proceed
			r.Header.Set("X-Mock-Status", "429")
		}
	})
	first := b.submit(t, s, nil)
	select {
	case <-arrived:
	case <-time.After(waitBound):
		t.Fatal("the first task's submit never reached the platform")
	}
	second := b.submit(t, s, nil)
	third := b.submit(t, s, nil)
	close(proceed)
	for _, id := range []string{first.ID, second.ID, third.ID} {
		b.driveTo(t, id, weir.TaskSucceeded)
	}
	keys := b.up["vid/a"].jobKeys()
	// The second took the slot the refusal freed; the first, back from
	// its Retry-After, went before the third.
	if want := []string{second.ID, first.ID, third.ID}; !slices.Equal(keys, want) {
		t.Errorf("upstream jobs in the order %v, want %v (second, first, third)", keys, want)
	}
}
