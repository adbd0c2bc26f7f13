package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// taskStore is what ExerciseTasks runs against: tasks need keys.
type taskStore = interface {
	weir.Store
	weir.TaskStore
}

// ExerciseTasks runs the TaskStore contract as numbered subtests, in
// parallel, each on a new, empty store from newStore, which it closes when
// the subtest ends. The contract, beyond the comments on weir.TaskStore, is
// in the package documentation.
func ExerciseTasks(t *testing.T, newStore func(t *testing.T) interface {
	weir.Store
	weir.TaskStore
}) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s taskStore)
	}{
		{"01_TaskCreateThenGet", testTaskCreateGet},
		{"02_TaskSeqIsSubmissionOrder", testTaskSeq},
		{"03_TaskIdempotencyKey", testTaskIdempotency},
		{"04_TaskIdempotencyRace", testTaskIdempotencyRace},
		{"05_TaskListFilters", testTaskListFilters},
		{"06_TaskListPages", testTaskListPages},
		{"07_TaskUpdateIsCompareAndSet", testTaskUpdateCAS},
		{"08_TaskUpdateLeavesZeroFields", testTaskUpdateFields},
		{"09_TaskTerminalIsNeverLeft", testTaskTerminal},
		{"10_TaskUnknownIsNotFound", testTaskNotFound},
		{"11_TaskInvalidIsRejected", testTaskInvalid},
		{"12_TaskUpdateRace", testTaskUpdateRace},
		{"13_TaskCancelledContext", testTaskCancelled},
		{"14_TaskFingerprint", testTaskFingerprint},
		{"15_TaskFingerprintRace", testTaskFingerprintRace},
		{"16_TaskDelete", testTaskDelete},
		{"17_TaskDeleteRace", testTaskDeleteRace},
		{"18_TaskListKindAndOrder", testTaskListKindOrder},
		{"19_TaskCallbackEvents", testTaskCallbackEvents},
		{"20_TaskPurge", testTaskPurge},
		{"21_TaskClearUpstream", testTaskClearUpstream},
		{"22_TaskCallbackGone", testTaskCallbackGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.run(t, s)
		})
	}
}

// newTask is a queued task of key keyID, with what a submission sets.
func newTask(i int, keyID string) weir.Task {
	return weir.Task{
		ID:          fmt.Sprintf("video_%05d", i),
		KeyID:       keyID,
		Kind:        "video",
		Model:       "sora-2",
		Input:       []byte(fmt.Sprintf(`{"prompt":"a cat, take %d","seconds":"8"}`, i)),
		Priority:    int32(i % 3),
		Status:      weir.TaskQueued,
		Candidate:   -1,
		CallbackURL: "https://hooks.example.com/weir",
		Fingerprint: fmt.Sprintf("%064x", i),
		CreatedAt:   base.Add(time.Duration(i) * time.Second),
		Deadline:    base.Add(time.Hour + time.Duration(i)*time.Second),
	}
}

// createTasks stores tasks in order, failing the test on an error or a
// task not created; it sets their Seq.
func createTasks(t *testing.T, s taskStore, tasks ...*weir.Task) {
	t.Helper()
	for _, task := range tasks {
		created, err := s.TaskCreate(t.Context(), task)
		if err != nil || !created {
			t.Fatalf("TaskCreate(%s) = %v, %v; want created", task.ID, created, err)
		}
	}
}

// pageAll lists every page of f (f.Limit tasks each, at most maxPages+1
// pages), moving the cursor with next from the last task of each page.
func pageAll(t *testing.T, s taskStore, f weir.TaskFilter, maxPages int, next func(*weir.TaskFilter, int64)) []weir.Task {
	t.Helper()
	var all []weir.Task
	for pages := 0; ; pages++ {
		if pages > maxPages {
			t.Fatalf("still paging after %d pages: %v", pages, taskIDs(all))
		}
		page := listTasks(t, s, f)
		if len(page) > f.Limit {
			t.Fatalf("page of %d tasks, limit %d", len(page), f.Limit)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		next(&f, page[len(page)-1].Seq)
	}
}

// onlyWinner checks that of racers that all succeeded, exactly one did
// what won (won[i]), and returns which.
func onlyWinner(t *testing.T, who, what string, won []bool, errs []error) int {
	t.Helper()
	winner := -1
	for i := range won {
		if errs[i] != nil {
			t.Fatalf("%s %d: %v", who, i, errs[i])
		}
		if won[i] {
			if winner >= 0 {
				t.Fatalf("%ss %d and %d both %s", who, winner, i, what)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no %s %s", who, what)
	}
	return winner
}

// createIdempotentTasks stores n tasks of a new key, each with its own
// idempotency key, and returns them.
func createIdempotentTasks(t *testing.T, s taskStore, n int) (weir.APIKey, []weir.Task) {
	t.Helper()
	k := newKey(1)
	mustCreate(t, s, k)
	tasks := make([]weir.Task, 0, n)
	for i := range n {
		task := newTask(i, k.ID)
		task.IdempotencyKey = fmt.Sprintf("idem-%d", i)
		createTasks(t, s, &task)
		tasks = append(tasks, task)
	}
	return k, tasks
}

func getTask(t *testing.T, s taskStore, id string) weir.Task {
	t.Helper()
	got, err := s.TaskGet(t.Context(), id)
	if err != nil {
		t.Fatalf("TaskGet(%s): %v", id, err)
	}
	return got
}

// checkTask compares a task read back with the one written: times in UTC
// to the microsecond, and an empty Input or Result the same as none.
func checkTask(t *testing.T, what string, got, written weir.Task) {
	t.Helper()
	want := written
	for _, p := range []*time.Time{&want.CreatedAt, &want.AdmittedAt, &want.FinishedAt, &want.Deadline, &want.DeletedAt, &want.CallbackGoneAt} {
		*p = stored(*p)
	}
	for _, tm := range []time.Time{got.CreatedAt, got.AdmittedAt, got.FinishedAt, got.Deadline, got.DeletedAt, got.CallbackGoneAt} {
		if !tm.IsZero() && tm.Location() != time.UTC {
			t.Errorf("%s: time %v not in UTC", what, tm)
		}
	}
	same := got.ID == want.ID && got.KeyID == want.KeyID && got.Kind == want.Kind && got.Model == want.Model &&
		bytes.Equal(got.Input, want.Input) && got.Priority == want.Priority && got.Seq == want.Seq &&
		got.Status == want.Status && got.PlatformModel == want.PlatformModel && got.Candidate == want.Candidate &&
		got.Progress == want.Progress && got.UpstreamID == want.UpstreamID && bytes.Equal(got.Result, want.Result) &&
		got.ErrorCode == want.ErrorCode && got.ErrorMessage == want.ErrorMessage && got.CallbackURL == want.CallbackURL &&
		got.IdempotencyKey == want.IdempotencyKey && got.Fingerprint == want.Fingerprint && got.Attempts == want.Attempts &&
		slices.Equal(got.CallbackEvents, want.CallbackEvents) &&
		got.CreatedAt.Equal(want.CreatedAt) && got.AdmittedAt.Equal(want.AdmittedAt) &&
		got.FinishedAt.Equal(want.FinishedAt) && got.Deadline.Equal(want.Deadline) && got.DeletedAt.Equal(want.DeletedAt) &&
		got.CallbackGoneAt.Equal(want.CallbackGoneAt)
	if !same {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func taskIDs(tasks []weir.Task) []string {
	ids := make([]string, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
	}
	return ids
}

func listTasks(t *testing.T, s taskStore, f weir.TaskFilter) []weir.Task {
	t.Helper()
	got, err := s.TaskList(t.Context(), f)
	if err != nil {
		t.Fatalf("TaskList(%+v): %v", f, err)
	}
	return got
}

// checkList compares a listing with the tasks expected, in order.
func checkList(t *testing.T, what string, got []weir.Task, want ...weir.Task) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d tasks %v, want %d: %v", what, len(got), taskIDs(got), len(want), taskIDs(want))
	}
	for i := range got {
		checkTask(t, fmt.Sprintf("%s[%d]", what, i), got[i], want[i])
	}
}

func update(t *testing.T, s taskStore, id string, u weir.TaskUpdate) bool {
	t.Helper()
	applied, err := s.TaskUpdate(t.Context(), id, u)
	if err != nil {
		t.Fatalf("TaskUpdate(%s, %+v): %v", id, u, err)
	}
	return applied
}

func ptr[T any](v T) *T { return &v }

func testTaskCreateGet(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)

	// Every field set, as a task that has run and succeeded would have
	// them (a store keeps what it is given; the service decides).
	full := newTask(1, k.ID)
	full.Priority = -7
	full.Status = weir.TaskSucceeded
	full.PlatformModel = "openai-main/sora-2"
	full.Candidate = 2
	full.Progress = 100
	full.UpstreamID = "video_up_123"
	full.Result = []byte(`{"id":"video_up_123","status":"completed"}`)
	full.ErrorCode = "none"
	full.ErrorMessage = "not an error, but it must come back"
	full.IdempotencyKey = "idem-1"
	full.CallbackEvents = []weir.TaskEvent{weir.TaskEventProgress}
	full.Attempts = 3
	full.AdmittedAt = base.Add(time.Minute)
	full.FinishedAt = base.Add(time.Minute + 1500*time.Nanosecond) // the microsecond stays
	full.Seq = 999                                                 // the store's to set

	// Only what is required: every optional field comes back zero.
	bare := weir.Task{ID: "task_bare", KeyID: k.ID, Kind: "task", Model: "m", Status: weir.TaskQueued, CreatedAt: base}

	createTasks(t, s, &full, &bare)
	if full.Seq == 999 || full.Seq <= 0 || bare.Seq <= 0 {
		t.Errorf("Seq after TaskCreate: %d and %d, want set by the store, positive", full.Seq, bare.Seq)
	}
	checkTask(t, "TaskGet of a task with every field", getTask(t, s, full.ID), full)
	checkTask(t, "TaskGet of a bare task", getTask(t, s, bare.ID), bare)
}

func testTaskSeq(t *testing.T, s taskStore) {
	k1, k2 := newKey(1), newKey(2)
	mustCreate(t, s, k1, k2)
	// Submission order decides, not ID, time, priority or key.
	var tasks []weir.Task
	for i, id := range []string{"video_c", "video_a", "video_d", "video_b", "video_e"} {
		task := newTask(10-i, []string{k1.ID, k2.ID}[i%2])
		task.ID = id
		task.Priority = int32(i)
		createTasks(t, s, &task)
		if len(tasks) > 0 && task.Seq <= tasks[len(tasks)-1].Seq {
			t.Errorf("task %s got Seq %d after %s's %d", task.ID, task.Seq, tasks[len(tasks)-1].ID, tasks[len(tasks)-1].Seq)
		}
		tasks = append(tasks, task)
	}
	checkList(t, "TaskList", listTasks(t, s, weir.TaskFilter{}), tasks...)
	for _, task := range tasks {
		if got := getTask(t, s, task.ID); got.Seq != task.Seq {
			t.Errorf("TaskGet(%s).Seq = %d, TaskCreate set %d", task.ID, got.Seq, task.Seq)
		}
	}
}

func testTaskIdempotency(t *testing.T, s taskStore) {
	k1, k2 := newKey(1), newKey(2)
	mustCreate(t, s, k1, k2)
	first := newTask(1, k1.ID)
	first.IdempotencyKey = "order-42"
	createTasks(t, s, &first)
	// The first task moves on: a repeat returns it as it is now.
	if !update(t, s, first.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted, Candidate: ptr(0)}) {
		t.Fatalf("TaskUpdate of the first task did not apply")
	}
	first = getTask(t, s, first.ID)

	// The same key and idempotency key, a different task: not created,
	// and the stored one comes back in its place.
	again := newTask(2, k1.ID)
	again.IdempotencyKey = first.IdempotencyKey
	again.Model = "another-model"
	created, err := s.TaskCreate(t.Context(), &again)
	if err != nil || created {
		t.Fatalf("TaskCreate of a repeated submission = %v, %v; want not created", created, err)
	}
	checkTask(t, "the repeated submission", again, first)
	if _, err := s.TaskGet(t.Context(), newTask(2, k1.ID).ID); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("the repeated submission was stored under its own id: %v", err)
	}

	// Another key's idempotency keys are its own.
	other := newTask(3, k2.ID)
	other.IdempotencyKey = first.IdempotencyKey
	// No idempotency key: every submission is new.
	plain1, plain2 := newTask(4, k1.ID), newTask(5, k1.ID)
	// A different idempotency key of the same API key.
	next := newTask(6, k1.ID)
	next.IdempotencyKey = "order-43"
	createTasks(t, s, &other, &plain1, &plain2, &next)
	checkList(t, "TaskList", listTasks(t, s, weir.TaskFilter{}), first, other, plain1, plain2, next)
}

func testTaskIdempotencyRace(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	const submitters = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]weir.Task, submitters)
		created = make([]bool, submitters)
		errs    = make([]error, submitters)
	)
	for i := range submitters {
		wg.Go(func() {
			task := newTask(i, k.ID)
			task.IdempotencyKey = "retried-by-the-client"
			<-start
			created[i], errs[i] = s.TaskCreate(t.Context(), &task)
			results[i] = task
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i := range submitters {
		if errs[i] != nil {
			t.Fatalf("submitter %d: TaskCreate: %v", i, errs[i])
		}
		if created[i] {
			if winner >= 0 {
				t.Fatalf("submitters %d and %d both created a task (%s, %s)", winner, i, results[winner].ID, results[i].ID)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no submitter created the task")
	}
	stored := getTask(t, s, results[winner].ID)
	for i := range submitters {
		if i != winner {
			checkTask(t, fmt.Sprintf("submitter %d's task", i), results[i], stored)
		}
	}
	checkList(t, "TaskList", listTasks(t, s, weir.TaskFilter{}), stored)
}

// fillForListing stores 12 tasks of two keys, in statuses cycling through
// queued, admitted, running and succeeded, and returns them in order.
func fillForListing(t *testing.T, s taskStore) (a, b weir.APIKey, tasks []weir.Task) {
	t.Helper()
	a, b = newKey(1), newKey(2)
	mustCreate(t, s, a, b)
	statuses := []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning, weir.TaskSucceeded}
	for i := range 12 {
		task := newTask(i, []string{a.ID, b.ID}[i%2])
		createTasks(t, s, &task)
		path := statuses[:i%len(statuses)+1]
		for j := 1; j < len(path); j++ {
			if !update(t, s, task.ID, weir.TaskUpdate{From: path[j-1 : j], Status: path[j]}) {
				t.Fatalf("TaskUpdate of %s from %s to %s did not apply", task.ID, path[j-1], path[j])
			}
		}
		task.Status = path[len(path)-1]
		tasks = append(tasks, task)
	}
	return a, b, tasks
}

func pick(tasks []weir.Task, keep func(weir.Task) bool) []weir.Task {
	var out []weir.Task
	for _, task := range tasks {
		if keep(task) {
			out = append(out, task)
		}
	}
	return out
}

func testTaskListFilters(t *testing.T, s taskStore) {
	if got := listTasks(t, s, weir.TaskFilter{}); len(got) != 0 {
		t.Fatalf("TaskList of an empty store: %v", taskIDs(got))
	}
	a, b, tasks := fillForListing(t, s)
	in := func(statuses ...weir.TaskStatus) func(weir.Task) bool {
		return func(task weir.Task) bool {
			for _, st := range statuses {
				if task.Status == st {
					return true
				}
			}
			return false
		}
	}
	active := []weir.TaskStatus{weir.TaskAdmitted, weir.TaskRunning}
	for _, tc := range []struct {
		name string
		f    weir.TaskFilter
		want []weir.Task
	}{
		{"all", weir.TaskFilter{}, tasks},
		{"key", weir.TaskFilter{KeyID: b.ID}, pick(tasks, func(task weir.Task) bool { return task.KeyID == b.ID })},
		{"one status", weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued}}, pick(tasks, in(weir.TaskQueued))},
		{"two statuses", weir.TaskFilter{Statuses: active}, pick(tasks, in(active...))},
		{"key and status", weir.TaskFilter{KeyID: a.ID, Statuses: []weir.TaskStatus{weir.TaskRunning}},
			pick(tasks, func(task weir.Task) bool { return task.KeyID == a.ID && task.Status == weir.TaskRunning })},
		{"after seq", weir.TaskFilter{AfterSeq: tasks[8].Seq}, tasks[9:]},
		{"limit", weir.TaskFilter{Limit: 5}, tasks[:5]},
		{"limit above the count", weir.TaskFilter{Limit: 1000}, tasks},
		{"statuses, after seq and limit", weir.TaskFilter{Statuses: active, AfterSeq: tasks[2].Seq, Limit: 3},
			pick(tasks[3:], in(active...))[:3]},
		{"unknown key", weir.TaskFilter{KeyID: "key-nope"}, nil},
		{"a status no task is in", weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskExpired}}, nil},
		{"after the last", weir.TaskFilter{AfterSeq: tasks[len(tasks)-1].Seq}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkList(t, "TaskList", listTasks(t, s, tc.f), tc.want...)
		})
	}
	for _, f := range []weir.TaskFilter{
		{Limit: -1},
		{Statuses: []weir.TaskStatus{"paused"}},
		{Statuses: []weir.TaskStatus{weir.TaskQueued, ""}},
		{BeforeSeq: -1},
	} {
		if _, err := s.TaskList(t.Context(), f); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("TaskList(%+v): %v, want ErrInvalid", f, err)
		}
	}
}

func testTaskListPages(t *testing.T, s taskStore) {
	_, b, tasks := fillForListing(t, s)
	for _, tc := range []struct {
		name string
		f    weir.TaskFilter
		want []weir.Task
	}{
		{"all", weir.TaskFilter{}, tasks},
		{"key", weir.TaskFilter{KeyID: b.ID}, pick(tasks, func(task weir.Task) bool { return task.KeyID == b.ID })},
		{"queued", weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued}},
			pick(tasks, func(task weir.Task) bool { return task.Status == weir.TaskQueued })},
	} {
		for _, size := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("%s by %d", tc.name, size), func(t *testing.T) {
				f := tc.f
				f.Limit = size
				all := pageAll(t, s, f, len(tasks), func(f *weir.TaskFilter, seq int64) { f.AfterSeq = seq })
				checkList(t, "the pages", all, tc.want...)
			})
		}
	}
}

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
			applied, err := s.TaskUpdate(t.Context(), task.ID, weir.TaskUpdate{
				From: append([]weir.TaskStatus{final}, everything...), Status: to,
				ErrorCode: "overwritten", Result: []byte(`{"overwritten":true}`),
			})
			if applied || !errors.Is(err, weir.ErrInvalid) {
				t.Errorf("TaskUpdate of a %s task from %s to %s = %v, %v; want false, ErrInvalid", final, final, to, applied, err)
			}
		}
		checkTask(t, "a "+string(final)+" task after attempts to leave it", getTask(t, s, task.ID), task)
	}
}

func testTaskNotFound(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	task := newTask(1, k.ID)
	createTasks(t, s, &task)
	for _, id := range []string{"video_nope", ""} {
		if _, err := s.TaskGet(t.Context(), id); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("TaskGet(%q): %v, want ErrNotFound", id, err)
		}
		applied, err := s.TaskUpdate(t.Context(), id, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskCancelled})
		if applied || !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("TaskUpdate(%q) = %v, %v; want false, ErrNotFound", id, applied, err)
		}
	}
	checkTask(t, "the stored task", getTask(t, s, task.ID), task)
}

func testTaskInvalid(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	kept := newTask(0, k.ID)
	createTasks(t, s, &kept)

	for _, tc := range []struct {
		name   string
		change func(task *weir.Task)
	}{
		{"no id", func(task *weir.Task) { task.ID = "" }},
		{"no key id", func(task *weir.Task) { task.KeyID = "" }},
		{"an unknown key", func(task *weir.Task) { task.KeyID = "key-nope" }},
		{"no kind", func(task *weir.Task) { task.Kind = "" }},
		{"no model", func(task *weir.Task) { task.Model = "" }},
		{"no status", func(task *weir.Task) { task.Status = "" }},
		{"an unknown status", func(task *weir.Task) { task.Status = "paused" }},
		{"no creation time", func(task *weir.Task) { task.CreatedAt = time.Time{} }},
		{"negative attempts", func(task *weir.Task) { task.Attempts = -1 }},
		{"a deletion time", func(task *weir.Task) { task.DeletedAt = base }},
		{"a callback already gone", func(task *weir.Task) { task.CallbackGoneAt = base }},
		{"an unknown callback event", func(task *weir.Task) {
			task.CallbackEvents = []weir.TaskEvent{weir.TaskEventProgress, "everything"}
		}},
	} {
		task := newTask(1, k.ID)
		tc.change(&task)
		if created, err := s.TaskCreate(t.Context(), &task); created || !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("TaskCreate with %s = %v, %v; want false, ErrInvalid", tc.name, created, err)
		}
	}
	taken := newTask(1, k.ID)
	taken.ID = kept.ID
	taken.IdempotencyKey = "fresh"
	if created, err := s.TaskCreate(t.Context(), &taken); created || !errors.Is(err, weir.ErrConflict) {
		t.Errorf("TaskCreate with a taken id = %v, %v; want false, ErrConflict", created, err)
	}
	checkList(t, "TaskList after refused creations", listTasks(t, s, weir.TaskFilter{}), kept)

	for _, tc := range []struct {
		name string
		u    weir.TaskUpdate
	}{
		{"no From", weir.TaskUpdate{Status: weir.TaskAdmitted}},
		{"an unknown From", weir.TaskUpdate{From: []weir.TaskStatus{"paused"}, Status: weir.TaskAdmitted}},
		{"no status", weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}}},
		{"an unknown status", weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: "paused"}},
		{"negative attempts", weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskQueued, Attempts: ptr(-1)}},
	} {
		if applied, err := s.TaskUpdate(t.Context(), kept.ID, tc.u); applied || !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("TaskUpdate with %s = %v, %v; want false, ErrInvalid", tc.name, applied, err)
		}
	}
	checkTask(t, "the task after refused updates", getTask(t, s, kept.ID), kept)
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
				applied[r], errs[r] = s.TaskUpdate(t.Context(), task.ID, u)
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
	if _, err := s.TaskUpdate(ctx, task.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskCancelled}); !errors.Is(err, context.Canceled) {
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

// testTaskFingerprint: the stored task that a repeated submission gets
// back carries the first request's fingerprint, whatever the repeat's;
// a task stored without a fingerprint comes back without one.
func testTaskFingerprint(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	first := newTask(1, k.ID)
	first.IdempotencyKey = "order-1"
	legacy := newTask(2, k.ID)
	legacy.IdempotencyKey = "order-2"
	legacy.Fingerprint = ""
	createTasks(t, s, &first, &legacy)
	checkTask(t, "TaskGet of a task with a fingerprint", getTask(t, s, first.ID), first)
	checkTask(t, "TaskGet of a task without one", getTask(t, s, legacy.ID), legacy)

	for _, prev := range []weir.Task{first, legacy} {
		again := newTask(3, k.ID)
		again.IdempotencyKey = prev.IdempotencyKey
		again.Fingerprint = fmt.Sprintf("%064x", 99)
		created, err := s.TaskCreate(t.Context(), &again)
		if err != nil || created {
			t.Fatalf("TaskCreate reusing %s = %v, %v; want not created", prev.IdempotencyKey, created, err)
		}
		if again.Fingerprint != prev.Fingerprint {
			t.Errorf("TaskCreate reusing %s returned fingerprint %q, want the stored %q", prev.IdempotencyKey, again.Fingerprint, prev.Fingerprint)
		}
		checkTask(t, "the task returned for "+prev.IdempotencyKey, again, prev)
	}
	checkList(t, "TaskList", listTasks(t, s, weir.TaskFilter{}), first, legacy)
}

// testTaskFingerprintRace: submitters with one idempotency key and
// different fingerprints race; one creates, and every other gets the
// winner's task with the winner's fingerprint back, so that each can
// tell it lost to another request.
func testTaskFingerprintRace(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	const submitters = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]weir.Task, submitters)
		created = make([]bool, submitters)
		errs    = make([]error, submitters)
	)
	for i := range submitters {
		wg.Go(func() {
			task := newTask(i, k.ID) // each its own fingerprint
			task.IdempotencyKey = "reused"
			<-start
			created[i], errs[i] = s.TaskCreate(t.Context(), &task)
			results[i] = task
		})
	}
	close(start)
	wg.Wait()
	winner := onlyWinner(t, "submitter", "created the task", created, errs)
	want := newTask(winner, k.ID).Fingerprint
	for i := range submitters {
		if results[i].Fingerprint != want || results[i].ID != results[winner].ID {
			t.Errorf("submitter %d got task %s with fingerprint %q, want the winner's %s with %q",
				i, results[i].ID, results[i].Fingerprint, results[winner].ID, want)
		}
	}
	checkList(t, "TaskList", listTasks(t, s, weir.TaskFilter{}), getTask(t, s, results[winner].ID))
}

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
	if ok, err := s.TaskDelete(t.Context(), queued.ID, base); ok || err != nil {
		t.Errorf("TaskDelete of a queued task = %v, %v; want false, nil", ok, err)
	}
	checkTask(t, "the queued task after a refused delete", getTask(t, s, queued.ID), queued)

	// Every terminal status can be deleted; a second delete changes
	// nothing.
	at := base.Add(2*time.Hour + 1500*time.Nanosecond)
	var deleted []weir.Task
	for i, st := range []weir.TaskStatus{weir.TaskSucceeded, weir.TaskFailed, weir.TaskCancelled, weir.TaskExpired} {
		task := finishTask(t, s, tasks[i+1].ID, st)
		if ok, err := s.TaskDelete(t.Context(), task.ID, at); !ok || err != nil {
			t.Fatalf("TaskDelete of a %s task = %v, %v; want true", st, ok, err)
		}
		task.DeletedAt = at
		checkTask(t, "TaskGet of a deleted "+string(st)+" task", getTask(t, s, task.ID), task)
		if ok, err := s.TaskDelete(t.Context(), task.ID, at.Add(time.Hour)); ok || err != nil {
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

	if ok, err := s.TaskDelete(t.Context(), "video_nope", at); ok || !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("TaskDelete of an unknown task = %v, %v; want false, ErrNotFound", ok, err)
	}
	if ok, err := s.TaskDelete(t.Context(), kept.ID, time.Time{}); ok || !errors.Is(err, weir.ErrInvalid) {
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
			deleted[i], errs[i] = s.TaskDelete(t.Context(), task.ID, base.Add(time.Duration(i+1)*time.Minute))
		})
	}
	close(start)
	wg.Wait()
	winner := onlyWinner(t, "racer", "deleted the task", deleted, errs)
	if got := getTask(t, s, task.ID); !got.DeletedAt.Equal(stored(base.Add(time.Duration(winner+1) * time.Minute))) {
		t.Errorf("DeletedAt %v, want the winner's (racer %d)", got.DeletedAt, winner)
	}
}

// testTaskListKindOrder: listings of one kind of task, newest first,
// and bounded by BeforeSeq, alone and together with the other filters;
// paging newest first by BeforeSeq lists every task once.
func testTaskListKindOrder(t *testing.T, s taskStore) {
	a, b := newKey(1), newKey(2)
	mustCreate(t, s, a, b)
	var tasks []weir.Task
	for i := range 12 {
		task := newTask(i, []string{a.ID, b.ID}[i%2])
		if i%3 == 0 {
			task.ID, task.Kind = fmt.Sprintf("task_%05d", i), "task"
		}
		createTasks(t, s, &task)
		tasks = append(tasks, task)
	}
	// A deleted video of key a: never listed.
	gone := newTask(99, a.ID)
	createTasks(t, s, &gone)
	finishTask(t, s, gone.ID, weir.TaskCancelled)
	if ok, err := s.TaskDelete(t.Context(), gone.ID, base.Add(2*time.Hour)); !ok || err != nil {
		t.Fatalf("TaskDelete(%s) = %v, %v", gone.ID, ok, err)
	}
	reversed := func(ts []weir.Task) []weir.Task {
		out := slices.Clone(ts)
		slices.Reverse(out)
		return out
	}
	videosOfA := pick(tasks, func(task weir.Task) bool { return task.KeyID == a.ID && task.Kind == "video" })
	for _, tc := range []struct {
		name string
		f    weir.TaskFilter
		want []weir.Task
	}{
		{"kind", weir.TaskFilter{Kind: "task"}, pick(tasks, func(task weir.Task) bool { return task.Kind == "task" })},
		{"key and kind", weir.TaskFilter{KeyID: a.ID, Kind: "video"}, videosOfA},
		{"an unknown kind", weir.TaskFilter{Kind: "image"}, nil},
		{"descending", weir.TaskFilter{Descending: true}, reversed(tasks)},
		{"descending, limit", weir.TaskFilter{Descending: true, Limit: 4}, reversed(tasks)[:4]},
		{"before seq", weir.TaskFilter{BeforeSeq: tasks[3].Seq}, tasks[:3]},
		{"after and before seq", weir.TaskFilter{AfterSeq: tasks[2].Seq, BeforeSeq: tasks[6].Seq}, tasks[3:6]},
		{"descending before seq", weir.TaskFilter{Descending: true, BeforeSeq: tasks[5].Seq, Limit: 2}, []weir.Task{tasks[4], tasks[3]}},
		{"key, kind, descending", weir.TaskFilter{KeyID: a.ID, Kind: "video", Descending: true}, reversed(videosOfA)},
		{"before the first", weir.TaskFilter{BeforeSeq: tasks[0].Seq}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkList(t, "TaskList", listTasks(t, s, tc.f), tc.want...)
		})
	}
	for _, size := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("newest first by %d", size), func(t *testing.T) {
			f := weir.TaskFilter{KeyID: a.ID, Kind: "video", Descending: true, Limit: size}
			all := pageAll(t, s, f, len(tasks), func(f *weir.TaskFilter, seq int64) { f.BeforeSeq = seq })
			checkList(t, "the pages", all, reversed(videosOfA)...)
		})
	}
}

// testTaskCallbackEvents: the events a task asked for come back as
// written, from TaskGet, TaskList and a repeat of its idempotency key;
// none comes back as none.
func testTaskCallbackEvents(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	progress := newTask(1, k.ID)
	progress.CallbackEvents = []weir.TaskEvent{weir.TaskEventProgress}
	progress.IdempotencyKey = "with-events"
	terminalOnly := newTask(2, k.ID)
	emptied := newTask(3, k.ID)
	emptied.CallbackEvents = []weir.TaskEvent{}
	createTasks(t, s, &progress, &terminalOnly, &emptied)
	emptied.CallbackEvents = nil // an empty list is stored as none
	checkTask(t, "TaskGet of a task asking for progress", getTask(t, s, progress.ID), progress)
	checkTask(t, "TaskGet of a task asking for no events", getTask(t, s, terminalOnly.ID), terminalOnly)
	checkTask(t, "TaskGet of a task with an empty list", getTask(t, s, emptied.ID), emptied)
	if got := getTask(t, s, progress.ID); !got.WantsEvent(weir.TaskEventProgress) {
		t.Errorf("WantsEvent(progress) of %+v: false", got)
	}
	if got := getTask(t, s, terminalOnly.ID); got.WantsEvent(weir.TaskEventProgress) {
		t.Errorf("WantsEvent(progress) of a task without events: true")
	}
	checkList(t, "TaskList", listTasks(t, s, weir.TaskFilter{}), progress, terminalOnly, emptied)
	again := newTask(4, k.ID)
	again.IdempotencyKey = progress.IdempotencyKey
	if created, err := s.TaskCreate(t.Context(), &again); created || err != nil {
		t.Fatalf("TaskCreate repeating an idempotency key = %v, %v", created, err)
	}
	checkTask(t, "the task returned for a repeat", again, progress)
	// Progress updates keep the events.
	if !update(t, s, progress.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskRunning, Progress: ptr(30)}) {
		t.Fatal("TaskUpdate did not apply")
	}
	if got := getTask(t, s, progress.ID); !slices.Equal(got.CallbackEvents, progress.CallbackEvents) {
		t.Errorf("callback events after an update: %v, want %v", got.CallbackEvents, progress.CallbackEvents)
	}
}

// testTaskCallbackGone: a callback's 410 is recorded once, on a task of
// any status, deleted or not, and other updates keep it.
func testTaskCallbackGone(t *testing.T, s taskStore) {
	_, tasks := createIdempotentTasks(t, s, 3)
	running, finished, deleted := tasks[0], tasks[1], tasks[2]
	if !update(t, s, running.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskRunning}) {
		t.Fatal("task 0 to running")
	}
	running = getTask(t, s, running.ID)
	finished = finishTask(t, s, finished.ID, weir.TaskSucceeded)
	deleted = finishTask(t, s, deleted.ID, weir.TaskFailed)
	if ok, err := s.TaskDelete(t.Context(), deleted.ID, base.Add(2*time.Hour)); !ok || err != nil {
		t.Fatalf("TaskDelete: %v, %v", ok, err)
	}
	deleted = getTask(t, s, deleted.ID)

	at := base.Add(3*time.Hour + 1500*time.Nanosecond)
	for _, task := range []*weir.Task{&running, &finished, &deleted} {
		if ok, err := s.TaskCallbackGone(t.Context(), task.ID, at); !ok || err != nil {
			t.Fatalf("TaskCallbackGone of a %s task = %v, %v; want true", task.Status, ok, err)
		}
		task.CallbackGoneAt = at
		checkTask(t, "TaskGet after TaskCallbackGone", getTask(t, s, task.ID), *task)
		if ok, err := s.TaskCallbackGone(t.Context(), task.ID, at.Add(time.Hour)); ok || err != nil {
			t.Errorf("a second TaskCallbackGone = %v, %v; want false, nil", ok, err)
		}
		checkTask(t, "TaskGet after a second TaskCallbackGone", getTask(t, s, task.ID), *task)
	}
	if !update(t, s, running.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskRunning, Progress: ptr(40)}) {
		t.Fatal("progress update did not apply")
	}
	running.Progress = 40
	checkTask(t, "a gone callback after an update", getTask(t, s, running.ID), running)

	if ok, err := s.TaskCallbackGone(t.Context(), "task_nope", at); ok || !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("TaskCallbackGone of an unknown task = %v, %v; want false, ErrNotFound", ok, err)
	}
	if ok, err := s.TaskCallbackGone(t.Context(), finished.ID, time.Time{}); ok || !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("TaskCallbackGone with a zero time = %v, %v; want false, ErrInvalid", ok, err)
	}
}
