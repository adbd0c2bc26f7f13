package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/task"
)

// leavingClient is the task front with a client that leaves while its
// submission is stored: Submit ends the request's context once the task
// service has answered, before the handler writes the answer.
type leavingClient struct {
	Tasks
	leave context.CancelFunc
}

func (l *leavingClient) Submit(ctx context.Context, key weir.APIKey, req gateway.TaskRequest) (weir.Task, bool, error) {
	t, created, err := l.Tasks.Submit(ctx, key, req)
	l.leave()
	return t, created, err
}

// brokenWriter is a response writer whose connection is gone: what is
// written fails.
type brokenWriter struct{ *httptest.ResponseRecorder }

func (w brokenWriter) Write([]byte) (int, error) { return 0, errors.New("write: broken pipe") }

// submitAndLeave posts a task (a video when path is /v1/videos) to the
// bundle's API, in process, as a client that leaves before it is
// answered, with headers h, answered into w (a recorder if nil); it
// returns the task's id, from the store: the one task the key has
// besides those in before.
func submitAndLeave(t *testing.T, b *testBundle, path, body string, h http.Header, w http.ResponseWriter, leave bool) weir.Task {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	front := b.srv.deps.Tasks
	if leave {
		b.srv.deps.Tasks = &leavingClient{Tasks: front, leave: cancel}
		defer func() { b.srv.deps.Tasks = front }()
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+b.key)
	for k, vs := range h {
		r.Header[k] = vs
	}
	if w == nil {
		w = httptest.NewRecorder()
	}
	b.srv.Handler().ServeHTTP(w, r)
	ts, err := b.tasks.List(t.Context(), weir.TaskFilter{Descending: true, Limit: 1})
	if err != nil || len(ts) != 1 {
		t.Fatalf("the submission stored %v (%v), want a task", ts, err)
	}
	return ts[0]
}

// TestSubmissionWithdrawnWhenTheClientLeaves: a task whose client left
// before its 202 was written — its request ended, or the answer could not
// be written — is cancelled, and never reaches its upstream; a task
// submitted with an Idempotency-Key is kept (a retry with the key gets
// it), as is one whose answer was written.
func TestSubmissionWithdrawnWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{mock: mock.Config{JobDuration: time.Hour}, vlimits: weir.Limits{Concurrency: 1, QueueLimit: 10}})
	// The one slot is taken: the tasks below wait, and reach the
	// upstream only if they are not cancelled.
	first := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"one"}}`, nil)
	b.waitTask(t, first.ID, weir.TaskRunning)

	withdrawn := func(what string, tk weir.Task) {
		t.Helper()
		got, err := b.tasks.Get(t.Context(), tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != weir.TaskCancelled || !strings.Contains(got.ErrorMessage, "the client left") {
			t.Errorf("%s: task %s %s (%s), want cancelled as its client left", what, got.ID, got.Status, got.ErrorMessage)
		}
	}
	withdrawn("a task left before its 202", submitAndLeave(t, b, "/v1/tasks", `{"model":"v","input":{"prompt":"two"}}`, nil, nil, true))
	withdrawn("a video left before its answer", submitAndLeave(t, b, "/v1/videos", `{"model":"v","prompt":"three"}`, nil, nil, true))
	withdrawn("a task whose 202 could not be written",
		submitAndLeave(t, b, "/v1/tasks", `{"model":"v","input":{"prompt":"four"}}`, nil, brokenWriter{httptest.NewRecorder()}, false))

	kept := submitAndLeave(t, b, "/v1/tasks", `{"model":"v","input":{"prompt":"five"}}`, http.Header{"Idempotency-Key": {"k-5"}}, nil, true)
	if got, _ := b.tasks.Get(t.Context(), kept.ID); got.Status != weir.TaskQueued {
		t.Errorf("a task with an Idempotency-Key whose client left: %s (%s), want still queued", got.Status, got.ErrorMessage)
	}
	answered := submitAndLeave(t, b, "/v1/tasks", `{"model":"v","input":{"prompt":"six"}}`, nil, nil, false)
	if got, _ := b.tasks.Get(t.Context(), answered.ID); got.Status != weir.TaskQueued {
		t.Errorf("a task whose 202 was written: %s (%s), want still queued", got.Status, got.ErrorMessage)
	}
	if jobs := b.mock.Jobs(); len(jobs) != 1 {
		t.Errorf("the upstream has %d jobs, want only the first task's", len(jobs))
	}
}

// TestTaskBacklogFullRefused: past tasks.queue_limit waiting tasks, a
// submission is answered 429 queue_full in the API's error shape, with a
// Retry-After, and nothing is stored.
func TestTaskBacklogFullRefused(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{tasks: &task.Config{QueueLimit: 1}, mock: mock.Config{JobDuration: time.Hour},
		vlimits: weir.Limits{Concurrency: 1, QueueLimit: 10}})
	first := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"one"}}`, nil)
	b.waitTask(t, first.ID, weir.TaskRunning)
	callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"two"}}`, nil)
	resp, body := b.call(t, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"three"}`, nil)
	if e := wantError(t, resp, body, http.StatusTooManyRequests, weir.CodeQueueFull, ""); !strings.Contains(e.Message, "queue_limit 1") {
		t.Errorf("message %q, want the bound named", e.Message)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on queue_full")
	}
	if ts, err := b.tasks.List(t.Context(), weir.TaskFilter{}); err != nil || len(ts) != 2 {
		t.Errorf("%d tasks stored (%v), want the 2 taken", len(ts), err)
	}
}
