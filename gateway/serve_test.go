package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/sqlite"
)

// testBundle is the service over a memory engine on a fake clock, a temp
// SQLite store for its keys and overrides, and the mock provider on a real listener as
// its upstream (whose adapters a test may replace with fake executors),
// with its metrics and logs recorded.
type testBundle struct {
	svc     *Service
	engine  *admission.Memory
	clock   *clock.Fake
	store   *sqlite.DB
	metrics *countingMetrics
	logs    *lockedBuffer
	// events receives the engine's events (buffered; dropped when full).
	events chan admission.Event
	// upstream is the mock provider's base URL.
	upstream string
}

type setupOpts struct {
	// engine, if set, wraps the engine the service uses.
	engine func(admission.Engine) admission.Engine
	// cfg is the service's Config.
	cfg Config
	// mock configures the mock provider.
	mock mock.Config
	// catalog, if set, changes the catalog applied: platforms "up" and
	// "up2" (both the mock), platform models "up/m" (tried first) and
	// "up2/m", model "m" over both.
	catalog func(*weir.Catalog)
	// nodes, if set, are the service's edge nodes.
	nodes Nodes
	// events, if set, receives the service's operator events.
	events OperatorEvents
	// journal, if set, records the budgets' reservations.
	journal Journal
	// affinity, if set, shares the affinity table.
	affinity AffinityShare
	// leaderPlansNewKinds is Deps.LeaderPlansNewKinds.
	leaderPlansNewKinds func() bool
	// clock, if set, is the service's clock over the bundle's fake one.
	clock func(*clock.Fake) clock.Clock
}

func setup(t testing.TB, o setupOpts) *testBundle {
	t.Helper()
	up := httptest.NewServer(mock.New(o.mock))
	t.Cleanup(up.Close)
	clk := clock.NewFake(time.Now())
	b := &testBundle{clock: clk, metrics: &countingMetrics{}, logs: &lockedBuffer{},
		events: make(chan admission.Event, 1024), upstream: up.URL + "/v1"}
	b.engine = admission.NewMemory(admission.Options{Clock: clk, Observer: admission.ObserverFunc(func(e admission.Event) {
		select {
		case b.events <- e:
		default:
		}
	})})
	t.Cleanup(b.engine.Close)
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b.store = db
	var eng admission.Engine = b.engine
	if o.engine != nil {
		eng = o.engine(eng)
	}
	var svcClock clock.Clock = clk
	if o.clock != nil {
		svcClock = o.clock(clk)
	}
	b.svc = New(o.cfg, Deps{Engine: eng, Keys: db, Overrides: db, Budgets: db, Events: o.events, Journal: o.journal, Affinity: o.affinity, LeaderPlansNewKinds: o.leaderPlansNewKinds, Clock: svcClock, Metrics: b.metrics, Nodes: o.nodes, Logger: slog.New(slog.NewJSONHandler(b.logs, nil))})
	cat := b.catalog()
	if o.catalog != nil {
		o.catalog(&cat)
	}
	if err := b.svc.Apply(t.Context(), cat, ""); err != nil {
		t.Fatal(err)
	}
	return b
}

// catalog is the bundle's default catalog.
func (b *testBundle) catalog() weir.Catalog {
	return weir.Catalog{
		Platforms: []weir.Platform{
			{Name: "up", Kind: "openai", BaseURL: b.upstream},
			{Name: "up2", Kind: "openai", BaseURL: b.upstream},
		},
		PlatformModels: []weir.PlatformModel{
			{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"},
			{Name: "up2/m", Platform: "up2", Upstream: "gpt-4o-mini"},
		},
		Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{
			{PlatformModel: "up/m", Priority: 2, Weight: 1},
			{PlatformModel: "up2/m", Priority: 1, Weight: 1},
		}}},
	}
}

// onlyUp leaves the catalog one platform model, up/m.
func onlyUp(c *weir.Catalog) {
	c.Platforms, c.PlatformModels = c.Platforms[:1], c.PlatformModels[:1]
	c.Models[0].Candidates = c.Models[0].Candidates[:1]
}

// waitEvent waits for the engine's next event with outcome o.
func (b *testBundle) waitEvent(t *testing.T, o admission.Outcome) admission.Event {
	t.Helper()
	for {
		select {
		case e := <-b.events:
			if e.Outcome == o {
				return e
			}
		case <-t.Context().Done():
			t.Fatalf("no event %v", o)
		}
	}
}

// scope is the engine's stats of scope.
func (b *testBundle) scope(t *testing.T, scope string) admission.ScopeStats {
	t.Helper()
	st, err := b.engine.Scope(context.Background(), scope)
	if err != nil {
		t.Fatalf("scope %s: %v", scope, err)
	}
	return st
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
	return &Call{RequestID: "req_1", Path: "/chat/completions",
		Grant: Grant{Snapshot: st, Model: m, KeyID: k.ID, Group: group, Deadline: b.clock.Now().Add(time.Minute), MaxWait: time.Minute},
		Body:  rawBody(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), Tokens: 10}
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
	paused  []string // "pm paused" / "pm resumed", in order
	// affinity counts the Affinity results.
	affinity map[string]int
	// skipped counts the TaskCandidateSkipped reasons.
	skipped map[string]int
}

func (m *countingMetrics) TaskCandidateSkipped(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.skipped == nil {
		m.skipped = map[string]int{}
	}
	m.skipped[reason]++
}

func (m *countingMetrics) Affinity(model, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.affinity == nil {
		m.affinity = map[string]int{}
	}
	m.affinity[result]++
}

func (m *countingMetrics) UpstreamPaused(pm string, paused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = append(m.paused, pm+map[bool]string{true: " paused", false: " resumed"}[paused])
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
	b := setup(t, setupOpts{catalog: onlyUp})
	if err := b.engine.SetScope(t.Context(), weir.PlatformModelScope("up/m"), admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	held, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "hold", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: weir.PlatformModelScope("up/m"), Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.engine.Release(t.Context(), held.ID, held.Owner) }()
	c := b.chat(t)
	c.Deadline = b.clock.Now().Add(-time.Second)
	err = b.svc.Serve(t.Context(), c, &recordedAnswer{})
	var ge *Error
	if !errors.Is(err, ErrQueueTimeout) || !errors.As(err, &ge) || !errors.Is(err, admission.ErrTimeout) {
		t.Fatalf("Serve: %v; want ErrQueueTimeout wrapping the engine's", err)
	}
	if c.Usage.Outcome != "queue_timeout" {
		t.Errorf("outcome %q", c.Usage.Outcome)
	}
}

// TestHeadOfAsGet: headOf reads an answer's headers, as the transport
// stores them whatever case the upstream wrote, as Header.Get does.
func TestHeadOfAsGet(t *testing.T) {
	t.Parallel()
	raw := "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nCONTENT-DISPOSITION: attachment\r\ncache-Control: no-store\r\nContent-Length: 0\r\n\r\n"
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := headOf(&Call{}, resp)
	want := []string{resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"), resp.Header.Get("Cache-Control")}
	if got.ContentType != want[0] || got.ContentDisposition != want[1] || got.CacheControl != want[2] || want[2] != "no-store" {
		t.Errorf("headOf = %q, %q, %q; Header.Get: %q", got.ContentType, got.ContentDisposition, got.CacheControl, want)
	}
}
