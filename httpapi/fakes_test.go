package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/gateway"
)

// fakeSecret is the one secret fakeGateway takes, for the key fakeKey.
const fakeSecret = "sk-fake"

var fakeKey = weir.APIKey{ID: "key_fake"}

// fakeGateway stands in for gateway.Service: it knows one key and one
// model, grants every request and serves none.
type fakeGateway struct{}

func (fakeGateway) Authenticate(_ context.Context, secret string) (weir.APIKey, error) {
	if secret != fakeSecret {
		return weir.APIKey{}, &gateway.Error{Category: gateway.ErrUnauthorized, Message: "invalid or missing API key"}
	}
	return fakeKey, nil
}

func (fakeGateway) Prepare(_ context.Context, key weir.APIKey, ask gateway.Ask) (gateway.Grant, error) {
	return gateway.Grant{Model: weir.Model{Name: ask.Model}, KeyID: key.ID}, nil
}

func (fakeGateway) Serve(context.Context, *gateway.Call, gateway.Answer) error {
	return &gateway.Error{Category: gateway.ErrNoCandidate, Message: "the fake serves nothing"}
}

func (fakeGateway) Models(weir.APIKey) []string { return []string{"v"} }
func (fakeGateway) Ready() error                { return nil }

// fakeTasks stands in for the task front: it records what it is asked
// and answers with err, if set.
type fakeTasks struct {
	mu  sync.Mutex
	got []gateway.TaskRequest
	err error
}

func (f *fakeTasks) Submit(_ context.Context, key weir.APIKey, req gateway.TaskRequest) (weir.Task, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, req)
	if f.err != nil {
		return weir.Task{}, false, f.err
	}
	return weir.Task{ID: "task_1", KeyID: key.ID, Kind: req.Kind, Model: req.Ask.Model, Status: weir.TaskQueued}, true, nil
}

func (f *fakeTasks) Own(context.Context, weir.APIKey, string) (weir.Task, error) {
	return weir.Task{}, f.err
}
func (f *fakeTasks) Get(context.Context, string) (weir.Task, error) { return weir.Task{}, f.err }
func (f *fakeTasks) List(context.Context, weir.TaskFilter) ([]weir.Task, error) {
	return nil, f.err
}
func (f *fakeTasks) Cancel(context.Context, string) (weir.Task, error) { return weir.Task{}, f.err }
func (f *fakeTasks) Delete(context.Context, weir.Task) error           { return f.err }
func (f *fakeTasks) Withdraw(context.Context, weir.Task) (bool, error) { return false, f.err }
func (f *fakeTasks) Position(context.Context, string) (admission.Position, bool) {
	return admission.Position{}, false
}
func (f *fakeTasks) Content(context.Context, weir.Task, string) (*http.Response, error) {
	return nil, f.err
}

// fakeBundle is the API over fakes, served in process, with its log.
type fakeBundle struct {
	h     http.Handler
	tasks *fakeTasks
	logs  *bytes.Buffer
	logMu *sync.Mutex
}

func setupFakes(t *testing.T, change func(*Config, *Deps)) *fakeBundle {
	t.Helper()
	b := &fakeBundle{tasks: &fakeTasks{}, logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	cfg := Config{AdminLoopback: true}
	deps := Deps{Gateway: fakeGateway{}, Tasks: b.tasks, Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: b.logs, mu: b.logMu}, nil))}
	if change != nil {
		change(&cfg, &deps)
	}
	b.h = New(cfg, deps).Handler()
	return b
}

func (b *fakeBundle) log() string {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	return b.logs.String()
}

// do serves one request from a loopback client with the fake's key.
func (b *fakeBundle) do(method, path, body string, h http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr, r.Host = "127.0.0.1:5000", "127.0.0.1:8080"
	r.Header.Set("Authorization", "Bearer "+fakeSecret)
	r.Header.Set("Content-Type", "application/json")
	for k, vs := range h {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	b.h.ServeHTTP(w, r)
	return w
}

func answerErr(t *testing.T, w *httptest.ResponseRecorder) errorDetail {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("answer %d is not in the error shape: %s", w.Code, w.Body)
	}
	return e.Error
}

// TestTaskSubmissionReachesFront: what a submission says in its body and
// headers reaches the task front as one TaskRequest.
func TestTaskSubmissionReachesFront(t *testing.T) {
	t.Parallel()
	b := setupFakes(t, nil)
	w := b.do(http.MethodPost, "/v1/tasks", `{"model":"v","input":{"prompt":"p"},"run_mode":"simulation"}`, http.Header{
		HeaderCallbackURL: {"https://hooks.example.com/a"}, HeaderCallbackEvents: {"progress"},
		HeaderIdempotencyKey: {"k1"}, HeaderPriority: {"-1"}, HeaderMaxWait: {"3s"},
	})
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	got := b.tasks.got[0]
	if got.Kind != "task" || got.Ask.Model != "v" || got.Ask.RunMode != "simulation" || got.Ask.Priority != "-1" || got.Ask.MaxWait != "3s" ||
		got.CallbackURL != "https://hooks.example.com/a" || got.CallbackParam != HeaderCallbackURL ||
		len(got.CallbackEvents) != 1 || got.CallbackEvents[0] != weir.TaskEventProgress || got.IdempotencyKey != "k1" || string(got.Input["prompt"]) != `"p"` {
		t.Errorf("the front got %+v", got)
	}
}

// TestTaskStoreFailures: a failure of the task service that is not the
// gateway's refusal is answered internal_error, in the endpoint's words,
// with nothing of its text, and logged.
func TestTaskStoreFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, path, body string
		msg, logged        string
	}{
		{http.MethodPost, "/v1/tasks", `{"model":"v","input":{}}`, "could not submit the task", "task submit failed"},
		{http.MethodPost, "/v1/videos", `{"model":"v","prompt":"p"}`, "could not submit the task", "task submit failed"},
		{http.MethodGet, "/v1/tasks/task_1", "", "task lookup failed", "task lookup failed"},
		{http.MethodGet, "/v1/tasks", "", "could not list tasks", "task list failed"},
		{http.MethodGet, "/v1/videos?after=video_1", "", "video lookup failed", "video lookup failed"},
	} {
		b := setupFakes(t, nil)
		b.tasks.err = errors.New("disk full")
		w := b.do(tc.method, tc.path, tc.body, nil)
		e := answerErr(t, w)
		if w.Code != http.StatusInternalServerError || e.Code != string(weir.CodeInternal) || e.Message != tc.msg {
			t.Errorf("%s %s: %d %s %q, want 500 internal_error %q", tc.method, tc.path, w.Code, e.Code, e.Message, tc.msg)
		}
		if log := b.log(); !strings.Contains(log, tc.logged) || !strings.Contains(log, "disk full") {
			t.Errorf("%s %s: log %q, want %q with the cause", tc.method, tc.path, log, tc.logged)
		}
	}
}

// TestTaskFrontRefusal: the front's refusal is answered in its
// category, naming its parameter, and not logged but for its access
// log line.
func TestTaskFrontRefusal(t *testing.T) {
	t.Parallel()
	b := setupFakes(t, nil)
	b.tasks.err = &gateway.Error{Category: gateway.ErrIdempotencyKeyReused, Param: HeaderIdempotencyKey, Message: "used"}
	w := b.do(http.MethodPost, "/v1/tasks", `{"model":"v","input":{}}`, nil)
	if e := answerErr(t, w); w.Code != http.StatusUnprocessableEntity || e.Param == nil || *e.Param != HeaderIdempotencyKey {
		t.Errorf("%d %+v, want 422 naming %s", w.Code, e, HeaderIdempotencyKey)
	}
	if log := b.log(); strings.Contains(log, "level=ERROR") || strings.Contains(log, "level=WARN") {
		t.Errorf("a refusal was logged beyond its access log line: %s", log)
	}
}

// TestNodesAndRelay: /admin/nodes lists what Nodes says; the relay
// takes runs at its path, and without one the path is not served.
func TestNodesAndRelay(t *testing.T) {
	t.Parallel()
	relayed := 0
	b := setupFakes(t, func(_ *Config, d *Deps) {
		d.Nodes = func(context.Context) []weir.NodeView {
			return []weir.NodeView{{ID: "n1", Name: "gpu-box", Connected: true, Providers: []weir.ProviderView{{ID: "gpu", Models: []string{"m"}}}}}
		}
		d.Relay, d.RelayPath = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { relayed++ }), "/internal/relay"
	})
	w := b.do(http.MethodGet, "/admin/nodes", "", nil)
	var out NodesView
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Nodes) != 1 || out.Nodes[0].Name != "gpu-box" || out.Nodes[0].Providers[0].ID != "gpu" {
		t.Errorf("/admin/nodes: %d %s", w.Code, w.Body)
	}
	if w := b.do(http.MethodPost, "/internal/relay", "{}", nil); w.Code != http.StatusOK || relayed != 1 {
		t.Errorf("relay: %d, relayed %d", w.Code, relayed)
	}
	bare := setupFakes(t, nil)
	if w := bare.do(http.MethodPost, "/internal/relay", "{}", nil); w.Code != http.StatusNotFound {
		t.Errorf("relay path without a relay: %d", w.Code)
	}
	if w := bare.do(http.MethodGet, "/admin/nodes", "", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"nodes":[]`) {
		t.Errorf("/admin/nodes without nodes: %d %s", w.Code, w.Body)
	}
}

// fakeBudgets keeps budgets in a map, as the stores do: one per ID and
// per subject and window length; err, if set, fails every call.
type fakeBudgets struct {
	mu  sync.Mutex
	bs  map[string]weir.Budget
	err error
}

var _ Budgets = (*fakeBudgets)(nil)

func (f *fakeBudgets) BudgetCreate(_ context.Context, b weir.Budget) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if err := b.ValidateStored(); err != nil {
		return err
	}
	for _, o := range f.bs {
		if o.ID == b.ID || o.Subject == b.Subject && o.Window.String() == b.Window.String() {
			return weir.ErrConflict
		}
	}
	if f.bs == nil {
		f.bs = map[string]weir.Budget{}
	}
	f.bs[b.ID] = b
	return nil
}

func (f *fakeBudgets) BudgetGet(_ context.Context, id string) (weir.Budget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.bs[id]
	switch {
	case f.err != nil:
		return weir.Budget{}, f.err
	case !ok:
		return weir.Budget{}, weir.ErrNotFound
	}
	return b, nil
}

func (f *fakeBudgets) BudgetList(_ context.Context, filter weir.BudgetFilter) ([]weir.Budget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []weir.Budget
	for _, id := range slices.Sorted(maps.Keys(f.bs)) {
		if b := f.bs[id]; filter.Subject == (weir.BudgetSubject{}) || b.Subject == filter.Subject {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeBudgets) BudgetUpdate(_ context.Context, p *weir.BudgetUpdateParams) (weir.Budget, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.bs[p.ID]
	switch {
	case f.err != nil:
		return weir.Budget{}, f.err
	case p.Validate() != nil:
		return weir.Budget{}, p.Validate()
	case !ok:
		return weir.Budget{}, weir.ErrNotFound
	}
	if p.Amount != nil {
		b.Amount = *p.Amount
	}
	if p.Mode != nil {
		b.Mode = *p.Mode
	}
	if p.Alerts != nil {
		b.Alerts = *p.Alerts
	}
	b.UpdatedAt = p.At
	f.bs[p.ID] = b
	return b, nil
}

func (f *fakeBudgets) BudgetDelete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if _, ok := f.bs[id]; !ok {
		return weir.ErrNotFound
	}
	delete(f.bs, id)
	return nil
}

// TestForgetNode: POST /admin/nodes/{node}/forget answers what
// ForgetNode did: the node's retired scopes; not_found for a node it
// does not know (or with no edge listener), invalid_request for a
// connected one, internal_error (logged) when the engine failed.
func TestForgetNode(t *testing.T) {
	t.Parallel()
	var asked []string
	b := setupFakes(t, func(_ *Config, d *Deps) {
		d.ForgetNode = func(_ context.Context, node string) (weir.ForgottenNode, error) {
			asked = append(asked, node)
			switch node {
			case "gpu-box":
				return weir.ForgottenNode{ID: "node_0123456789ab", Name: "gpu-box", Scopes: []string{"node:node_0123456789ab/gpu"}}, nil
			case "live":
				return weir.ForgottenNode{}, fmt.Errorf("connected: %w", weir.ErrConflict)
			case "broken":
				return weir.ForgottenNode{}, errors.New("the leader is out of reach")
			}
			return weir.ForgottenNode{}, fmt.Errorf("no such node: %w", weir.ErrNotFound)
		}
	})
	w := b.do(http.MethodPost, "/admin/nodes/gpu-box/forget", "", nil)
	var f weir.ForgottenNode
	if err := json.Unmarshal(w.Body.Bytes(), &f); w.Code != http.StatusOK || err != nil || f.Name != "gpu-box" || len(f.Scopes) != 1 {
		t.Errorf("forget a gone node: %d %s", w.Code, w.Body)
	}
	for _, tc := range []struct {
		node   string
		status int
		code   weir.Code
	}{
		{"live", http.StatusBadRequest, weir.CodeInvalidRequest},
		{"nobody", http.StatusNotFound, weir.CodeNotFound},
		{"broken", http.StatusInternalServerError, weir.CodeInternal},
	} {
		w := b.do(http.MethodPost, "/admin/nodes/"+tc.node+"/forget", "", nil)
		if e := answerErr(t, w); w.Code != tc.status || e.Code != string(tc.code) || !strings.Contains(e.Message, tc.node) {
			t.Errorf("forget %s: %d %s %q, want %d %s naming it", tc.node, w.Code, e.Code, e.Message, tc.status, tc.code)
		}
	}
	if !strings.Contains(b.log(), "the leader is out of reach") {
		t.Errorf("the engine's failure was not logged: %s", b.log())
	}
	if want := []string{"gpu-box", "live", "nobody", "broken"}; !slices.Equal(asked, want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	bare := setupFakes(t, nil)
	if w := bare.do(http.MethodPost, "/admin/nodes/gpu-box/forget", "", nil); w.Code != http.StatusNotFound {
		t.Errorf("forget without an edge listener: %d %s", w.Code, w.Body)
	}
}
