package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// testTaskPurge: TaskPurge removes terminal tasks finished before the
// cutoff, oldest first and at most limit at a time, and nothing else; a
// purged task's idempotency key is free again.
func testTaskPurge(t *testing.T, s taskStore) {
	k, tasks := createIdempotentTasks(t, s, 6)
	finish := func(i int, st weir.TaskStatus, at time.Time) {
		t.Helper()
		if !update(t, s, tasks[i].ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: st, FinishedAt: at}) {
			t.Fatalf("finish %s", tasks[i].ID)
		}
	}
	cutoff := base.Add(24 * time.Hour)
	finish(0, weir.TaskSucceeded, base.Add(2*time.Hour)) // old: purged second
	finish(1, weir.TaskFailed, base.Add(time.Hour))      // oldest: purged first
	finish(2, weir.TaskCancelled, base.Add(3*time.Hour)) // old, then deleted: purged third
	if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: tasks[2].ID, At: base.Add(4 * time.Hour)}); !ok || err != nil {
		t.Fatalf("TaskDelete: %v %v", ok, err)
	}
	finish(3, weir.TaskExpired, cutoff.Add(time.Second)) // after the cutoff: kept
	if !update(t, s, tasks[4].ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskRunning}) {
		t.Fatal("task 4 to running")
	}
	// tasks[5] stays queued.

	if _, err := s.TaskPurge(t.Context(), &weir.TaskPurgeParams{FinishedBefore: time.Time{}, Limit: 10}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("TaskPurge with no time: %v, want ErrInvalid", err)
	}
	if _, err := s.TaskPurge(t.Context(), &weir.TaskPurgeParams{FinishedBefore: cutoff, Limit: 0}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("TaskPurge with limit 0: %v, want ErrInvalid", err)
	}
	for round, want := range []string{tasks[1].ID, tasks[0].ID, tasks[2].ID, ""} {
		n, err := s.TaskPurge(t.Context(), &weir.TaskPurgeParams{FinishedBefore: cutoff, Limit: 1})
		if err != nil {
			t.Fatalf("TaskPurge round %d: %v", round, err)
		}
		if want == "" {
			if n != 0 {
				t.Errorf("TaskPurge round %d removed %d, want 0: only tasks finished after the cutoff or not finished are left", round, n)
			}
			continue
		}
		if n != 1 {
			t.Fatalf("TaskPurge round %d removed %d, want 1", round, n)
		}
		if _, err := s.TaskGet(t.Context(), want); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("after round %d, TaskGet(%s) = %v; want it purged (oldest first)", round, want, err)
		}
	}
	for _, i := range []int{3, 4, 5} {
		if _, err := s.TaskGet(t.Context(), tasks[i].ID); err != nil {
			t.Errorf("task %s purged or lost: %v", tasks[i].ID, err)
		}
	}
	// The purged task's idempotency key names nothing now.
	again := newTask(10, k.ID)
	again.IdempotencyKey = tasks[1].IdempotencyKey
	if created, err := s.TaskCreate(t.Context(), &again); !created || err != nil {
		t.Errorf("TaskCreate with a purged task's idempotency key = %v, %v; want created", created, err)
	}
}
