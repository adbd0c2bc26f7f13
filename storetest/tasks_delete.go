package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// finishTask moves a queued task to a terminal status and returns it as
// stored.
func finishTask(t *testing.T, s taskStore, id string, to weir.TaskStatus) weir.Task {
	t.Helper()
	if !update(t, s, id, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: to, FinishedAt: base.Add(time.Hour)}) {
		t.Fatalf("TaskUpdate of %s to %s did not apply", id, to)
	}
	return getTask(t, s, id)
}

func testTaskDelete(t *testing.T, s taskStore) {
	k, tasks := createIdempotentTasks(t, s, 6)
	// A task that has not ended is not deleted.
	queued := tasks[0]
	if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: queued.ID, At: base}); ok || err != nil {
		t.Errorf("TaskDelete of a queued task = %v, %v; want false, nil", ok, err)
	}
	checkTask(t, "the queued task after a refused delete", getTask(t, s, queued.ID), queued)

	// Every terminal status can be deleted; a second delete changes
	// nothing.
	at := base.Add(2*time.Hour + 1500*time.Nanosecond)
	var deleted []weir.Task
	for i, st := range []weir.TaskStatus{weir.TaskSucceeded, weir.TaskFailed, weir.TaskCancelled, weir.TaskExpired} {
		task := finishTask(t, s, tasks[i+1].ID, st)
		if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: task.ID, At: at}); !ok || err != nil {
			t.Fatalf("TaskDelete of a %s task = %v, %v; want true", st, ok, err)
		}
		task.DeletedAt = at
		checkTask(t, "TaskGet of a deleted "+string(st)+" task", getTask(t, s, task.ID), task)
		if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: task.ID, At: at.Add(time.Hour)}); ok || err != nil {
			t.Errorf("a second TaskDelete of %s = %v, %v; want false, nil", task.ID, ok, err)
		}
		checkTask(t, "a task deleted twice", getTask(t, s, task.ID), task)
		deleted = append(deleted, task)
	}
	kept := finishTask(t, s, tasks[5].ID, weir.TaskSucceeded)

	// Listings leave deleted tasks out, whatever the filter.
	checkList(t, "TaskList", listTasks(t, s, weir.TaskFilter{}), queued, kept)
	checkList(t, "TaskList of the key", listTasks(t, s, weir.TaskFilter{KeyID: k.ID, Limit: 10}), queued, kept)
	checkList(t, "TaskList of succeeded", listTasks(t, s, weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskSucceeded}}), kept)

	// A deleted task is never updated, and its idempotency key stays
	// taken: a repeat gets the deleted task back.
	if update(t, s, deleted[0].ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued, weir.TaskRunning}, Status: weir.TaskRunning}) {
		t.Errorf("TaskUpdate of a deleted task applied")
	}
	again := newTask(9, k.ID)
	again.IdempotencyKey = deleted[0].IdempotencyKey
	if created, err := s.TaskCreate(t.Context(), &again); created || err != nil {
		t.Fatalf("TaskCreate reusing a deleted task's idempotency key = %v, %v; want not created", created, err)
	}
	checkTask(t, "the task returned for a deleted task's idempotency key", again, deleted[0])

	if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: "video_nope", At: at}); ok || !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("TaskDelete of an unknown task = %v, %v; want false, ErrNotFound", ok, err)
	}
	if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: kept.ID, At: time.Time{}}); ok || !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("TaskDelete with a zero time = %v, %v; want false, ErrInvalid", ok, err)
	}
	checkTask(t, "the task after a refused delete", getTask(t, s, kept.ID), kept)
}

// testTaskDeleteRace: of concurrent deletes of one task exactly one
// reports true.
func testTaskDeleteRace(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	task := newTask(1, k.ID)
	createTasks(t, s, &task)
	finishTask(t, s, task.ID, weir.TaskSucceeded)
	const racers = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		deleted = make([]bool, racers)
		errs    = make([]error, racers)
	)
	for i := range racers {
		wg.Go(func() {
			<-start
			deleted[i], errs[i] = s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: task.ID, At: base.Add(time.Duration(i+1) * time.Minute)})
		})
	}
	close(start)
	wg.Wait()
	winner := onlyWinner(t, "racer", "deleted the task", deleted, errs)
	if got := getTask(t, s, task.ID); !got.DeletedAt.Equal(stored(base.Add(time.Duration(winner+1) * time.Minute))) {
		t.Errorf("DeletedAt %v, want the winner's (racer %d)", got.DeletedAt, winner)
	}
}
