package task

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestRecoverAfterRestart: a new Service on the same store gives the
// running task its lease back before anything else is admitted, queues
// the waiting tasks in their original order, and follows the running one
// to its end without submitting it again.
func TestRecoverAfterRestart(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: 4 * time.Second}},
		Limits:    map[string]int64{"vid/a": 1},
	})
	first := b.submit(t, s, nil)
	second := b.submit(t, s, nil)
	third := b.submit(t, s, nil)
	b.driveTo(t, first.ID, weir.TaskRunning)

	s = b.restart(t, s)
	if n := b.used(t, "pm:vid/a"); n != 1 {
		t.Errorf("%d of vid/a held after the restart, want the running task's lease restored", n)
	}
	for i, id := range []string{second.ID, third.ID} {
		if p, ok := s.Position(t.Context(), id); !ok || p.Ahead != i {
			t.Errorf("queued task %d after the restart: %+v, %v; want %d ahead", i+2, p, ok, i)
		}
	}
	for _, id := range []string{first.ID, second.ID, third.ID} {
		if got := b.driveTo(t, id, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
			t.Fatalf("task %+v after the restart, want succeeded", got)
		}
	}
	up := b.up["vid/a"]
	var keys []string
	for _, j := range up.srv.Jobs() {
		keys = append(keys, j.IdempotencyKey)
		if j.Submits != 1 {
			t.Errorf("upstream job of %s submitted %d times, want once", j.IdempotencyKey, j.Submits)
		}
	}
	if want := []string{first.ID, second.ID, third.ID}; !slices.Equal(keys, want) {
		t.Errorf("upstream jobs in the order %v, want %v", keys, want)
	}
	if st := up.srv.Stats(); st.PeakJobsRunning != 1 {
		t.Errorf("%d jobs ran at once on a platform of capacity 1: a restored lease was not counted", st.PeakJobsRunning)
	}
	b.waitReleased(t)
}

// TestRecoverReclaimsJobsLeftRunning: a job the last run left running
// (it was killed mid-step) runs at once after a restart of the store's
// sole runner, not after RescueAfter.
func TestRecoverReclaimsJobsLeftRunning(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: 4 * time.Second}},
		Config:    Config{SoleRunner: true, RescueAfter: time.Hour},
	})
	tk := b.submit(t, s, nil)
	b.driveTo(t, tk.ID, weir.TaskRunning)
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// As if the process had died in the middle of the job's step.
	if _, err := b.store.SQL().ExecContext(t.Context(),
		`UPDATE river_job SET state = 'running', attempted_at = created_at WHERE kind = ?`, RunArgs{}.Kind()); err != nil {
		t.Fatal(err)
	}
	s2 := b.newService(t)
	b.start(t, s2)
	if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Fatalf("task %+v, want succeeded", got)
	}
	if j := b.up["vid/a"].jobByKey(t, tk.ID); j.Submits != 1 {
		t.Errorf("upstream job submitted %d times, want once", j.Submits)
	}
}

// TestRecoverPlatformLeftTheCatalog: a running task whose platform model
// left the catalog while the service was down, with its platform (the
// planner knows its site no more), fails as platform_gone instead of
// waiting for a lease it cannot have.
func TestRecoverPlatformLeftTheCatalog(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}, "vid/b": {}}})
	tk := b.submit(t, s, nil)
	b.driveTo(t, tk.ID, weir.TaskRunning)
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.planner.drop("vid/a")
	s2 := b.newService(t)
	b.start(t, s2)
	got := b.driveTo(t, tk.ID, weir.TaskFailed, weir.TaskSucceeded)
	if got.Status != weir.TaskFailed || got.ErrorCode != "platform_gone" {
		t.Fatalf("task %+v, want failed platform_gone", got)
	}
	b.waitReleased(t)
}

// TestPurgeRunsOnStart: River's periodic purge runs when the service
// starts and removes the finished tasks past their retention.
func TestPurgeRunsOnStart(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{NoStart: true, Config: Config{Retention: 24 * time.Hour}})
	add := func(finished time.Time) string {
		tk := weir.Task{ID: NewID("task"), KeyID: b.key.ID, Kind: "task", Model: "m", Input: []byte(`{}`),
			Status: weir.TaskQueued, Candidate: -1, CreatedAt: testStart.Add(-72 * time.Hour)}
		if _, err := b.store.TaskCreate(t.Context(), &tk); err != nil {
			t.Fatal(err)
		}
		done := weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskSucceeded, FinishedAt: finished}
		if ok, err := b.store.TaskUpdate(t.Context(), &weir.TaskUpdateParams{ID: tk.ID, Update: done}); !ok || err != nil {
			t.Fatalf("finish %s: %v %v", tk.ID, ok, err)
		}
		return tk.ID
	}
	add(testStart.Add(-48 * time.Hour))
	add(testStart.Add(-25 * time.Hour))
	kept := add(testStart.Add(-time.Hour))
	b.start(t, s)
	waitFor(t, "the old tasks purged", func() bool {
		left, err := s.List(t.Context(), weir.TaskFilter{})
		return err == nil && len(left) == 1 && left[0].ID == kept
	})
}

// TestRecoverExpiresTasksPastTheirDeadline: a task still queued whose
// deadline passed while the service was down expires at the restart.
func TestRecoverExpiresTasksPastTheirDeadline(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: 3 * time.Hour}},
		Limits:    map[string]int64{"vid/a": 1},
		Config:    Config{MaxWait: time.Hour},
	})
	running := b.submit(t, s, nil)
	waiting := b.submit(t, s, nil)
	b.driveTo(t, running.ID, weir.TaskRunning)
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.engine.Close()
	b.clock.Advance(2 * time.Hour) // down for two hours
	s2 := b.newService(t)
	b.start(t, s2)
	got := b.driveTo(t, waiting.ID, weir.TaskExpired, weir.TaskFailed, weir.TaskSucceeded)
	if got.Status != weir.TaskExpired || got.ErrorCode != "expired" || !strings.HasSuffix(got.ErrorMessage, "its maximum wait (1h0m0s)") {
		t.Errorf("task %s %s (%s) after a restart past its deadline, want expired, its maximum wait of 1h named", got.Status, got.ErrorCode, got.ErrorMessage)
	}
}

// TestGivesUpWhenTheLeaseCannotBeRestored: a running task whose
// platform model is no longer among its model's candidates cannot have
// its lease back after a restart; once River's attempts run out the task
// fails as gave_up, and its upstream job is cancelled.
func TestGivesUpWhenTheLeaseCannotBeRestored(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}, "vid/b": {}},
		Models:    map[string][]string{"sora-2": {"vid/a", "vid/b"}},
		Config:    Config{MaxAttempts: 1},
	})
	tk := b.submit(t, s, nil)
	b.driveTo(t, tk.ID, weir.TaskRunning)
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.planner.mu.Lock()
	b.planner.models["sora-2"] = []string{"vid/b"} // vid/a still has its target
	b.planner.mu.Unlock()
	s2 := b.newService(t)
	b.start(t, s2)
	got := b.driveTo(t, tk.ID, weir.TaskFailed, weir.TaskSucceeded)
	if got.Status != weir.TaskFailed || got.ErrorCode != "gave_up" || !strings.Contains(got.ErrorMessage, "no longer a candidate") {
		t.Fatalf("task %+v, want failed gave_up, saying why", got)
	}
	// The job is cancelled upstream just after the task's end is stored.
	waitFor(t, "the upstream job cancelled", func() bool { return b.up["vid/a"].srv.Stats().JobsCancelled == 1 })
}

// TestStepTimingOutOnItsLastAttemptFailsTheTask: a step that outlives
// River's job timeout on the job's last attempt fails the task as
// gave_up: the task is not left admitted with no job to finish it.
func TestStepTimingOutOnItsLastAttemptFailsTheTask(t *testing.T) {
	t.Parallel()
	// RescueAfter 2s makes the job timeout 1s.
	s, b := setup(t, setupOpts{Config: Config{MaxAttempts: 1, RescueAfter: 2 * time.Second}})
	b.up["vid/a"].setInject(func(r *http.Request) {
		if r.Method == http.MethodPost {
			r.Header.Set("X-Mock-Latency", "10s")
		}
	})
	tk := b.submit(t, s, nil)
	got := b.driveTo(t, tk.ID, weir.TaskFailed, weir.TaskSucceeded)
	if got.ErrorCode != "gave_up" {
		t.Errorf("task %+v, want failed gave_up", got)
	}
	b.waitReleased(t)
}

// TestRecoverQueuedInPages: recovery reads the queued tasks a page at a
// time and queues every one of them, in submission order, across the
// pages' edges.
func TestRecoverQueuedInPages(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Limits: map[string]int64{"vid/a": 1}})
	release := b.hold(t, "vid/a", 1)
	defer release()
	var ids []string
	for i := range 8 {
		tk := weir.Task{ID: NewID("task"), KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"x"}`),
			Status: weir.TaskQueued, Candidate: -1, CreatedAt: testStart.Add(time.Duration(i) * time.Millisecond), Deadline: testStart.Add(time.Hour)}
		if _, err := b.store.TaskCreate(t.Context(), &tk); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	queued, err := s.term.recoverQueued(t.Context(), 3)
	if err != nil || queued != len(ids) {
		t.Fatalf("recoverQueued in pages of 3 = %d, %v; want %d queued", queued, err, len(ids))
	}
	for i, id := range ids {
		if p, ok := s.Position(t.Context(), id); !ok || p.Ahead != i {
			t.Errorf("task %d: %+v, %v; want %d ahead", i, p, ok, i)
		}
	}
}

// TestRecoverLeavesASentBackTaskToItsWait: a task its worker sent back
// to wait out the platform's Retry-After is not queued early by a
// recovery reading the queue meanwhile, as a restart's does while its
// workers already run; it queues once the wait is over.
func TestRecoverLeavesASentBackTaskToItsWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {MaxJobs: 1, JobDuration: time.Hour, RetryAfter: 30 * time.Second}}})
	a := b.up["vid/a"]
	held := a.occupy(t)
	tk := b.submit(t, s, nil)
	tm := s.current()
	waitFor(t, "the task sent back, its lease released", func() bool {
		return a.srv.Stats().JobsRejected == 1 && b.get(t, tk.ID).Status == weir.TaskQueued && b.used(t, WorkersScope) == 0
	})
	if _, err := tm.recoverQueued(ctx, recoverPage); err != nil {
		t.Fatal(err)
	}
	tm.mu.Lock()
	w, h := tm.waiting[tk.ID], tm.leases[tk.ID]
	tm.mu.Unlock()
	if w != nil || h != nil {
		t.Fatalf("the task queued by the recovery before its Retry-After passed (waiter %v, lease %v)", w != nil, h != nil)
	}
	if err := a.adapter.Cancel(ctx, held.ID); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(30 * time.Second)
	if got := b.driveTo(t, tk.ID, weir.TaskRunning, weir.TaskFailed); got.Status != weir.TaskRunning {
		t.Fatalf("task %+v after its wait, want running", got)
	}
	if st := a.srv.Stats(); st.JobsRejected != 1 {
		t.Errorf("%d submits refused, want the one before the wait", st.JobsRejected)
	}
}
