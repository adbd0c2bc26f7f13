package storetest

import (
	"bytes"
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
	runSubtests(t, newStore, []subtest[taskStore]{
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
		{"23_TaskStateList", testTaskStateList},
	})
}

// newTask is a queued task of key keyID, with what a submission sets.
func newTask(i int, keyID string) weir.Task {
	var mode weir.RunMode
	var run, trace string
	switch i % 4 {
	case 1:
		trace = fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
	case 2:
		mode, run = weir.RunAcceptance, fmt.Sprintf("run-%d", i)
	case 3:
		mode = weir.RunSimulation
	}
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
		RunMode:     mode,
		RunID:       run,
		TraceParent: trace,
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
		got.Progress == want.Progress && got.UpstreamID == want.UpstreamID && got.UpstreamSite == want.UpstreamSite && bytes.Equal(got.Result, want.Result) &&
		got.ErrorCode == want.ErrorCode && got.ErrorMessage == want.ErrorMessage && got.CallbackURL == want.CallbackURL &&
		got.IdempotencyKey == want.IdempotencyKey && got.Fingerprint == want.Fingerprint && got.Attempts == want.Attempts &&
		slices.Equal(got.CallbackEvents, want.CallbackEvents) &&
		got.CreatedAt.Equal(want.CreatedAt) && got.AdmittedAt.Equal(want.AdmittedAt) &&
		got.FinishedAt.Equal(want.FinishedAt) && got.Deadline.Equal(want.Deadline) && got.DeletedAt.Equal(want.DeletedAt) &&
		got.CallbackGoneAt.Equal(want.CallbackGoneAt) && got.RunMode == want.RunMode && got.RunID == want.RunID &&
		got.TraceParent == want.TraceParent
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
	applied, err := s.TaskUpdate(t.Context(), &weir.TaskUpdateParams{ID: id, Update: u})
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
	full.UpstreamSite = "openai api.openai.com 4f2a9c01d3b7e655"
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

	// The task an idempotency key stored is found by it, for its key
	// alone; an empty one, or one not stored, finds nothing.
	found, err := s.TaskByIdempotencyKey(t.Context(), k1.ID, first.IdempotencyKey)
	if err != nil {
		t.Fatalf("TaskByIdempotencyKey: %v", err)
	}
	checkTask(t, "the task found by its idempotency key", found, first)
	if found, err := s.TaskByIdempotencyKey(t.Context(), k2.ID, first.IdempotencyKey); err != nil || found.ID != other.ID {
		t.Errorf("TaskByIdempotencyKey of another key = %s, %v; want %s", found.ID, err, other.ID)
	}
	for _, idem := range []string{"", "order-44"} {
		if _, err := s.TaskByIdempotencyKey(t.Context(), k1.ID, idem); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("TaskByIdempotencyKey of %q: %v; want ErrNotFound", idem, err)
		}
	}
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

func testTaskNotFound(t *testing.T, s taskStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	task := newTask(1, k.ID)
	createTasks(t, s, &task)
	for _, id := range []string{"video_nope", ""} {
		if _, err := s.TaskGet(t.Context(), id); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("TaskGet(%q): %v, want ErrNotFound", id, err)
		}
		applied, err := s.TaskUpdate(t.Context(), &weir.TaskUpdateParams{ID: id, Update: weir.TaskUpdate{
			From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskCancelled,
		}})
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
		{"an unknown run mode", func(task *weir.Task) { task.RunMode = "dream" }},
		{"an acceptance run without an id", func(task *weir.Task) { task.RunMode, task.RunID = weir.RunAcceptance, "" }},
		{"a run id in production", func(task *weir.Task) { task.RunMode, task.RunID = "", "r1" }},
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
		if applied, err := s.TaskUpdate(t.Context(), &weir.TaskUpdateParams{ID: kept.ID, Update: tc.u}); applied || !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("TaskUpdate with %s = %v, %v; want false, ErrInvalid", tc.name, applied, err)
		}
	}
	checkTask(t, "the task after refused updates", getTask(t, s, kept.ID), kept)
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
	if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: deleted.ID, At: base.Add(2 * time.Hour)}); !ok || err != nil {
		t.Fatalf("TaskDelete: %v, %v", ok, err)
	}
	deleted = getTask(t, s, deleted.ID)

	at := base.Add(3*time.Hour + 1500*time.Nanosecond)
	for _, task := range []*weir.Task{&running, &finished, &deleted} {
		if ok, err := s.TaskCallbackGone(t.Context(), &weir.TaskCallbackGoneParams{ID: task.ID, At: at}); !ok || err != nil {
			t.Fatalf("TaskCallbackGone of a %s task = %v, %v; want true", task.Status, ok, err)
		}
		task.CallbackGoneAt = at
		checkTask(t, "TaskGet after TaskCallbackGone", getTask(t, s, task.ID), *task)
		if ok, err := s.TaskCallbackGone(t.Context(), &weir.TaskCallbackGoneParams{ID: task.ID, At: at.Add(time.Hour)}); ok || err != nil {
			t.Errorf("a second TaskCallbackGone = %v, %v; want false, nil", ok, err)
		}
		checkTask(t, "TaskGet after a second TaskCallbackGone", getTask(t, s, task.ID), *task)
	}
	if !update(t, s, running.ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskRunning, Progress: ptr(40)}) {
		t.Fatal("progress update did not apply")
	}
	running.Progress = 40
	checkTask(t, "a gone callback after an update", getTask(t, s, running.ID), running)

	if ok, err := s.TaskCallbackGone(t.Context(), &weir.TaskCallbackGoneParams{ID: "task_nope", At: at}); ok || !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("TaskCallbackGone of an unknown task = %v, %v; want false, ErrNotFound", ok, err)
	}
	if ok, err := s.TaskCallbackGone(t.Context(), &weir.TaskCallbackGoneParams{ID: finished.ID, At: time.Time{}}); ok || !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("TaskCallbackGone with a zero time = %v, %v; want false, ErrInvalid", ok, err)
	}
}
