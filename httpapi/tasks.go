package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
)

// HeaderIdempotencyKey makes a repeated task submission return the task
// the first one made; the key reused with a different request is refused
// with weir.CodeIdempotencyKeyReused.
const HeaderIdempotencyKey = gateway.ParamIdempotencyKey

type taskError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// taskQueueDetail is Weir's own view: the exact status, and for a queued
// task its position and a wait estimate.
type taskQueueDetail struct {
	Status weir.TaskStatus `json:"status"`
	// RunMode marks a task that is not production's ("simulation", or
	// "acceptance" of the run RunID).
	RunMode       weir.RunMode `json:"run_mode,omitempty"`
	RunID         string       `json:"run_id,omitempty"`
	QueuePosition *int         `json:"queue_position,omitempty"`
	EstimatedWait *float64     `json:"estimated_wait_seconds,omitempty"`
}

// taskObject is the generic task API's answer.
type taskObject struct {
	ID          string          `json:"id"`
	Object      string          `json:"object"`
	Model       string          `json:"model"`
	Status      weir.TaskStatus `json:"status"`
	Progress    int             `json:"progress"`
	CreatedAt   int64           `json:"created_at"`
	FinishedAt  *int64          `json:"finished_at"`
	Result      json.RawMessage `json:"result"`
	Error       *taskError      `json:"error"`
	CallbackURL string          `json:"callback_url,omitempty"`
	// CallbackEvents are the events asked for beyond the terminal one.
	CallbackEvents []weir.TaskEvent `json:"callback_events,omitempty"`
	Queue          *taskQueue       `json:"queue,omitempty"`
	// RunMode marks a task that is not production's: "simulation" (its
	// result is the simulator's) or "acceptance", of the run RunID.
	RunMode weir.RunMode `json:"run_mode,omitempty"`
	RunID   string       `json:"run_id,omitempty"`
}

type taskQueue struct {
	Position      int     `json:"position"`
	EstimatedWait float64 `json:"estimated_wait_seconds"`
}

// finishedAt is when t ended, in Unix seconds; nil while it runs.
func finishedAt(t weir.Task) *int64 {
	if t.FinishedAt.IsZero() {
		return nil
	}
	at := t.FinishedAt.Unix()
	return &at
}

func errorOf(t weir.Task) *taskError {
	if t.ErrorCode == "" {
		return nil
	}
	return &taskError{Code: t.ErrorCode, Message: t.ErrorMessage}
}

// queueOf is where a queued task stands; nil for another.
func (s *Server) queueOf(ctx context.Context, t weir.Task) *taskQueue {
	if t.Status != weir.TaskQueued {
		return nil
	}
	p, ok := s.deps.Tasks.Position(ctx, t.ID)
	if !ok {
		return nil
	}
	return &taskQueue{Position: p.Ahead + 1, EstimatedWait: p.EstimatedWait.Seconds()}
}

func (s *Server) taskOf(ctx context.Context, t weir.Task) taskObject {
	o := taskObject{
		ID: t.ID, Object: "task", Model: t.Model, Status: t.Status, Progress: t.Progress,
		CreatedAt: t.CreatedAt.Unix(), Result: t.Result, CallbackURL: t.CallbackURL, CallbackEvents: t.CallbackEvents,
		RunMode: t.RunMode, RunID: t.RunID,
	}
	if len(o.Result) == 0 {
		o.Result = json.RawMessage("null")
	}
	o.FinishedAt, o.Error, o.Queue = finishedAt(t), errorOf(t), s.queueOf(ctx, t)
	return o
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// answerSubmission answers a task submission with status and v, about
// task t, which the submission created (created) or found. A created
// task whose client left before the answer was written — the request's
// context ended first, or the answer could not be written out — is
// withdrawn (Tasks.Withdraw): the client never learned its id, and may
// submit again. Once the answer is out the task is the client's, even
// if the client is gone by then. The answer carries its Content-Length,
// so that the flush sends all of it in one write and nothing follows.
func (s *Server) answerSubmission(w http.ResponseWriter, r *http.Request, t weir.Task, created bool, status int, v any) {
	err := r.Context().Err()
	if err == nil {
		var body []byte
		if body, err = json.Marshal(v); err == nil {
			body = append(body, '\n') // as json.Encoder ends it
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status)
			if _, err = w.Write(body); err == nil {
				err = http.NewResponseController(w).Flush()
			}
		}
	}
	if err == nil || !created {
		return
	}
	log := infoOf(w).log()
	switch withdrawn, werr := s.deps.Tasks.Withdraw(context.WithoutCancel(r.Context()), t); {
	case werr != nil:
		log.Error("the task of a submission whose client left could not be withdrawn", "task", t.ID, "error", werr)
	case withdrawn:
		log.Info("the client left before its submission was answered: its task is withdrawn", "task", t.ID, "cause", err)
	}
}

// readTaskBody reads a task request: JSON, or (as OpenAI's SDKs send video
// requests) a multipart or urlencoded form, whose text fields become the
// JSON object passed upstream.
func (s *Server) readTaskBody(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, *apiError) {
	if aerr := s.limitBody(w, r); aerr != nil {
		return nil, aerr
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" || ct == "application/x-www-form-urlencoded" {
		var err error
		if ct == "multipart/form-data" {
			err = r.ParseMultipartForm(s.cfg.MaxBodyBytes)
			if r.MultipartForm != nil {
				// The server removes the files of the request it passed
				// in, not those of the copy the middleware made.
				defer func() { _ = r.MultipartForm.RemoveAll() }()
			}
		} else {
			err = r.ParseForm()
		}
		if err == nil {
			// What follows the form's last part (bounded by limitBody), so
			// that the body is read to its end.
			_, err = io.Copy(io.Discard, r.Body)
		}
		if err != nil {
			return nil, s.bodyError(err, "could not parse the form: "+err.Error())
		}
		if r.MultipartForm != nil && len(r.MultipartForm.File) > 0 {
			return nil, errorf(weir.CodeInvalidRequest, "input_reference", "file inputs are not supported")
		}
		out := make(map[string]json.RawMessage)
		for k, vs := range r.PostForm {
			if len(vs) > 0 {
				b, _ := json.Marshal(vs[0])
				out[k] = b
			}
		}
		return out, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, s.bodyError(err, "could not read request body")
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(body, &out) != nil || out == nil {
		return nil, errorf(weir.CodeInvalidRequest, "", "request body must be a JSON object")
	}
	return out, nil
}

func stringField(m map[string]json.RawMessage, name string) (string, bool) {
	raw, ok := m[name]
	if !ok {
		return "", false
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}

// taskCallback is where a submission asks its events to go, and which.
type taskCallback struct {
	URL string
	// Events are sorted, without repeats.
	Events []weir.TaskEvent
	// param names where URL came from, for errors about it.
	param string
}

// callbackOf reads what a task request asks for its callbacks: the body's
// callback_url and callback_events (body nil for the video API, whose
// body is OpenAI's and all passed upstream) and the X-Weir-Callback-URL
// and X-Weir-Callback-Events headers. Body and headers are alternatives:
// given both, they must agree (events as sets), or the request is refused
// rather than one silently winning. Events need a URL.
func callbackOf(r *http.Request, body map[string]json.RawMessage) (taskCallback, *apiError) {
	cb := taskCallback{param: "callback_url"}
	var bodyURL string
	if raw, ok := body["callback_url"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &bodyURL) != nil {
			return cb, errorf(weir.CodeInvalidRequest, "callback_url", "callback_url must be a string")
		}
	}
	var bodyEvents []weir.TaskEvent
	hasBodyEvents := false
	if raw, ok := body["callback_events"]; ok && string(raw) != "null" {
		var names []string
		if json.Unmarshal(raw, &names) != nil {
			return cb, errorf(weir.CodeInvalidRequest, "callback_events", `callback_events must be an array of event names, such as ["progress"]`)
		}
		var aerr *apiError
		if bodyEvents, aerr = taskEvents(names, "callback_events"); aerr != nil {
			return cb, aerr
		}
		hasBodyEvents = true
	}
	headerURL, aerr := oneHeader(r, HeaderCallbackURL)
	if aerr != nil {
		return cb, aerr
	}
	headerURL = strings.TrimSpace(headerURL)
	var headerEvents []weir.TaskEvent
	hasHeaderEvents := false
	if vs := r.Header.Values(HeaderCallbackEvents); len(vs) > 0 {
		var names []string
		for _, v := range vs {
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
		}
		var aerr *apiError
		if headerEvents, aerr = taskEvents(names, HeaderCallbackEvents); aerr != nil {
			return cb, aerr
		}
		hasHeaderEvents = true
	}
	switch {
	case bodyURL != "" && headerURL != "" && bodyURL != headerURL:
		return cb, errorf(weir.CodeInvalidRequest, "callback_url", "callback_url and the "+HeaderCallbackURL+" header differ; give one of them")
	case bodyURL != "":
		cb.URL = bodyURL
	case headerURL != "":
		cb.URL, cb.param = headerURL, HeaderCallbackURL
	}
	switch {
	case hasBodyEvents && hasHeaderEvents && !slices.Equal(bodyEvents, headerEvents):
		return cb, errorf(weir.CodeInvalidRequest, "callback_events", "callback_events and the "+HeaderCallbackEvents+" header differ; give one of them")
	case hasBodyEvents:
		cb.Events = bodyEvents
	default:
		cb.Events = headerEvents
	}
	if len(cb.URL) > maxCallbackURL {
		return cb, errorf(weir.CodeInvalidRequest, cb.param, fmt.Sprintf("the callback URL is %d bytes long; at most %d are allowed", len(cb.URL), maxCallbackURL))
	}
	if len(cb.Events) > 0 && cb.URL == "" {
		param := "callback_events"
		if !hasBodyEvents {
			param = HeaderCallbackEvents
		}
		return cb, errorf(weir.CodeInvalidRequest, param, "callback events need a callback URL (callback_url or "+HeaderCallbackURL+")")
	}
	return cb, nil
}

// taskEvents checks event names and returns them sorted, without repeats.
func taskEvents(names []string, param string) ([]weir.TaskEvent, *apiError) {
	events := make([]weir.TaskEvent, 0, len(names))
	for _, n := range names {
		e := weir.TaskEvent(n)
		if !e.Valid() {
			return nil, errorf(weir.CodeInvalidRequest, param, fmt.Sprintf("unknown callback event %q: the events a task may ask for are %q (terminal events are always sent)", n, weir.TaskEventProgress))
		}
		events = append(events, e)
	}
	slices.Sort(events)
	return slices.Compact(events), nil
}

// taskCaller authenticates a request to the task APIs, which need the
// task service.
func (s *Server) taskCaller(w http.ResponseWriter, r *http.Request) (weir.APIKey, error) {
	key, err := s.authenticate(w, r)
	if err != nil {
		return key, err
	}
	if aerr := s.tasksEnabled(); aerr != nil {
		return key, aerr
	}
	return key, nil
}

func (s *Server) tasksEnabled() *apiError {
	if s.deps.Tasks == nil {
		return errorf(weir.CodeNotFound, "", "tasks are not enabled on this gateway")
	}
	return nil
}

// submission is what a task submission says in its headers.
type submission struct {
	key            weir.APIKey
	idempotencyKey string
}

// beginSubmit authenticates a task submission and checks its headers,
// before its body is read.
func (s *Server) beginSubmit(w http.ResponseWriter, r *http.Request) (submission, error) {
	var sub submission
	var err error
	if sub.key, err = s.authenticate(w, r); err != nil {
		return sub, err
	}
	var aerr *apiError
	if sub.idempotencyKey, aerr = idempotencyKeyOf(r); aerr != nil {
		return sub, aerr
	}
	if aerr := s.tasksEnabled(); aerr != nil {
		return sub, aerr
	}
	return sub, nil
}

// submitTask is the shared part of POST /v1/videos and POST /v1/tasks:
// the model's name checked, the headers read, and the gateway's task
// front called (gateway.Tasks.Submit).
func (s *Server) submitTask(w http.ResponseWriter, r *http.Request, sub submission, kind string, input map[string]json.RawMessage, model string, cb taskCallback) (weir.Task, bool, error) {
	if model == "" {
		return weir.Task{}, false, errorf(weir.CodeInvalidRequest, "model", "you must provide a model parameter")
	}
	if len(model) > maxModelName {
		return weir.Task{}, false, errorf(weir.CodeInvalidRequest, "model", fmt.Sprintf("model is %d bytes long; at most %d are allowed", len(model), maxModelName))
	}
	ask, aerr := askOf(r)
	if aerr != nil {
		return weir.Task{}, false, aerr
	}
	ask.Model = model
	infoOf(w).access.model = model
	t, created, err := s.deps.Tasks.Submit(r.Context(), sub.key, gateway.TaskRequest{
		Kind: kind, Ask: ask, Input: input, IdempotencyKey: sub.idempotencyKey,
		CallbackURL: cb.URL, CallbackEvents: cb.Events, CallbackParam: cb.param,
	})
	var ge *gateway.Error
	if err != nil && !errors.As(err, &ge) {
		// Not the gateway's refusal: the store's failure, or ours.
		infoOf(w).log().Error("task submit failed", "error", err)
		return t, created, errorf(weir.CodeInternal, "", "could not submit the task")
	}
	return t, created, err
}

// ownTask loads a task the caller's key owns; others', and deleted ones,
// are not found.
func (s *Server) ownTask(w http.ResponseWriter, r *http.Request) (weir.Task, error) {
	key, err := s.taskCaller(w, r)
	if err != nil {
		return weir.Task{}, err
	}
	id := r.PathValue("id")
	t, err := s.deps.Tasks.Own(r.Context(), key, id)
	switch {
	case errors.Is(err, gateway.ErrTaskNotFound):
		return t, errorf(weir.CodeNotFound, "id", fmt.Sprintf("no task %q", id))
	case err != nil:
		infoOf(w).log().Error("task lookup failed", "error", err)
		return t, errorf(weir.CodeInternal, "", "task lookup failed")
	}
	return t, nil
}

// deletedObject is OpenAI's answer to DELETE /v1/videos/{id}, and the
// task API's to DELETE /v1/tasks/{id}.
type deletedObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// deleteTask is DELETE /v1/tasks/{id}, as deleteVideo: a task not yet
// finished is cancelled, a finished one has its upstream job deleted, and
// the task is gone afterwards.
func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request) error {
	return s.deleteOwnTask(w, r, "task")
}

// deleteOwnTask deletes the caller's task (gateway.Tasks.Delete) and
// answers {"id", "object": object+".deleted", "deleted": true}.
func (s *Server) deleteOwnTask(w http.ResponseWriter, r *http.Request, object string) error {
	t, err := s.ownTask(w, r)
	if err != nil {
		return err
	}
	if err := s.deps.Tasks.Delete(r.Context(), t); err != nil {
		switch {
		case errors.Is(err, gateway.ErrTaskNotFound):
			return errorf(weir.CodeNotFound, "id", fmt.Sprintf("no task %q", t.ID))
		case errors.Is(err, gateway.ErrUpstream):
			return errorf(weir.CodeUpstreamError, "", "could not delete the "+object+" upstream: "+causeOf(err).Error())
		}
		infoOf(w).log().Error(object+" delete failed", "task", t.ID, "error", err)
		return errorf(weir.CodeInternal, "", "could not delete the "+object)
	}
	writeJSON(w, http.StatusOK, deletedObject{ID: t.ID, Object: object + ".deleted", Deleted: true})
	return nil
}

// createTask is POST /v1/tasks; it authenticates before it reads the body.
func (s *Server) createTask(w http.ResponseWriter, r *http.Request) error {
	sub, err := s.beginSubmit(w, r)
	if err != nil {
		return err
	}
	body, aerr := s.readTaskBody(w, r)
	if aerr != nil {
		return aerr
	}
	model, _ := stringField(body, "model")
	var input map[string]json.RawMessage
	if raw, ok := body["input"]; !ok || json.Unmarshal(raw, &input) != nil || input == nil {
		return errorf(weir.CodeInvalidRequest, "input", "input must be a JSON object")
	}
	cb, aerr := callbackOf(r, body)
	if aerr != nil {
		return aerr
	}
	if aerr := runModeFields(r, body); aerr != nil {
		return aerr
	}
	t, created, err := s.submitTask(w, r, sub, "task", input, model, cb)
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
	}
	s.answerSubmission(w, r, t, created, status, s.taskOf(r.Context(), t))
	return nil
}

// runModeFields takes a task body's run_mode and run_id, which say what
// HeaderRunMode and HeaderRunID do: into r's headers, for the one check
// of both; a body and a header that differ are refused.
func runModeFields(r *http.Request, body map[string]json.RawMessage) *apiError {
	for _, f := range [...]struct{ field, header string }{{"run_mode", HeaderRunMode}, {"run_id", HeaderRunID}} {
		raw, ok := body[f.field]
		if !ok || string(raw) == "null" {
			continue
		}
		v, ok := stringField(body, f.field)
		switch {
		case !ok:
			return errorf(weir.CodeInvalidRequest, f.field, f.field+" must be a string")
		case r.Header.Get(f.header) != "" && r.Header.Get(f.header) != v:
			return errorf(weir.CodeInvalidRequest, f.field, f.field+" and the "+f.header+" header differ; give one of them")
		}
		r.Header.Set(f.header, v)
	}
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	t, err := s.ownTask(w, r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.taskOf(r.Context(), t))
	return nil
}

func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) error {
	t, err := s.ownTask(w, r)
	if err != nil {
		return err
	}
	t, err = s.deps.Tasks.Cancel(r.Context(), t.ID)
	if errors.Is(err, gateway.ErrTaskNotFound) {
		// Deleted or purged since ownTask found it.
		return errorf(weir.CodeNotFound, "id", fmt.Sprintf("no task %q", r.PathValue("id")))
	}
	if err != nil {
		infoOf(w).log().Error("task cancel failed", "error", err)
		return errorf(weir.CodeInternal, "", "could not cancel the task")
	}
	writeJSON(w, http.StatusOK, s.taskOf(r.Context(), t))
	return nil
}

// listTasks pages through the caller's own tasks, oldest first:
// ?after=<the previous page's cursor>&limit=N (1–1000, default 100), and
// ?status= one status (an unknown one is a 400).
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) error {
	key, err := s.taskCaller(w, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, aerr := listLimit(q.Get("limit"), 100, 1000)
	if aerr != nil {
		return aerr
	}
	f := weir.TaskFilter{KeyID: key.ID, Limit: limit + 1} // one more: is there a next page?
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errorf(weir.CodeInvalidRequest, "after", "after must be a cursor from a previous page")
		}
		f.AfterSeq = n
	}
	if v := q.Get("status"); v != "" {
		st := weir.TaskStatus(v)
		if !st.Valid() {
			return errorf(weir.CodeInvalidRequest, "status", fmt.Sprintf(
				"unknown status %q: one of queued, admitted, running, succeeded, failed, cancelled, expired", v))
		}
		f.Statuses = []weir.TaskStatus{st}
	}
	ts, err := s.deps.Tasks.List(r.Context(), f)
	if err != nil {
		infoOf(w).log().Error("task list failed", "error", err)
		return errorf(weir.CodeInternal, "", "could not list tasks")
	}
	out := struct {
		Object  string       `json:"object"`
		Data    []taskObject `json:"data"`
		HasMore bool         `json:"has_more"`
		After   string       `json:"after,omitempty"`
	}{Object: "list", Data: []taskObject{}}
	if len(ts) > limit {
		ts = ts[:limit]
		out.HasMore = true
		out.After = strconv.FormatInt(ts[len(ts)-1].Seq, 10)
	}
	for _, t := range ts {
		out.Data = append(out.Data, s.taskOf(r.Context(), t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listLimit reads a listing's ?limit=: def if empty, else 1 to most.
func listLimit(v string, def, most int) (int, *apiError) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, errorf(weir.CodeInvalidRequest, "limit", fmt.Sprintf("limit must be between 1 and %d", most))
	}
	return n, nil
}
