package task

import (
	"database/sql"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// hideTarget takes platform model pm's target from the planner, as a
// replica whose catalog does not have it yet, while a model still plans
// it (the leader's catalog has it); the returned func gives it back.
func (p *testPlanner) hideTarget(pm string) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	tg := p.targets[pm]
	delete(p.targets, pm)
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.targets[pm] = tg
	}
}

// runJobSnoozed reports whether task id's run job was tried and waits
// to run again (a short snooze leaves it available at a later time, its
// attempt given back).
func (b *testBundle) runJobSnoozed(t *testing.T, id string) bool {
	t.Helper()
	var state string
	var attempted sql.NullString
	err := b.store.SQL().QueryRowContext(t.Context(),
		`SELECT state, attempted_at FROM river_job WHERE kind = ? AND json_extract(args, '$.task_id') = ? ORDER BY id DESC LIMIT 1`,
		RunArgs{}.Kind(), id).Scan(&state, &attempted)
	if err != nil {
		t.Fatalf("run job of %s: %v", id, err)
	}
	return attempted.Valid && (state == "available" || state == "scheduled")
}

// TestUnknownTargetWaits: a job whose platform model the planner has no
// target for is snoozed, within Config.TargetWait of the task's
// admission, rather than failed, and runs once the target is there; past
// the wait the task fails with no_candidate, as at once without one.
func TestUnknownTargetWaits(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Config: Config{TargetWait: time.Hour}})
	restore := b.planner.hideTarget("vid/a")
	tk := b.submit(t, s, nil)
	waitFor(t, "the job snoozed", func() bool {
		got := b.get(t, tk.ID)
		if got.Status.Terminal() {
			t.Fatalf("task %s (%s: %s) before its target was there; want it waiting", got.Status, got.ErrorCode, got.ErrorMessage)
		}
		if got.Status == weir.TaskQueued {
			return false
		}
		return b.runJobSnoozed(t, tk.ID)
	})
	restore()
	if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Errorf("task %s (%s: %s) once its target is there; want succeeded", got.Status, got.ErrorCode, got.ErrorMessage)
	}

	b.planner.hideTarget("vid/a")
	late := b.submit(t, s, nil)
	waitFor(t, "the job run", func() bool { return b.get(t, late.ID).Status != weir.TaskQueued })
	b.clock.Advance(2 * time.Hour)
	if got := b.driveTo(t, late.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskFailed || got.ErrorCode != "no_candidate" {
		t.Errorf("task %s (%s) past the wait for its target; want failed no_candidate", got.Status, got.ErrorCode)
	}
}
