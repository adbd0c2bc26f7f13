package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

func testTaskUpdateCAS(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	task, other := newTask(1, k.ID), newTask(2, k.ID)
	createTasks(t, s, &task, &other)

	// Not in From: nothing changes.
	if update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskAdmitted, weir.TaskRunning},
		Status: weir.TaskSucceeded, Result: []byte(`{}`), Progress: ptr(100)}) {
		t.Errorf("TaskUpdate from admitted or running applied to a queued task")
	}
	checkTask(t, "after an update that did not apply", getTask(t, s, task.ID), task)

	// In From: applies, and reports it.
	admitted := base.Add(time.Minute)
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted,
		PlatformModel: "openai-main/sora-2", Candidate: ptr(1), AdmittedAt: admitted}) {
		t.Fatalf("TaskUpdate from queued did not apply to a queued task")
	}
	task.Status, task.PlatformModel, task.Candidate, task.AdmittedAt = weir.TaskAdmitted, "openai-main/sora-2", 1, admitted
	checkTask(t, "after admission", getTask(t, s, task.ID), task)

	// The same change again: the task has moved on.
	if update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted, Candidate: ptr(0)}) {
		t.Errorf("TaskUpdate from queued applied twice")
	}
	// Back to queued (a platform that stayed saturated) is allowed: only
	// terminal statuses are final.
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskAdmitted}, Status: weir.TaskQueued, Candidate: ptr(-1)}) {
		t.Fatalf("TaskUpdate from admitted back to queued did not apply")
	}
	task.Status, task.Candidate = weir.TaskQueued, -1
	checkTask(t, "after requeueing", getTask(t, s, task.ID), task)

	// Staying in a status to record progress.
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskRunning, UpstreamID: "up-1"}) ||
		!update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskRunning, Progress: ptr(40)}) {
		t.Fatalf("TaskUpdate to running, then of progress, did not apply")
	}
	task.Status, task.UpstreamID, task.Progress = weir.TaskRunning, "up-1", 40
	checkTask(t, "after progress", getTask(t, s, task.ID), task)
	checkTask(t, "the task not updated", getTask(t, s, other.ID), other)
}

func testTaskUpdateFields(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	task := newTask(1, k.ID)
	createTasks(t, s, &task)

	set := weir.TaskUpdate{
		From:          []weir.TaskStatus{weir.TaskQueued},
		Status:        weir.TaskRunning,
		PlatformModel: "openai-main/sora-2",
		Candidate:     ptr(2),
		Progress:      ptr(30),
		UpstreamID:    "up-9",
		Result:        []byte(`{"partial":true}`),
		ErrorCode:     "rate_limited",
		ErrorMessage:  "retrying",
		Attempts:      ptr(2),
		AdmittedAt:    base.Add(time.Minute),
		FinishedAt:    base.Add(2 * time.Minute),
	}
	if !update(t, s, task.ID, set) {
		t.Fatalf("TaskUpdate of every field did not apply")
	}
	task.Status, task.PlatformModel, task.Candidate, task.Progress = set.Status, set.PlatformModel, 2, 30
	task.UpstreamID, task.Result, task.ErrorCode, task.ErrorMessage = set.UpstreamID, set.Result, set.ErrorCode, set.ErrorMessage
	task.Attempts, task.AdmittedAt, task.FinishedAt = 2, set.AdmittedAt, set.FinishedAt
	checkTask(t, "after an update of every field", getTask(t, s, task.ID), task)

	// Zero fields are left as they are; Status is always set.
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskAdmitted}) {
		t.Fatalf("TaskUpdate of the status alone did not apply")
	}
	task.Status = weir.TaskAdmitted
	checkTask(t, "after an update of the status alone", getTask(t, s, task.ID), task)

	// A pointer to zero sets zero.
	if !update(t, s, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskAdmitted}, Status: weir.TaskAdmitted,
		Candidate: ptr(0), Progress: ptr(0), Attempts: ptr(0)}) {
		t.Fatalf("TaskUpdate to zeros did not apply")
	}
	task.Candidate, task.Progress, task.Attempts = 0, 0, 0
	checkTask(t, "after an update to zeros", getTask(t, s, task.ID), task)
}

func testTaskTerminal(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	everything := []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning}
	for i, final := range []weir.TaskStatus{weir.TaskSucceeded, weir.TaskFailed, weir.TaskCancelled, weir.TaskExpired} {
		task := newTask(i, k.ID)
		createTasks(t, s, &task)
		finished := base.Add(time.Hour)
		if !update(t, s, task.ID, weir.TaskUpdate{From: everything, Status: final, ErrorCode: string(final), FinishedAt: finished}) {
			t.Fatalf("TaskUpdate to %s did not apply", final)
		}
		task.Status, task.ErrorCode, task.FinishedAt = final, string(final), finished

		// From without the terminal status: the task has moved on.
		if update(t, s, task.ID, weir.TaskUpdate{From: everything, Status: weir.TaskQueued, Progress: ptr(5)}) {
			t.Errorf("a %s task was moved from a status it is not in", final)
		}
		// From naming it, back to an active status, to another terminal
		// one, or to itself with new fields: refused, never applied.
		for _, to := range []weir.TaskStatus{weir.TaskRunning, weir.TaskFailed, weir.TaskCancelled, final} {
			applied, err := s.TaskUpdate(t.Context(), &weir.TaskUpdateParams{ID: task.ID, Update: weir.TaskUpdate{
				From: append([]weir.TaskStatus{final}, everything...), Status: to,
				ErrorCode: "overwritten", Result: []byte(`{"overwritten":true}`),
			}})
			if applied || !errors.Is(err, weir.ErrInvalid) {
				t.Errorf("TaskUpdate of a %s task from %s to %s = %v, %v; want false, ErrInvalid", final, final, to, applied, err)
			}
		}
		checkTask(t, "a "+string(final)+" task after attempts to leave it", getTask(t, s, task.ID), task)
	}
}

// testTaskUpdateRace runs the dispatcher's and a cancel's compare-and-set
// at once, many times over: exactly one wins each task.
func testTaskUpdateRace(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	const tasks, racers = 10, 4
	for i := range tasks {
		task := newTask(i, k.ID)
		createTasks(t, s, &task)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			applied = make([]bool, racers)
			errs    = make([]error, racers)
		)
		for r := range racers {
			wg.Go(func() {
				u := weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted, Candidate: ptr(r)}
				if r%2 == 1 {
					u = weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted}, Status: weir.TaskCancelled, Candidate: ptr(r)}
				}
				<-start
				applied[r], errs[r] = s.TaskUpdate(t.Context(), &weir.TaskUpdateParams{ID: task.ID, Update: u})
			})
		}
		close(start)
		wg.Wait()
		var winners []int
		for r := range racers {
			if errs[r] != nil {
				t.Fatalf("task %d racer %d: TaskUpdate: %v", i, r, errs[r])
			}
			if applied[r] {
				winners = append(winners, r)
			}
		}
		got := getTask(t, s, task.ID)
		// A cancel may follow an admission (it allows From admitted);
		// nothing may follow a cancel, and two admissions never apply.
		switch {
		case len(winners) == 1 && winners[0]%2 == 0 && got.Status == weir.TaskAdmitted && got.Candidate == winners[0]:
		case len(winners) == 1 && winners[0]%2 == 1 && got.Status == weir.TaskCancelled && got.Candidate == winners[0]:
		case len(winners) == 2 && (winners[0]+winners[1])%2 == 1 && got.Status == weir.TaskCancelled &&
			got.Candidate%2 == 1 && (got.Candidate == winners[0] || got.Candidate == winners[1]):
		default:
			t.Errorf("task %d: racers %v applied, ending %s with candidate %d", i, winners, got.Status, got.Candidate)
		}
	}
}

func testTaskCancelled(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	task := newTask(1, k.ID)
	createTasks(t, s, &task)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	fresh := newTask(2, k.ID)
	if _, err := s.TaskCreate(ctx, &fresh); !errors.Is(err, context.Canceled) {
		t.Errorf("TaskCreate with a cancelled context: %v, want context.Canceled", err)
	}
	toCancelled := weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskCancelled}
	if _, err := s.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: task.ID, Update: toCancelled}); !errors.Is(err, context.Canceled) {
		t.Errorf("TaskUpdate with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.TaskGet(ctx, task.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("TaskGet with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.TaskList(ctx, weir.TaskFilter{}); !errors.Is(err, context.Canceled) {
		t.Errorf("TaskList with a cancelled context: %v, want context.Canceled", err)
	}
	checkList(t, "TaskList after cancelled calls", listTasks(t, s, weir.TaskFilter{}), task)
}
