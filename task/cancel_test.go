package task

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
)

// runJobState is the state of task id's River run job ("" if none).
func (b *testBundle) runJobState(t *testing.T, id string) string {
	t.Helper()
	var state string
	err := b.store.SQL().QueryRowContext(t.Context(),
		`SELECT state FROM river_job WHERE kind = ? AND json_extract(args, '$.task_id') = ? ORDER BY id DESC LIMIT 1`,
		RunArgs{}.Kind(), id).Scan(&state)
	if err != nil {
		t.Fatalf("run job of %s: %v", id, err)
	}
	return state
}

// TestCancelQueued: a queued task leaves the queue at once, is stored
// cancelled, and never runs; cancelling it again returns it as it is.
func TestCancelQueued(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Limits: map[string]int64{"vid/a": 1}})
	release := b.hold(t, "vid/a", 1)
	tk := b.submit(t, s, nil)
	next := b.submit(t, s, nil)
	got, err := s.Cancel(t.Context(), tk.ID)
	if err != nil || got.Status != weir.TaskCancelled || got.ErrorCode != "cancelled" {
		t.Fatalf("Cancel = %+v, %v; want it cancelled", got, err)
	}
	if _, ok := s.Position(t.Context(), tk.ID); ok {
		t.Error("the cancelled task still has a queue position")
	}
	if p, ok := s.Position(t.Context(), next.ID); !ok || p.Ahead != 0 {
		t.Errorf("the task behind: %+v, %v; want it first now", p, ok)
	}
	release()
	b.driveTo(t, next.ID, weir.TaskSucceeded)
	if jobs := b.up["vid/a"].srv.Jobs(); len(jobs) != 1 || jobs[0].IdempotencyKey != next.ID {
		t.Errorf("upstream jobs %+v, want only the task that was not cancelled", jobs)
	}
	again, err := s.Cancel(t.Context(), tk.ID)
	if err != nil || again.Status != weir.TaskCancelled || !again.FinishedAt.Equal(got.FinishedAt) {
		t.Errorf("second Cancel = %+v, %v; want the task as it was", again, err)
	}
	if _, err := s.Cancel(t.Context(), "task_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel of no task = %v, want ErrNotFound", err)
	}
}

// TestCancelRunning: a running task is cancelled upstream, its capacity
// released, and its River job ends rather than polling on.
func TestCancelRunning(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}}})
	tk := b.submit(t, s, nil)
	b.driveTo(t, tk.ID, weir.TaskRunning)
	// Let the job settle into its wait for the next poll.
	waitFor(t, "the run to wait for its next poll", func() bool { _, ok := b.clock.next(); return ok })
	got, err := s.Cancel(t.Context(), tk.ID)
	if err != nil || got.Status != weir.TaskCancelled {
		t.Fatalf("Cancel = %+v, %v; want cancelled", got, err)
	}
	if st := b.up["vid/a"].srv.Stats(); st.JobsCancelled != 1 || st.JobsRunning != 0 {
		t.Errorf("upstream: %d cancelled, %d running; want its job cancelled", st.JobsCancelled, st.JobsRunning)
	}
	if n := b.used(t, "pm:vid/a"); n != 0 {
		t.Errorf("%d of vid/a held after cancel", n)
	}
	waitFor(t, "the run job to complete", func() bool { return b.runJobState(t, tk.ID) == "completed" })
	if got := b.get(t, tk.ID); got.Status != weir.TaskCancelled {
		t.Errorf("task %s after its job ended, want still cancelled", got.Status)
	}
}

// TestDelete: a finished task's upstream job is deleted and the task
// marked deleted; a running one is cancelled first; a task deleted or not
// there is ErrNotFound.
func TestDelete(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second}}})
	up := b.up["vid/a"]
	done := b.submit(t, s, nil)
	done = b.driveTo(t, done.ID, weir.TaskSucceeded)
	if err := s.Delete(t.Context(), done.ID); err != nil {
		t.Fatalf("Delete of a finished task: %v", err)
	}
	if got := b.get(t, done.ID); !got.Deleted() || got.Status != weir.TaskSucceeded {
		t.Errorf("deleted task %+v: want marked deleted, still succeeded", got)
	}
	if jobs := up.srv.Jobs(); len(jobs) != 0 {
		t.Errorf("upstream jobs after the delete: %+v, want the output deleted", jobs)
	}
	if err := s.Delete(t.Context(), done.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), "task_missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete of no task = %v, want ErrNotFound", err)
	}

	if err := up.srv.Update(func(c *mock.Config) { c.JobDuration = time.Hour }); err != nil {
		t.Fatal(err)
	}
	running := b.submit(t, s, nil)
	b.driveTo(t, running.ID, weir.TaskRunning)
	if err := s.Delete(t.Context(), running.ID); err != nil {
		t.Fatalf("Delete of a running task: %v", err)
	}
	if got := b.get(t, running.ID); !got.Deleted() || got.Status != weir.TaskCancelled {
		t.Errorf("deleted running task %+v: want cancelled and deleted", got)
	}
	if st := up.srv.Stats(); st.JobsCancelled != 1 {
		t.Errorf("%d upstream jobs cancelled, want the running task's", st.JobsCancelled)
	}
}

// TestDeleteUpstreamRefuses: an upstream that refuses to delete the job
// leaves the task as it was, and says why; a platform that left the
// catalog cannot be asked, and the task is deleted all the same.
func TestDeleteUpstreamRefuses(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{})
	tk := b.submit(t, s, nil)
	b.driveTo(t, tk.ID, weir.TaskSucceeded)
	b.up["vid/a"].setInject(func(r *http.Request) {
		if r.Method == http.MethodDelete {
			r.Header.Set("X-Mock-Status", "500")
		}
	})
	err := s.Delete(t.Context(), tk.ID)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusInternalServerError {
		t.Fatalf("Delete with the upstream failing = %v, want its error", err)
	}
	if got := b.get(t, tk.ID); got.Deleted() {
		t.Fatal("task marked deleted though its upstream job was not")
	}
	b.planner.drop("vid/a")
	if err := s.Delete(t.Context(), tk.ID); err != nil {
		t.Fatalf("Delete of a task whose platform left the catalog: %v", err)
	}
	if got := b.get(t, tk.ID); !got.Deleted() {
		t.Error("task not deleted")
	}
}

// TestCancelWhileSubmitting: a task cancelled while its submit is in
// flight has the job that submit started cancelled upstream, and is not
// left running.
func TestCancelWhileSubmitting(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}}})
	up := b.up["vid/a"]
	up.setInject(func(r *http.Request) {
		if r.Method == http.MethodPost {
			r.Header.Set("X-Mock-Latency", "1s") // long enough to cancel in
		}
	})
	tk := b.submit(t, s, nil)
	waitFor(t, "the submit in flight", func() bool { return up.srv.Stats().InFlight == 1 })
	if got, err := s.Cancel(t.Context(), tk.ID); err != nil || got.Status != weir.TaskCancelled {
		t.Fatalf("Cancel = %+v, %v; want cancelled", got, err)
	}
	waitFor(t, "the job the submit started cancelled", func() bool {
		st := up.srv.Stats()
		return st.JobsSubmitted == 1 && st.JobsCancelled == 1 && st.JobsRunning == 0
	})
	waitFor(t, "the run job to complete", func() bool { return b.runJobState(t, tk.ID) == "completed" })
	if got := b.get(t, tk.ID); got.Status != weir.TaskCancelled || got.UpstreamID != "" {
		t.Errorf("task %+v, want still cancelled", got)
	}
	b.waitReleased(t)
}
