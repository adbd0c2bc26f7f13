package task

import (
	"fmt"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// TestAdmissionBatchFailingHalfWay: a batch of admissions whose job
// insert fails at its third task commits nothing — every task is still
// queued, no job was inserted — and the same batch once the store takes
// it admits every task with one job each.
func TestAdmissionBatchFailingHalfWay(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{NoStart: true})
	ctx := t.Context()
	var batch []admittedTask
	for i := range 5 {
		id := fmt.Sprintf("task_batch_%d", i)
		if i == 2 {
			id = "task_batch_poison"
		}
		tk := weir.Task{ID: id, KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"x"}`),
			Status: weir.TaskQueued, Candidate: -1, CreatedAt: testStart}
		if _, err := b.store.TaskCreate(ctx, &tk); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, admittedTask{id: id, lease: admission.Lease{ID: admission.LeaseID(i + 1),
			Needs: []admission.Need{{Scope: weir.PlatformModelScope("vid/a"), Amount: 1}, {Scope: WorkersScope, Amount: 1}}}})
	}
	db := b.store.SQL()
	jobs := func() (n int) {
		t.Helper()
		if err := db.QueryRow(`SELECT count(*) FROM river_job WHERE kind = ?`, RunArgs{}.Kind()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := db.Exec(`CREATE TRIGGER refuse_job BEFORE INSERT ON river_job
		WHEN CAST(NEW.args AS TEXT) LIKE '%poison%' BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END`); err != nil {
		t.Fatal(err)
	}
	tm := s.term
	tm.sync.Lock()
	applied, errs, err := tm.apply(ctx, batch)
	tm.sync.Unlock()
	if err == nil {
		t.Fatal("the batch committed with its third job refused")
	}
	for i, a := range batch {
		if applied[i] || errs[i] == nil {
			t.Errorf("task %s: applied %v, error %v; want not applied, the batch's error", a.id, applied[i], errs[i])
		}
		if got := b.get(t, a.id); got.Status != weir.TaskQueued || got.PlatformModel != "" {
			t.Errorf("task %s after the failed batch: %s on %q; want queued on none", a.id, got.Status, got.PlatformModel)
		}
	}
	if n := jobs(); n != 0 {
		t.Errorf("%d jobs after the failed batch, want 0", n)
	}

	if _, err := db.Exec(`DROP TRIGGER refuse_job`); err != nil {
		t.Fatal(err)
	}
	tm.sync.Lock()
	applied, _, err = tm.apply(ctx, batch)
	tm.sync.Unlock()
	if err != nil {
		t.Fatalf("the batch again: %v", err)
	}
	for i, a := range batch {
		if got := b.get(t, a.id); !applied[i] || got.Status != weir.TaskAdmitted || got.PlatformModel != "vid/a" {
			t.Errorf("task %s: applied %v, %s on %q; want admitted on vid/a", a.id, applied[i], got.Status, got.PlatformModel)
		}
	}
	if n := jobs(); n != len(batch) {
		t.Errorf("%d jobs for a batch of %d", n, len(batch))
	}
}
