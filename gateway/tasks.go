package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/task"
)

// TaskRunner is the task service the task front runs tasks on;
// task.Service implements it.
type TaskRunner interface {
	Submit(ctx context.Context, t *weir.Task) (created bool, err error)
	Get(ctx context.Context, id string) (weir.Task, error)
	List(ctx context.Context, f weir.TaskFilter) ([]weir.Task, error)
	Cancel(ctx context.Context, id string) (weir.Task, error)
	// Withdraw cancels the task id because its submission's client
	// left before it was answered (task.Service.Withdraw).
	Withdraw(ctx context.Context, id string) (weir.Task, error)
	Delete(ctx context.Context, id string) error
	Position(ctx context.Context, id string) (admission.Position, bool)
	Deliveries(ctx context.Context, id string) ([]task.Delivery, error)
	// CallbacksEnabled reports whether tasks may ask for callbacks, and
	// ValidateCallbackURL whether one URL may be called back.
	CallbacksEnabled() bool
	ValidateCallbackURL(raw string) error
}

var _ TaskRunner = (*task.Service)(nil)

// ErrTaskNotFound is the task front's answer for a task that is not
// there, or not the caller's (task.ErrNotFound).
var ErrTaskNotFound = task.ErrNotFound

// TaskDelivery is one callback event of a task and how its delivery has
// gone (task.Delivery).
type TaskDelivery = task.Delivery

// ParamIdempotencyKey is the request header that makes a repeated task
// submission return the task the first one made.
const ParamIdempotencyKey = "Idempotency-Key"

// Tasks is the task front: what the transports do with durable tasks —
// submit one (Prepare's policy, then the task's own checks), find, list,
// cancel and delete them, fetch a finished video's content — in the
// gateway's categories of errors, so that the transports reach the task
// service only through it.
type Tasks struct {
	gw  *Service
	run TaskRunner
}

// NewTasks returns the task front of gw over the task service run (which
// gw plans: task.Deps.Planner).
func NewTasks(gw *Service, run TaskRunner) *Tasks {
	return &Tasks{gw: gw, run: run}
}

// TaskRequest is a task submission as the transport read it.
type TaskRequest struct {
	// Kind is the API it came by, "video" or "task": the task's kind and
	// its id's prefix.
	Kind string
	// Ask is its model and what its headers ask; Ask.Kind is not read (a
	// task's model is of an asynchronous kind).
	Ask   Ask
	Input map[string]json.RawMessage
	// CallbackURL is where it asks its events to go ("" nowhere), and
	// CallbackEvents which beyond the terminal one, sorted and without
	// repeats. CallbackParam names where the URL came from, for errors
	// about it.
	CallbackURL    string
	CallbackEvents []weir.TaskEvent
	CallbackParam  string
	// IdempotencyKey makes a repeat of the submission return the task the
	// first one made ("" none).
	IdempotencyKey string
}

// Submit submits req as key's task: Prepare decides what key may ask;
// then the callback it asks for, whether a candidate can serve its input,
// and for an acceptance run the caps on runs alive (EnterRun); then the
// task service queues it. created is false for a repeat of an earlier
// submission of the same Idempotency-Key, whose task is returned; the key
// reused with another request is ErrIdempotencyKeyReused, and with one
// whose task was deleted ErrNotFound. A refusal is an *Error; another
// error is the task service's failure.
func (f *Tasks) Submit(ctx context.Context, key weir.APIKey, req TaskRequest) (t weir.Task, created bool, err error) {
	ask := req.Ask
	ask.Kind = ""
	g, err := f.gw.Prepare(ctx, key, ask)
	if err != nil {
		return t, false, err
	}
	if err := checkTaskInput(req.Kind, g.Model, req.Input); err != nil {
		return t, false, err
	}
	if _, isNew := newTaskKinds[g.Model.Kind]; isNew && f.gw.deps.LeaderPlansNewKinds != nil && !f.gw.deps.LeaderPlansNewKinds() {
		return t, false, errorf(ErrNoCandidate, "model", fmt.Sprintf(
			"the fleet is being upgraded and its leader's build cannot run %s tasks yet: submit again once every replica runs this build", g.Model.Kind))
	}
	if req.CallbackURL != "" {
		if !f.run.CallbacksEnabled() {
			return t, false, errorf(ErrInvalid, req.CallbackParam, "callbacks are not enabled on this gateway (tasks.webhook_secret)")
		}
		if err := f.run.ValidateCallbackURL(req.CallbackURL); err != nil {
			return t, false, errorf(ErrInvalid, req.CallbackParam, err.Error())
		}
	}
	body, err := json.Marshal(req.Input)
	if err != nil {
		return t, false, errorf(ErrInvalid, "", "could not encode the task input")
	}
	if err := f.gw.unservable(g.Model, body); err != nil {
		return t, false, err
	}
	fingerprint, err := requestFingerprint(req.Kind, g.Model.Name, req.Input, req.CallbackURL, req.CallbackEvents, g.RunMode, g.RunID)
	if err != nil {
		return t, false, errorf(ErrInvalid, "", "could not read the task input: "+err.Error())
	}
	t = weir.Task{
		ID: task.NewID(req.Kind), KeyID: key.ID, Kind: req.Kind, Model: g.Model.Name, Input: body, Priority: g.Priority,
		CallbackURL: req.CallbackURL, CallbackEvents: req.CallbackEvents, IdempotencyKey: req.IdempotencyKey, Fingerprint: fingerprint,
		RunMode: g.RunMode, RunID: g.RunID, Deadline: g.Deadline,
	}
	if g.RunMode == weir.RunAcceptance {
		// A submission enters its run, under the caps on runs alive; the
		// task queued again later does not.
		if err := f.gw.EnterRun(key.ID, g.RunID); err != nil {
			return weir.Task{}, false, err
		}
	}
	created, err = f.run.Submit(ctx, &t)
	switch {
	case err == nil && !created && !t.SameRequest(fingerprint):
		// The stored task is another request's: nothing was created.
		return weir.Task{}, false, errorf(ErrIdempotencyKeyReused, ParamIdempotencyKey,
			"this Idempotency-Key was already used with a different request; use a new key for a new request")
	case err == nil && !created && t.Deleted():
		return weir.Task{}, false, errorf(ErrNotFound, ParamIdempotencyKey,
			fmt.Sprintf("the task this Idempotency-Key made (%s) was deleted", t.ID))
	case err != nil:
		return t, created, taskError(g.Model.Name, err)
	}
	return t, created, nil
}

// taskRequired are the input fields a task of each synchronous kind
// must have, as its endpoint requires them.
var taskRequired = map[weir.ModelKind][]string{
	weir.KindChat:       {"messages"},
	weir.KindEmbeddings: {"input"},
	weir.KindImages:     {"prompt"},
	weir.KindSpeech:     {"input", "voice"},
	// The audio, base64 in the input (provider.TaskFile).
	weir.KindTranscription: {provider.TaskFileField},
}

// checkTaskInput refuses a task that came by api ("video" or "task") for
// model m that cannot run: a model of another kind than video by the
// video API, or an input of a synchronous kind that lacks what its
// endpoint requires or asks for a stream (a task's answer is stored
// whole).
func checkTaskInput(api string, m weir.Model, input map[string]json.RawMessage) error {
	switch {
	case api == "video" && m.Kind != weir.KindVideo:
		return errorf(ErrInvalid, "model", fmt.Sprintf("the model %q serves %s, not videos; submit it as a task (POST /v1/tasks)", m.Name, m.Kind))
	case m.Kind.Async():
		return nil
	}
	if raw, ok := input["stream"]; ok {
		var stream bool
		if json.Unmarshal(raw, &stream) != nil || stream {
			return errorf(ErrInvalid, "input.stream", "a task's answer is stored whole: stream is not supported")
		}
	}
	for _, name := range taskRequired[m.Kind] {
		switch raw, ok := input[name]; {
		case !ok, string(raw) == "null", string(raw) == `""`, string(raw) == "[]":
			return errorf(ErrInvalid, "input."+name, "missing required parameter: "+name)
		}
	}
	if m.Kind == weir.KindTranscription {
		if _, _, err := provider.ReadTaskFile(input[provider.TaskFileField]); err != nil {
			return errorf(ErrInvalid, "input."+provider.TaskFileField, err.Error())
		}
	}
	return nil
}

// Own is key's task id; ErrTaskNotFound if it is not there, is
// another key's, or was deleted.
func (f *Tasks) Own(ctx context.Context, key weir.APIKey, id string) (weir.Task, error) {
	t, err := f.run.Get(ctx, id)
	switch {
	case err != nil:
		return t, err
	case t.KeyID != key.ID || t.Deleted():
		return t, ErrTaskNotFound
	}
	return t, nil
}

// Get is the task id, whoever's it is (deleted ones too);
// ErrTaskNotFound if it is not there.
func (f *Tasks) Get(ctx context.Context, id string) (weir.Task, error) { return f.run.Get(ctx, id) }

// List lists the tasks f selects.
func (f *Tasks) List(ctx context.Context, filter weir.TaskFilter) ([]weir.Task, error) {
	return f.run.List(ctx, filter)
}

// Cancel cancels the task id if it has not ended (task.Service.Cancel),
// and returns it as it is then.
func (f *Tasks) Cancel(ctx context.Context, id string) (weir.Task, error) {
	return f.run.Cancel(ctx, id)
}

// Withdraw cancels task t, which a submission just created, because the
// submission's client left before it was told so: nobody knows the
// task's id, and a client that saw its submission fail submits again, a
// second job billed for one it wants. It reports whether it did. A task
// submitted with an Idempotency-Key is kept: a retry with the key is
// answered with this task, and may already have been, so cancelling it
// could take back a task a client was told was accepted.
func (f *Tasks) Withdraw(ctx context.Context, t weir.Task) (bool, error) {
	if t.IdempotencyKey != "" {
		return false, nil
	}
	_, err := f.run.Withdraw(ctx, t.ID)
	return err == nil, err
}

// Delete deletes t as OpenAI deletes a video (task.Service.Delete): an
// upstream that would not delete its job is ErrUpstream.
func (f *Tasks) Delete(ctx context.Context, t weir.Task) error {
	return taskError(t.Model, f.run.Delete(ctx, t.ID))
}

// Position is where the queued task id stands; false if it is not queued.
func (f *Tasks) Position(ctx context.Context, id string) (admission.Position, bool) {
	return f.run.Position(ctx, id)
}

// Deliveries are the task id's callback events and how each has gone.
func (f *Tasks) Deliveries(ctx context.Context, id string) ([]TaskDelivery, error) {
	return f.run.Deliveries(ctx, id)
}

// Content fetches a finished video's asset (variant "", "video",
// "thumbnail" or "spritesheet") from the platform that made it. The
// caller closes the body.
func (f *Tasks) Content(ctx context.Context, t weir.Task, variant string) (*http.Response, error) {
	target, ok := f.gw.TargetAt(t.PlatformModel, t.RunMode, t.UpstreamSite)
	if !ok {
		return nil, errorf(ErrNoCandidate, "", "the platform that made this video left the catalog")
	}
	resp, err := target.Adapter.Content(ctx, t.UpstreamID, variant)
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, provider.ErrJobNotFound):
		return nil, &Error{Category: ErrNotFound, Param: "id", Message: "the upstream no longer has this video", Err: err}
	}
	return nil, &Error{Category: ErrUpstream, Message: "the upstream could not serve this video's content", Err: err}
}

// taskError is err, from the task service about a task of model, in the
// service's categories: admission refusing a submission (a full queue, a
// wait already over, no candidate) and an upstream's failure (deleting a
// finished task's job upstream). Anything else is returned as it is.
func taskError(model string, err error) error {
	var pe *provider.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, admission.ErrQueueFull):
		return queueFull(model, err)
	case errors.Is(err, admission.ErrTimeout):
		// A submission whose wait had ended before it could queue (it
		// asked for none while capacity was taken): only its own
		// X-Weir-Max-Wait sets one.
		return queueTimeout(model, 0, "the task's own max wait", true, err)
	case errors.Is(err, admission.ErrNoCandidate):
		return &Error{Category: ErrNoCandidate, Param: "model", Message: err.Error(), Err: err}
	case errors.As(err, &pe):
		return &Error{Category: ErrUpstream, Message: err.Error(), Err: err}
	}
	return err
}
