package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// fillForListing stores 12 tasks of two keys, in statuses cycling through
// queued, admitted, running and succeeded, and returns them in order.
func fillForListing(t *testing.T, s taskStore) (a, b weir.APIKey, tasks []weir.Task) {
	t.Helper()
	a, b = newKey(1), newKey(2)
	mustCreate(t, s, a, b)
	statuses := []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning, weir.TaskSucceeded}
	for i := range 12 {
		task := newTask(i, []string{a.ID, b.ID}[i%2])
		if i%3 == 0 {
			task.Model = "sora-2-pro"
		}
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

func reversed(tasks []weir.Task) []weir.Task {
	out := slices.Clone(tasks)
	slices.Reverse(out)
	return out
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
		{"model", weir.TaskFilter{Model: "sora-2-pro"}, pick(tasks, func(task weir.Task) bool { return task.Model == "sora-2-pro" })},
		{"model and status, newest first", weir.TaskFilter{Model: "sora-2", Statuses: []weir.TaskStatus{weir.TaskQueued}, Descending: true},
			reversed(pick(tasks, func(task weir.Task) bool { return task.Model == "sora-2" && task.Status == weir.TaskQueued }))},
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
	if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: gone.ID, At: base.Add(2 * time.Hour)}); !ok || err != nil {
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

// stateLister is what a store that lists task states does (the task
// service's StateLister).
type stateLister interface {
	TaskStateList(ctx context.Context, f weir.TaskFilter) ([]weir.TaskState, error)
}

// testTaskStateList: a listing of task states holds the tasks TaskList
// lists with the same filter, in the same order, each with its Seq, id
// and status as stored; a deleted task is never listed, and a filter
// TaskList refuses is refused.
func testTaskStateList(t *testing.T, s taskStore) {
	sl, ok := s.(stateLister)
	if !ok {
		t.Skip("the store lists no task states")
	}
	a, _, tasks := fillForListing(t, s)
	gone := newTask(99, a.ID)
	createTasks(t, s, &gone)
	finishTask(t, s, gone.ID, weir.TaskCancelled)
	if ok, err := s.TaskDelete(t.Context(), &weir.TaskDeleteParams{ID: gone.ID, At: base.Add(2 * time.Hour)}); !ok || err != nil {
		t.Fatalf("TaskDelete(%s) = %v, %v", gone.ID, ok, err)
	}
	// A status changed after the tasks were listed in full is read as
	// it is now.
	if !update(t, s, tasks[0].ID, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted}) {
		t.Fatalf("TaskUpdate of %s to admitted did not apply", tasks[0].ID)
	}
	tasks[0].Status = weir.TaskAdmitted
	live := []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning}
	for _, tc := range []struct {
		name string
		f    weir.TaskFilter
	}{
		{"all", weir.TaskFilter{}},
		{"not ended", weir.TaskFilter{Statuses: live}},
		{"queued", weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued}}},
		{"not ended, after seq and limit", weir.TaskFilter{Statuses: live, AfterSeq: tasks[3].Seq, Limit: 4}},
		{"key, newest first", weir.TaskFilter{KeyID: a.ID, Descending: true}},
		{"a status no task is in", weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskExpired}}},
	} {
		f := tc.f
		t.Run(tc.name, func(t *testing.T) {
			got, err := sl.TaskStateList(t.Context(), f)
			if err != nil {
				t.Fatalf("TaskStateList: %v", err)
			}
			want := listTasks(t, s, f)
			if len(got) != len(want) {
				t.Fatalf("TaskStateList: %d tasks %v, TaskList %d: %v", len(got), got, len(want), taskIDs(want))
			}
			for i, w := range want {
				if st := (weir.TaskState{Seq: w.Seq, ID: w.ID, Status: w.Status}); got[i] != st {
					t.Errorf("TaskStateList[%d] = %+v, want %+v", i, got[i], st)
				}
			}
		})
	}
	if got, err := sl.TaskStateList(t.Context(), weir.TaskFilter{}); err == nil {
		for _, st := range got {
			if st.ID == gone.ID {
				t.Errorf("TaskStateList lists deleted task %s", gone.ID)
			}
			if st.ID == tasks[0].ID && st.Status != weir.TaskAdmitted {
				t.Errorf("TaskStateList reads %s as %s, want admitted", st.ID, st.Status)
			}
		}
	}
	for _, f := range []weir.TaskFilter{{Limit: -1}, {Statuses: []weir.TaskStatus{"paused"}}} {
		if _, err := sl.TaskStateList(t.Context(), f); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("TaskStateList(%+v): %v, want ErrInvalid", f, err)
		}
	}
}
