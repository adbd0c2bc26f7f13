package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider/mock"
)

// testBundle is the service over a memory engine and the mock provider on
// a real listener, with its metrics and logs recorded.
type testBundle struct {
	svc     *Service
	engine  *admission.Memory
	metrics *countingMetrics
	logs    *lockedBuffer
}

type setupOpts struct {
	// engine, if set, wraps the engine the service uses.
	engine func(admission.Engine) admission.Engine
}

func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	up := httptest.NewServer(mock.New(mock.Config{}))
	t.Cleanup(up.Close)
	b := &testBundle{engine: admission.NewMemory(admission.Options{}), metrics: &countingMetrics{}, logs: &lockedBuffer{}}
	t.Cleanup(b.engine.Close)
	var eng admission.Engine = b.engine
	if o.engine != nil {
		eng = o.engine(eng)
	}
	b.svc = New(Config{}, Deps{Engine: eng, Metrics: b.metrics, Logger: slog.New(slog.NewJSONHandler(b.logs, nil))})
	cat := weir.Catalog{
		Platforms:      []weir.Platform{{Name: "up", Kind: "openai", BaseURL: up.URL + "/v1"}},
		PlatformModels: []weir.PlatformModel{{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"}},
		Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "up/m", Weight: 1}}}},
	}
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	return b
}

// chat is a chat Call of key k on model m.
func (b *testBundle) chat(t *testing.T) *Call {
	t.Helper()
	st := b.svc.Snapshot()
	m, _ := st.Model("m")
	k := weir.APIKey{ID: "key_1"}
	if err := b.svc.EnsureKeyScope(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	group, _ := st.GroupOf(k)
	return &Call{RequestID: "req_1", Snapshot: st, Model: m, KeyID: k.ID, Group: group, Path: "/chat/completions",
		Body: rawBody(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), Tokens: 10,
		Deadline: time.Now().Add(time.Minute)}
}

type rawBody string

func (r rawBody) WithModel(upstream string) ([]byte, error) {
	return []byte(strings.Replace(string(r), `"model":"m"`, `"model":"`+upstream+`"`, 1)), nil
}

// recordedAnswer is an Answer that keeps what it was given.
type recordedAnswer struct {
	head    *Head
	body    bytes.Buffer
	streamE error
}

func (a *recordedAnswer) Start(h Head)                { a.head = &h }
func (a *recordedAnswer) Write(p []byte) (int, error) { return a.body.Write(p) }
func (a *recordedAnswer) Flush() error                { return nil }
func (a *recordedAnswer) StreamError(err error)       { a.streamE = err }

type countingMetrics struct {
	mu      sync.Mutex
	dropped map[string]int
}

func (m *countingMetrics) ObserveUpstream(string, string, time.Duration) {}
func (m *countingMetrics) ObserveQueueWait(string, time.Duration)        {}
func (m *countingMetrics) DroppedError(op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dropped == nil {
		m.dropped = map[string]int{}
	}
	m.dropped[op]++
}

func (m *countingMetrics) count(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped[op]
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeAnswersAndReleases: a request is admitted, served by the
// upstream, its answer passed to the Answer with its head, its usage
// filled in, and its lease given back.
func TestServeAnswersAndReleases(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := b.chat(t)
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), c, &out); err != nil {
		t.Fatal(err)
	}
	if out.head == nil || out.head.Status != http.StatusOK || !strings.HasPrefix(out.head.ContentType, "application/json") {
		t.Fatalf("head %+v", out.head)
	}
	if !strings.Contains(out.body.String(), `"choices"`) {
		t.Errorf("body %s", out.body.String())
	}
	if c.Usage.Outcome != "ok" || c.Usage.PlatformModel != "up/m" || c.Usage.PromptTokens+c.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v", c.Usage)
	}
	st, err := b.engine.Scope(t.Context(), weir.PlatformModelScope("up/m"))
	if err != nil || st.Used != 0 || st.Leases != 0 {
		t.Errorf("platform model scope after the request: %+v, %v; want nothing held", st, err)
	}
}

// failingRelease is an engine whose Release gives the lease back but
// reports a failure, as a fenced owner's would.
type failingRelease struct{ admission.Engine }

func (f failingRelease) Release(ctx context.Context, id admission.LeaseID, owner admission.Owner) error {
	_ = f.Engine.Release(ctx, id, owner)
	return errors.New("release refused")
}

// TestReleaseFailureIsCountedAndLogged: an error from Release does not
// change the answer, and is neither dropped silently: it is logged with
// the request's id and counted.
func TestReleaseFailureIsCountedAndLogged(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{engine: func(e admission.Engine) admission.Engine { return failingRelease{e} }})
	var out recordedAnswer
	if err := b.svc.Serve(t.Context(), b.chat(t), &out); err != nil || out.head == nil {
		t.Fatalf("Serve: %v, head %+v", err, out.head)
	}
	if got := b.metrics.count("release"); got != 1 {
		t.Errorf("dropped release errors counted %d, want 1", got)
	}
	if l := b.logs.String(); !strings.Contains(l, "release refused") || !strings.Contains(l, `"request_id":"req_1"`) {
		t.Errorf("logs: %s", l)
	}
}

// TestServeMapsAdmissionErrors: a wait that runs out comes back as the
// service's own ErrQueueTimeout, with the engine's error as its cause,
// and the request's outcome says so.
func TestServeMapsAdmissionErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if err := b.engine.SetScope(t.Context(), weir.PlatformModelScope("up/m"), admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	held, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "hold", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: weir.PlatformModelScope("up/m"), Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.engine.Release(t.Context(), held.ID, held.Owner) }()
	c := b.chat(t)
	c.Deadline = time.Now().Add(-time.Second)
	err = b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var ge *Error
	if !errors.Is(err, ErrQueueTimeout) || !errors.As(err, &ge) || !errors.Is(err, admission.ErrTimeout) {
		t.Fatalf("Serve: %v; want ErrQueueTimeout wrapping the engine's", err)
	}
	if c.Usage.Outcome != "queue_timeout" {
		t.Errorf("outcome %q", c.Usage.Outcome)
	}
}
