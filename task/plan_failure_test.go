package task

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// storeQueued stores a queued task of model sora-2 as a submission an
// earlier run accepted would have left it, for a recovery to find.
func (b *testBundle) storeQueued(t *testing.T) weir.Task {
	t.Helper()
	tk := weir.Task{ID: NewID("video"), KeyID: b.key.ID, Kind: "video", Model: "sora-2",
		Input:  []byte(`{"prompt":"a heron at dawn","seconds":"4"}`),
		Status: weir.TaskQueued, Candidate: -1, CreatedAt: testStart, Deadline: testStart.Add(24 * time.Hour)}
	if _, err := b.store.TaskCreate(t.Context(), &tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestRecoverDefersAPassingPlanFailure: a queued task that a recovery
// cannot plan because the store failed (the planner reads the key and
// the budgets there) stays queued and queues once the store answers;
// one that has truly no candidate fails as no_candidate.
func TestRecoverDefersAPassingPlanFailure(t *testing.T) {
	t.Parallel()
	t.Run("passing", func(t *testing.T) {
		t.Parallel()
		m := &recordingMetrics{}
		s, b := setup(t, setupOpts{NoStart: true, Config: Config{Metrics: m}})
		tk := b.storeQueued(t)
		b.planner.failWith(fmt.Errorf("task %s: key %s: %w", tk.ID, b.key.ID, errStoreDown))
		b.start(t, s) // recovers the queued tasks before it returns
		if got := b.get(t, tk.ID); got.Status != weir.TaskQueued {
			t.Fatalf("after a recovery whose planner could not read the store: task %s %s (%s), want still queued",
				got.Status, got.ErrorCode, got.ErrorMessage)
		}
		if n := m.dispatched("deferred"); n != 1 {
			t.Errorf("%d deferrals counted, want 1", n)
		}
		b.planner.failWith(nil)
		if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
			t.Fatalf("task %s %s (%s) once the store answers, want succeeded", got.Status, got.ErrorCode, got.ErrorMessage)
		}
	})
	t.Run("lasting", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t, setupOpts{NoStart: true})
		tk := b.storeQueued(t)
		b.planner.failWith(fmt.Errorf("%w: model %q serves no tasks", admission.ErrNoCandidate, "sora-2"))
		b.start(t, s)
		if got := b.get(t, tk.ID); got.Status != weir.TaskFailed || got.ErrorCode != "no_candidate" {
			t.Fatalf("task %s %s, want failed no_candidate", got.Status, got.ErrorCode)
		}
	})
}
