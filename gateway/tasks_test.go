package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/task"
)

// fakeRunner is a task service that keeps its tasks in a map and
// answers Submit and Delete as it is told.
type fakeRunner struct {
	tasks     map[string]weir.Task
	submitted []weir.Task
	// submit, if set, answers Submit in place of storing the task.
	submit    func(t *weir.Task) (bool, error)
	deleteErr error
	callbacks bool
}

func (f *fakeRunner) Submit(_ context.Context, t *weir.Task) (bool, error) {
	f.submitted = append(f.submitted, *t)
	if f.submit != nil {
		return f.submit(t)
	}
	f.tasks[t.ID] = *t
	return true, nil
}

func (f *fakeRunner) Get(_ context.Context, id string) (weir.Task, error) {
	t, ok := f.tasks[id]
	if !ok {
		return t, task.ErrNotFound
	}
	return t, nil
}

func (f *fakeRunner) List(context.Context, weir.TaskFilter) ([]weir.Task, error) { return nil, nil }
func (f *fakeRunner) Cancel(ctx context.Context, id string) (weir.Task, error)   { return f.Get(ctx, id) }
func (f *fakeRunner) Withdraw(ctx context.Context, id string) (weir.Task, error) {
	return f.Get(ctx, id)
}
func (f *fakeRunner) Delete(context.Context, string) error { return f.deleteErr }
func (f *fakeRunner) Position(context.Context, string) (admission.Position, bool) {
	return admission.Position{}, false
}
func (f *fakeRunner) Deliveries(context.Context, string) ([]task.Delivery, error) { return nil, nil }
func (f *fakeRunner) CallbacksEnabled() bool                                      { return f.callbacks }
func (f *fakeRunner) ValidateCallbackURL(raw string) error {
	if raw == "http://10.0.0.1/hook" {
		return errors.New("the callback URL names an internal address")
	}
	return nil
}

// frontCatalog is videoCatalog with up/v taking 4 and 8 second videos,
// and a group "ops" whose keys may run acceptance runs.
func frontCatalog(c *weir.Catalog) {
	videoCatalog(c)
	c.PlatformModels[len(c.PlatformModels)-1].Supports.Seconds = []int{4, 8}
	c.Groups = append(c.Groups, weir.Group{Name: "ops", RunModes: []weir.RunMode{weir.RunAcceptance}})
}

func rawInput(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTaskSubmit: a submission passes Prepare's policy and the task's
// own checks before the task service sees it, and its refusals come in
// the gateway's categories.
func TestTaskSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: frontCatalog})
	run := &fakeRunner{tasks: map[string]weir.Task{}}
	front := NewTasks(b.svc, run)
	key := weir.APIKey{ID: "key_1"}
	req := func(f func(*TaskRequest)) TaskRequest {
		r := TaskRequest{Kind: "video", Ask: Ask{Model: "v", Priority: "-2", MaxWait: "30s"}, Input: rawInput(t, `{"prompt":"a cat","seconds":"8"}`)}
		if f != nil {
			f(&r)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		req   TaskRequest
		want  error
		param string
	}{
		{"a chat model", req(func(r *TaskRequest) { r.Ask.Model = "m" }), ErrInvalid, "model"},
		{"callbacks off", req(func(r *TaskRequest) { r.CallbackURL, r.CallbackParam = "https://hooks.example.com/a", "callback_url" }), ErrInvalid, "callback_url"},
		{"no candidate takes it", req(func(r *TaskRequest) { r.Input = rawInput(t, `{"prompt":"a cat","seconds":"12"}`) }), ErrUnservable, "seconds"},
		{"a pin", req(func(r *TaskRequest) { r.Ask.Platform = "up" }), ErrInvalid, ParamPlatform},
	} {
		if _, _, err := front.Submit(t.Context(), key, tc.req); !errors.Is(err, tc.want) || paramOf(err) != tc.param {
			t.Errorf("%s: %v (param %q), want %v naming %q", tc.name, err, paramOf(err), tc.want, tc.param)
		}
	}
	if len(run.submitted) != 0 {
		t.Fatalf("the task service saw %d refused submissions", len(run.submitted))
	}

	got, created, err := front.Submit(t.Context(), key, req(nil))
	if err != nil || !created {
		t.Fatalf("submit: %v, created %v", err, created)
	}
	if got.KeyID != "key_1" || got.Kind != "video" || got.Model != "v" || got.Priority != -2 || got.Fingerprint == "" ||
		!got.Deadline.Equal(b.clock.Now().Add(30*time.Second)) || string(got.Input) != `{"prompt":"a cat","seconds":"8"}` {
		t.Errorf("submitted %+v", got)
	}

	// The callback the task service's sender refuses, with callbacks on.
	run.callbacks = true
	cb := req(func(r *TaskRequest) { r.CallbackURL, r.CallbackParam = "http://10.0.0.1/hook", "X-Weir-Callback-URL" })
	if _, _, err := front.Submit(t.Context(), key, cb); !errors.Is(err, ErrInvalid) || paramOf(err) != "X-Weir-Callback-URL" {
		t.Errorf("an internal callback URL: %v", err)
	}
}

// TestNewKindWaitsForANewLeader: in a fleet whose leader is of an older
// build, which would end a transcription task with no candidate, such a
// task is refused at once (503 no_candidate, saying why) and stored
// nowhere; other kinds, and the same task once the leader is new, pass.
func TestNewKindWaitsForANewLeader(t *testing.T) {
	t.Parallel()
	var newLeader atomic.Bool
	b := setup(t, setupOpts{leaderPlansNewKinds: newLeader.Load, catalog: func(c *weir.Catalog) {
		c.PlatformModels = append(c.PlatformModels, weir.PlatformModel{Name: "up/stt", Platform: "up", Upstream: "whisper-1"})
		c.Models = append(c.Models, weir.Model{Name: "stt", Kind: weir.KindTranscription, Candidates: []weir.Candidate{{PlatformModel: "up/stt"}}})
	}})
	run := &fakeRunner{tasks: map[string]weir.Task{}}
	front := NewTasks(b.svc, run)
	key := weir.APIKey{ID: "key_1"}
	stt := TaskRequest{Kind: "task", Ask: Ask{Model: "stt"}, Input: rawInput(t, `{"file":{"data":"UklGRg=="}}`)}
	_, _, err := front.Submit(t.Context(), key, stt)
	var e *Error
	if !errors.As(err, &e) || e.Category != ErrNoCandidate || !strings.Contains(e.Message, "being upgraded") || len(run.submitted) != 0 {
		t.Fatalf("a transcription task under an older leader: %v (%d stored); want no_candidate, none stored", err, len(run.submitted))
	}
	chat := TaskRequest{Kind: "task", Ask: Ask{Model: "m"}, Input: rawInput(t, `{"messages":[{"role":"user","content":"hi"}]}`)}
	if _, _, err := front.Submit(t.Context(), key, chat); err != nil {
		t.Fatalf("a chat task under an older leader: %v", err)
	}
	newLeader.Store(true)
	if _, created, err := front.Submit(t.Context(), key, stt); err != nil || !created {
		t.Fatalf("a transcription task under a new leader: %v", err)
	}
}

// TestTaskSubmitRepeats: an Idempotency-Key's repeat returns the first
// task; with another request it is idempotency_key_reused, and after its
// task was deleted not_found, both naming the header.
func TestTaskSubmitRepeats(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: frontCatalog})
	run := &fakeRunner{tasks: map[string]weir.Task{}}
	front := NewTasks(b.svc, run)
	key := weir.APIKey{ID: "key_1"}
	first := TaskRequest{Kind: "task", Ask: Ask{Model: "v"}, Input: rawInput(t, `{"prompt":"a cat"}`), IdempotencyKey: "k1"}
	t1, _, err := front.Submit(t.Context(), key, first)
	if err != nil {
		t.Fatal(err)
	}
	stored := t1
	run.submit = func(t *weir.Task) (bool, error) { *t = stored; return false, nil }
	if again, created, err := front.Submit(t.Context(), key, first); err != nil || created || again.ID != t1.ID {
		t.Errorf("the same request again: %s, created %v, %v; want %s", again.ID, created, err, t1.ID)
	}
	other := first
	other.Input = rawInput(t, `{"prompt":"a dog"}`)
	if _, _, err := front.Submit(t.Context(), key, other); !errors.Is(err, ErrIdempotencyKeyReused) || paramOf(err) != ParamIdempotencyKey {
		t.Errorf("another request with the key: %v", err)
	}
	stored.DeletedAt = b.clock.Now()
	if _, _, err := front.Submit(t.Context(), key, first); !errors.Is(err, ErrNotFound) || paramOf(err) != ParamIdempotencyKey {
		t.Errorf("the key of a deleted task: %v", err)
	}
	// What admission refuses is in its category; the store's failure is
	// passed on as it is.
	run.submit = func(*weir.Task) (bool, error) { return false, &admission.QueueFullError{Scope: "pm:up/v", Limit: 1} }
	if _, _, err := front.Submit(t.Context(), key, first); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a full queue: %v", err)
	}
	disk := errors.New("disk full")
	run.submit = func(*weir.Task) (bool, error) { return false, disk }
	var ge *Error
	if _, _, err := front.Submit(t.Context(), key, first); !errors.Is(err, disk) || errors.As(err, &ge) {
		t.Errorf("the store's failure: %v", err)
	}
}

// TestTaskSubmitAcceptance: an acceptance run's submission enters its
// run, under the caps on runs alive.
func TestTaskSubmitAcceptance(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: frontCatalog})
	run := &fakeRunner{tasks: map[string]weir.Task{}}
	front := NewTasks(b.svc, run)
	key := weir.APIKey{ID: "key_ops", Group: "ops"}
	for i := range maxRunsPerKey {
		r := TaskRequest{Kind: "task", Ask: Ask{Model: "v", RunMode: "acceptance", RunID: "run" + string(rune('a'+i))}, Input: rawInput(t, `{"prompt":"p"}`)}
		if _, _, err := front.Submit(t.Context(), key, r); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	r := TaskRequest{Kind: "task", Ask: Ask{Model: "v", RunMode: "acceptance", RunID: "one-more"}, Input: rawInput(t, `{"prompt":"p"}`)}
	if _, _, err := front.Submit(t.Context(), key, r); !errors.Is(err, ErrRateLimited) {
		t.Errorf("a run past the key's cap: %v", err)
	}
	if n := len(run.submitted); n != maxRunsPerKey {
		t.Errorf("%d tasks reached the task service, want %d", n, maxRunsPerKey)
	}
}

// TestTaskOwn: a key finds its own tasks, not another key's nor deleted
// ones; Delete puts an upstream's refusal in ErrUpstream.
func TestTaskOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: frontCatalog})
	run := &fakeRunner{tasks: map[string]weir.Task{
		"mine":    {ID: "mine", KeyID: "key_1", Model: "v"},
		"theirs":  {ID: "theirs", KeyID: "key_2"},
		"deleted": {ID: "deleted", KeyID: "key_1", DeletedAt: time.Now()},
	}}
	front := NewTasks(b.svc, run)
	key := weir.APIKey{ID: "key_1"}
	if got, err := front.Own(t.Context(), key, "mine"); err != nil || got.ID != "mine" {
		t.Errorf("own task: %+v, %v", got, err)
	}
	for _, id := range []string{"theirs", "deleted", "none"} {
		if _, err := front.Own(t.Context(), key, id); !errors.Is(err, ErrTaskNotFound) {
			t.Errorf("task %s: %v, want not found", id, err)
		}
	}
	run.deleteErr = &provider.Error{Status: 500}
	if err := front.Delete(t.Context(), run.tasks["mine"]); !errors.Is(err, ErrUpstream) {
		t.Errorf("an upstream that would not delete: %v", err)
	}
}
