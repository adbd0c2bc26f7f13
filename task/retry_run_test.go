package task

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestRetryFailedJobsWithBackoff: a task whose upstream jobs keep
// failing runs MaxAttempts jobs, each with its own Idempotency-Key, each
// after a growing backoff, then fails with the upstream's code; between
// jobs it is queued and holds no capacity.
func TestRetryFailedJobsWithBackoff(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second, JobFailureRate: 1}},
		Config:    Config{MaxAttempts: 3},
	})
	tk := b.submit(t, s, nil)
	b.drive(t, "the first job to fail", func() bool { return b.get(t, tk.ID).Attempts == 1 })
	between := b.get(t, tk.ID)
	if between.Status != weir.TaskQueued || between.UpstreamID != "" || between.Progress != 0 || between.Candidate != -1 {
		t.Errorf("task after its first job failed: %+v; want queued again, its job forgotten", between)
	}
	b.waitReleased(t)

	got := b.driveTo(t, tk.ID, weir.TaskFailed, weir.TaskSucceeded)
	if got.Status != weir.TaskFailed || got.ErrorCode != "video_generation_failed" || got.Attempts != 2 {
		t.Fatalf("task %+v: want failed with the upstream's code after 3 jobs", got)
	}
	up := b.up["vid/a"]
	keys := []string{tk.ID, tk.ID + "-1", tk.ID + "-2"}
	var prevEnd time.Time
	for n, key := range keys {
		j := up.jobByKey(t, key)
		if n > 0 {
			// retryBackoff(n) is PollMin·4^n ± 50%, from the poll that saw
			// the failure.
			if least := (250 * time.Millisecond << (2 * n)) / 2; j.CreatedAt.Sub(prevEnd) < least {
				t.Errorf("job %d started %s after the one before failed, want at least %s", n+1, j.CreatedAt.Sub(prevEnd), least)
			}
		}
		prevEnd = j.EndsAt
	}
	if st := up.srv.Stats(); st.JobsSubmitted != 3 {
		t.Errorf("%d upstream jobs, want 3", st.JobsSubmitted)
	}
}

// TestRetryFailedJobThenSucceed: a job that fails is followed by a new one
// that succeeds; the task ends succeeded with the new job's result.
func TestRetryFailedJobThenSucceed(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second, JobFailureRate: 1}}})
	up := b.up["vid/a"]
	tk := b.submit(t, s, nil)
	b.drive(t, "the first job to fail", func() bool { return b.get(t, tk.ID).Attempts == 1 })
	if err := up.srv.Update(func(c *mock.Config) { c.JobFailureRate = 0 }); err != nil {
		t.Fatal(err)
	}
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded || got.UpstreamID != up.jobByKey(t, tk.ID+"-1").ID || got.Attempts != 1 {
		t.Fatalf("task %+v: want succeeded with its second job", got)
	}
}

// TestRetryBackoffEndingAfterStop: a task whose backoff ends after the
// service stopped (and its engine closed, as at shutdown) stays queued
// for the next start, which runs it.
func TestRetryBackoffEndingAfterStop(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second, JobFailureRate: 1}}})
	tk := b.submit(t, s, nil)
	b.drive(t, "the first job to fail", func() bool { return b.get(t, tk.ID).Attempts == 1 })
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.engine.Close()
	b.clock.Advance(time.Hour) // the backoff ends
	if got := b.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task %s %s (%s) after its backoff ended past Stop, want still queued", got.Status, got.ErrorCode, got.ErrorMessage)
	}
	if err := b.up["vid/a"].srv.Update(func(c *mock.Config) { c.JobFailureRate = 0 }); err != nil {
		t.Fatal(err)
	}
	s2 := b.newService(t)
	b.start(t, s2)
	if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Errorf("task %+v after the restart, want succeeded", got)
	}
}

// TestRequeueSurvivesAStoreReadFailure: a task whose backoff ends while
// the store cannot be read is not dropped from the queue: it is read
// again a little later, and runs.
func TestRequeueSurvivesAStoreReadFailure(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second, JobFailureRate: 1}}})
	tk := b.submit(t, s, nil)
	b.drive(t, "the first job to fail", func() bool { return b.get(t, tk.ID).Attempts == 1 })
	waitFor(t, "the backoff to be set", func() bool { _, ok := b.clock.next(); return ok })
	if err := b.up["vid/a"].srv.Update(func(c *mock.Config) { c.JobFailureRate = 0 }); err != nil {
		t.Fatal(err)
	}
	b.served.failGets.Store(true)
	at, _ := b.clock.next()
	b.clock.Set(at) // the backoff ends while the store is down
	b.served.failGets.Store(false)
	if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Errorf("task %+v, want succeeded", got)
	}
}
