package console

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/gateway"
)

// fakeTasks is a task front over a map of tasks: it records the filter
// it lists by and the tasks it cancels.
type fakeTasks struct {
	mu        sync.Mutex
	tasks     map[string]weir.Task
	filter    weir.TaskFilter
	cancelled []string
	// deliveriesErr, if set, is what Deliveries fails with.
	deliveriesErr error
}

func (f *fakeTasks) Get(_ context.Context, id string) (weir.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tasks[id]
	if !ok {
		return t, gateway.ErrTaskNotFound
	}
	return t, nil
}

func (f *fakeTasks) List(_ context.Context, filter weir.TaskFilter) ([]weir.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filter = filter
	var out []weir.Task
	for _, t := range f.tasks {
		out = append(out, t)
	}
	return out, nil
}

func (f *fakeTasks) Cancel(ctx context.Context, id string) (weir.Task, error) {
	t, err := f.Get(ctx, id)
	if err != nil {
		return t, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, id)
	t.Status = weir.TaskCancelled
	f.tasks[id] = t
	return t, nil
}

func (f *fakeTasks) Position(_ context.Context, id string) (admission.Position, bool) {
	if id != "task_q" {
		return admission.Position{}, false
	}
	return admission.Position{Scope: "pm:up/v", Ahead: 2, Queued: 5, EstimatedWait: 3 * time.Second}, true
}

func (f *fakeTasks) Deliveries(context.Context, string) ([]gateway.TaskDelivery, error) {
	if f.deliveriesErr != nil {
		return nil, f.deliveriesErr
	}
	return []gateway.TaskDelivery{{EventID: "evt_1", Type: "task.succeeded", State: "completed", Attempts: 1}}, nil
}

// setupTasks is setup with tasks as the console's task front; nil: none.
func setupTasks(t *testing.T, tasks Tasks) *testBundle {
	t.Helper()
	cat := weir.Catalog{
		Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: "http://127.0.0.1:1/v1"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "x"}},
		Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m"}}}},
	}
	return setupDeps(t, Config{AdminToken: adminToken}, cat, func(d *Deps) {
		if tasks != nil {
			d.Tasks = tasks
		}
	})
}

// admin serves one request with the admin token, and decodes its answer
// (an error's too) into out if out is not nil.
func (b *testBundle) admin(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	w := b.do(method, path, "10.0.0.1:1", body, map[string]string{"Authorization": "Bearer " + adminToken, "Content-Type": "application/json"})
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d, %v: %s", method, path, w.Code, err, w.Body)
		}
	}
	return w.Code
}

// apiErr is an answer in the API's error shape.
type apiErr struct {
	Error struct{ Code, Message, Param string }
}

// TestTasksView: the tasks view lists by the filter its query asks,
// shows one task with where it stands and its callbacks (saying so when
// they cannot be read), cancels one, and answers a task that is not
// there, or a bad status, in the API's error shape.
func TestTasksView(t *testing.T) {
	t.Parallel()
	fake := &fakeTasks{tasks: map[string]weir.Task{
		"task_q": {ID: "task_q", Kind: "video", Model: "v", Status: weir.TaskQueued, KeyID: "key_1"},
		"task_s": {ID: "task_s", Kind: "task", Model: "v", Status: weir.TaskSucceeded, KeyID: "key_1", CallbackURL: "https://hooks.example.com/a"},
	}}
	b := setupTasks(t, fake)

	var list struct{ Tasks []TaskRow }
	if code := b.admin(t, "GET", "/console/api/tasks?status=queued,running&model=v&limit=5", "", &list); code != 200 || len(list.Tasks) != 2 {
		t.Fatalf("list: %d %+v", code, list)
	}
	if f := fake.filter; f.Limit != 5 || f.Model != "v" || !f.Descending || len(f.Statuses) != 2 || f.Statuses[1] != weir.TaskRunning || f.KeyID != "" {
		t.Errorf("listed by %+v", f)
	}
	var e apiErr
	if code := b.admin(t, "GET", "/console/api/tasks?status=lost", "", &e); code != 400 || e.Error.Param != "status" {
		t.Errorf("an unknown status: %d %+v", code, e)
	}

	var one struct {
		Task     TaskRow
		Position *struct{ Ahead, Queued int }
	}
	if code := b.admin(t, "GET", "/console/api/tasks/task_q", "", &one); code != 200 || one.Task.ID != "task_q" || one.Position == nil || one.Position.Ahead != 2 {
		t.Errorf("a queued task: %d %+v", code, one)
	}
	fake.deliveriesErr = errors.New("river down")
	var withHooks map[string]any
	if code := b.admin(t, "GET", "/console/api/tasks/task_s", "", &withHooks); code != 200 || withHooks["deliveries_error"] == nil {
		t.Errorf("a task whose deliveries cannot be read: %d %v", code, withHooks)
	}
	if code := b.admin(t, "GET", "/console/api/tasks/task_none", "", &e); code != 404 || e.Error.Message != "no such task" {
		t.Errorf("a task not there: %d %+v", code, e)
	}

	var cancelled struct{ Task TaskRow }
	if code := b.admin(t, "POST", "/console/api/tasks/task_q/cancel", "{}", &cancelled); code != 200 || cancelled.Task.Status != string(weir.TaskCancelled) {
		t.Errorf("cancel: %d %+v", code, cancelled)
	}
	if code := b.admin(t, "POST", "/console/api/tasks/task_none/cancel", "{}", &e); code != 404 {
		t.Errorf("cancel a task not there: %d", code)
	}
	// A task's waiter is the task: cancelling it cancels the task.
	if code := b.admin(t, "POST", "/console/api/waiters/cancel", `{"id":"task_s"}`, nil); code != 200 || len(fake.cancelled) != 2 || fake.cancelled[1] != "task_s" {
		t.Errorf("cancel a task's waiter: %d, cancelled %v", code, fake.cancelled)
	}
}

// TestTasksViewWithoutTasks: a gateway without tasks lists none and has
// no task to show.
func TestTasksViewWithoutTasks(t *testing.T) {
	t.Parallel()
	b := setupTasks(t, nil)
	var list struct{ Tasks []TaskRow }
	if code := b.admin(t, "GET", "/console/api/tasks", "", &list); code != 200 || list.Tasks == nil || len(list.Tasks) != 0 {
		t.Errorf("list: %d %+v", code, list)
	}
	var e apiErr
	if code := b.admin(t, "GET", "/console/api/tasks/task_1", "", &e); code != 404 || e.Error.Message != "this gateway runs no tasks" {
		t.Errorf("get: %d %+v", code, e)
	}
}
