package task

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// failSubmits makes every submit to the platform answer 503.
func failSubmits(u *testUpstream) {
	u.setInject(func(r *http.Request) {
		if r.Method == http.MethodPost {
			r.Header.Set("X-Mock-Status", "503")
		}
	})
}

// TestFleetRequeueElsewhere: a platform that fails a submit sends the
// task back to the leader's ledger, which queues it on the other
// candidate at once.
func TestFleetRequeueElsewhere(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {}, "vid/b": {}}}, "a", "b")
	fb.elect(t, "a")
	failSubmits(fb.up["vid/a"])
	tk := fb.submit(t, "b")
	got := fb.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded || got.PlatformModel != "vid/b" {
		t.Fatalf("task %+v; want succeeded on vid/b", got)
	}
	if n := fb.up["vid/a"].srv.Stats().ByStatus[http.StatusServiceUnavailable]; n != 1 {
		t.Errorf("vid/a answered %d 503s; want the one submit", n)
	}
	if n := fb.up["vid/b"].srv.Stats().JobsSubmitted; n != 1 {
		t.Errorf("%d jobs on vid/b; want 1", n)
	}
	waitFor(t, "every lease released", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// TestFleetEveryCandidateFails: platforms that all keep failing a
// task's submit end it, after MaxAttempts rounds, instead of passing it
// between them for ever.
func TestFleetEveryCandidateFails(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {}, "vid/b": {}}, Config: Config{MaxAttempts: 2}}, "a", "b")
	fb.elect(t, "a")
	failSubmits(fb.up["vid/a"])
	failSubmits(fb.up["vid/b"])
	tk := fb.submit(t, "b")
	got := fb.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskFailed || got.ErrorCode != "upstream_error" {
		t.Fatalf("task %+v; want failed upstream_error", got)
	}
	waitFor(t, "every lease released", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// TestFleetRetryFailedJob: a task whose upstream job failed is queued
// again by the leader's ledger only after its backoff, holding no
// capacity meanwhile, and runs a new job.
func TestFleetRetryFailedJob(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second, JobFailureRate: 1}},
		Config: Config{MaxAttempts: 3}}, "a", "b")
	fb.elect(t, "a")
	tk := fb.submit(t, "b")
	fb.drive(t, "the first job to fail", func() bool { return fb.get(t, tk.ID).Attempts == 1 })
	waitFor(t, "its lease released", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
	got := fb.driveTo(t, tk.ID, weir.TaskFailed, weir.TaskSucceeded)
	if got.Status != weir.TaskFailed || got.ErrorCode != "video_generation_failed" || got.Attempts != 2 {
		t.Fatalf("task %+v; want failed with the upstream's code after 3 jobs", got)
	}
	up := fb.up["vid/a"]
	var prevEnd time.Time
	for n, key := range []string{tk.ID, tk.ID + "-1", tk.ID + "-2"} {
		j := up.jobByKey(t, key)
		if n > 0 {
			if least := (250 * time.Millisecond << (2 * n)) / 2; j.CreatedAt.Sub(prevEnd) < least {
				t.Errorf("job %d started %s after the one before failed; want at least %s", n+1, j.CreatedAt.Sub(prevEnd), least)
			}
		}
		prevEnd = j.EndsAt
	}
	waitFor(t, "every lease released", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// TestFleetPollDefersAPassingPlanFailure: a queued task the leader's
// poll finds (its notice was lost) but cannot plan, the store failing,
// stays queued and queues after a backoff once the store answers,
// rather than failing no_candidate.
func TestFleetPollDefersAPassingPlanFailure(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{}, "a", "b")
	fb.elect(t, "a")
	waitFor(t, "a to listen", func() bool { return fb.node("a").store.listening.Load() >= 1 })
	fb.node("b").store.mute.Store(true)
	lost := fb.submit(t, "b")
	fb.planner.failWith(fmt.Errorf("task %s: key %s: %w", lost.ID, fb.key.ID, errStoreDown))
	fb.poll()
	waitFor(t, "the poll to put the task off", func() bool {
		at, ok := fb.clock.next()
		return ok && at.Sub(fb.clock.Now()) <= admitRetry
	})
	if got := fb.get(t, lost.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task %s %s (%s) after a poll that could not plan it, want still queued", got.ID, got.Status, got.ErrorMessage)
	}
	fb.planner.failWith(nil)
	if got := fb.driveTo(t, lost.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Fatalf("task %s %s (%s) once the store answers, want succeeded", got.ID, got.Status, got.ErrorMessage)
	}
}
