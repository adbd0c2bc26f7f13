package task

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/riverjob"
	"github.com/weir-gateway/weir/sqlite"
	"github.com/weir-gateway/weir/webhook"
)

// The test bundle, in the manner of River's testBundle: setup returns a
// running Service and what it runs on — a SQLite file with River's
// tables, a real admission engine, a planner over mock video platforms
// (provider/mock behind httptest, spoken to by the real OpenAI video
// adapter) and one fake clock shared by the service, the engine and the
// mocks' jobs. River runs for real, on the wall clock, fetching often.
//
// Time in the fake clock moves only when a test moves it: drive advances
// it to the service's own next timer (a wait for a poll, a backoff before
// a task queues again) whenever one is pending, so a test runs a task's
// whole life in milliseconds; the engine's timers (a task's deadline)
// fall due only when the clock passes them.

// testStart is the fake clock's reading when a bundle is set up.
var testStart = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// waitBound bounds every wait of a test on the wall clock: far beyond
// what anything takes on a loaded machine.
const waitBound = 30 * time.Second

// driveBound bounds a drive's wall time in all (drive).
const driveBound = 3 * time.Minute

type setupOpts struct {
	// Platforms are the mock platforms by platform model ("vid/a"), each
	// with its mock's config. Default: "vid/a", instant jobs.
	Platforms map[string]mock.Config
	// Models maps a task's model to its candidates, platform models in
	// preference order. Default: "sora-2" to every platform, by name.
	Models map[string][]string
	// Limits are the platform models' scope limits; default 0, unlimited.
	Limits map[string]int64
	// Config is the service's; setup sets Clock, and shortens
	// FetchPollInterval (10ms) and PollMax (2s: each wait for a poll is
	// waited in process, and a job snoozes, on the wall clock, only once
	// an execution has waited holdFor) where they are zero.
	Config Config
	// NoStart leaves the service unstarted.
	NoStart bool
	// Callbacks turns webhook delivery on: signed, and allowed to reach
	// receivers on loopback (httptest's).
	Callbacks bool
	// Logger is the service's; default none.
	Logger *slog.Logger
}

type testBundle struct {
	// ended are the tasks the service said ended (Deps.Ended), in order.
	endedMu sync.Mutex
	ended   []weir.Task

	store *sqlite.DB
	// served is the store as the service sees it, which can be made to
	// fail.
	served  *testStore
	engine  *admission.Memory
	clock   *testClock
	planner *testPlanner
	// up are the mock platforms by platform model.
	up     map[string]*testUpstream
	key    weir.APIKey
	cfg    Config
	hooks  Webhooks
	logger *slog.Logger
	limits map[string]int64
}

// testUpstream is one mock platform: its server, on the bundle's fake
// clock, and what every request to it gets (inject, if set).
type testUpstream struct {
	srv *mock.Server
	ts  *httptest.Server
	// adapter speaks to it as the service does, with the test's own
	// credential: a job it submits is not the service's.
	adapter *provider.OpenAIVideo

	mu     sync.Mutex
	inject func(*http.Request)
}

// setInject makes every later request of the service to the platform
// pass through f first (to add X-Mock-Status, say); nil: none.
func (u *testUpstream) setInject(f func(*http.Request)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.inject = f
}

func (u *testUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	u.mu.Lock()
	f := u.inject
	u.mu.Unlock()
	if f != nil {
		r = r.Clone(r.Context())
		f(r)
	}
	return u.ts.Client().Transport.RoundTrip(r)
}

// jobKeys are the Idempotency-Keys of the upstream's jobs, in the order
// they were submitted: the tasks' ids.
func (u *testUpstream) jobKeys() []string {
	var keys []string
	for _, j := range u.srv.Jobs() {
		keys = append(keys, j.IdempotencyKey)
	}
	return keys
}

// jobByKey returns the upstream job submitted with Idempotency-Key key.
func (u *testUpstream) jobByKey(t *testing.T, key string) mock.JobInfo {
	t.Helper()
	for _, j := range u.srv.Jobs() {
		if j.IdempotencyKey == key {
			return j
		}
	}
	t.Fatalf("no upstream job with Idempotency-Key %s; jobs %+v", key, u.srv.Jobs())
	return mock.JobInfo{}
}

func setup(t *testing.T, opts setupOpts) (*Service, *testBundle) {
	t.Helper()
	ctx := t.Context()
	if opts.Platforms == nil {
		opts.Platforms = map[string]mock.Config{"vid/a": {}}
	}
	if opts.Models == nil {
		var all []string
		for pm := range opts.Platforms {
			all = append(all, pm)
		}
		slices.Sort(all)
		opts.Models = map[string][]string{"sora-2": all}
	}
	fake := clock.NewFake(testStart)
	b := &testBundle{clock: newTestClock(fake), up: map[string]*testUpstream{}, limits: opts.Limits}

	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := riverjob.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	b.store = db
	b.served = &testStore{DB: db}
	b.key = weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: testStart}
	if err := db.KeyCreate(ctx, b.key); err != nil {
		t.Fatal(err)
	}

	b.planner = &testPlanner{models: opts.Models, targets: map[string]Target{}}
	for pm, mc := range opts.Platforms {
		u := &testUpstream{srv: mock.NewWithClock(mc, fake.Now)}
		u.ts = httptest.NewServer(u.srv)
		t.Cleanup(u.ts.Close)
		u.adapter = &provider.OpenAIVideo{BaseURL: u.ts.URL + "/v1", APIKey: "sk-test-own", Client: u.ts.Client()}
		b.up[pm] = u
		b.planner.targets[pm] = Target{PlatformModel: pm, Upstream: "sora-2", Site: "site-" + pm,
			Adapter: &provider.OpenAIVideo{BaseURL: u.ts.URL + "/v1", APIKey: "sk-" + pm, Client: &http.Client{Transport: u}}}
	}

	cfg := opts.Config
	cfg.Clock = b.clock
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = 10 * time.Millisecond
	}
	if cfg.PollMax == 0 {
		cfg.PollMax = 2 * time.Second
	}
	if cfg.Owner.ID == "" {
		cfg.Owner = admission.Owner{ID: "weir-test", Gen: 1}
	}
	b.cfg = cfg
	b.logger = opts.Logger
	if opts.Callbacks {
		secret, err := webhook.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		signer, err := webhook.NewSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		b.hooks = Webhooks{Sender: webhook.NewSender(webhook.Config{AllowLoopback: true}), Signer: signer}
	}
	s := b.newService(t)
	if !opts.NoStart {
		b.start(t, s)
	}
	return s, b
}

// newService makes a fresh engine, as a new process has, and a Service
// on it and the bundle's store, not started.
func (b *testBundle) newService(t *testing.T) *Service {
	t.Helper()
	b.engine = admission.NewMemory(admission.Options{Clock: b.clock.Fake})
	t.Cleanup(b.engine.Close)
	for pm := range b.up {
		for _, scope := range []string{weir.PlatformModelScope(pm), weir.AcceptanceScope(weir.PlatformModelScope(pm))} {
			if err := b.engine.SetScope(t.Context(), scope, admission.ScopeConfig{Limit: b.limits[pm]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := New(b.cfg, Deps[*sql.Tx]{Store: b.served, Engine: b.engine, Planner: b.planner, Webhooks: b.hooks, Logger: b.logger,
		Ended: func(t weir.Task) {
			b.endedMu.Lock()
			defer b.endedMu.Unlock()
			b.ended = append(b.ended, t)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start starts s, and stops it when the test ends.
func (b *testBundle) start(t *testing.T, s *Service) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
}

// restart stops s and starts a new Service on the same store, with a new
// engine, as a restarted process would.
func (b *testBundle) restart(t *testing.T, s *Service) *Service {
	t.Helper()
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.engine.Close()
	b.cfg.Owner.Gen++
	s2 := b.newService(t)
	b.start(t, s2)
	return s2
}

// submit submits a task of model sora-2 (unless edit changes it) and
// fails the test if it is not created.
func (b *testBundle) submit(t *testing.T, s *Service, edit func(*weir.Task)) weir.Task {
	t.Helper()
	tk := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"a heron at dawn","seconds":"4"}`)}
	if edit != nil {
		edit(&tk)
	}
	created, err := s.Submit(t.Context(), &tk)
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v; want created", created, err)
	}
	return tk
}

// get reads a task from the store.
func (b *testBundle) get(t *testing.T, id string) weir.Task {
	t.Helper()
	tk, err := b.store.TaskGet(context.Background(), id)
	if err != nil {
		t.Fatalf("TaskGet(%s): %v", id, err)
	}
	return tk
}

// hold takes n of a platform model's capacity for the test, as another
// request would; release gives it back.
func (b *testBundle) hold(t *testing.T, pm string, n int64) (release func()) {
	t.Helper()
	l, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "test-hold-" + pm, Owner: admission.Owner{ID: "test"},
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: weir.PlatformModelScope(pm), Amount: n}}}}})
	if err != nil {
		t.Fatalf("hold %d of %s: %v", n, pm, err)
	}
	return func() {
		if err := b.engine.Release(context.Background(), l.ID, l.Owner); err != nil {
			t.Errorf("release the test's hold: %v", err)
		}
	}
}

// used is how much of scope is held.
func (b *testBundle) used(t *testing.T, scope string) int64 {
	t.Helper()
	st, err := b.engine.Scope(t.Context(), scope)
	if err != nil {
		t.Fatal(err)
	}
	return st.Used
}

// drive waits until cond holds, moving the fake clock to the service's
// next timer whenever one is pending. It fails after waitBound of wall
// time with no timer to move the clock to, or after driveBound in all: a
// drive through several tasks' jobs on a loaded machine may take longer
// than waitBound while it keeps moving.
func (b *testBundle) drive(t *testing.T, what string, cond func() bool) {
	t.Helper()
	begin := time.Now()
	moved := begin // when drive last moved the clock
	for {
		// A timer is set after what led to it is stored: seen pending,
		// the state it follows is visible to cond.
		at, pending := b.clock.next()
		if cond() {
			return
		}
		if now := time.Now(); now.Sub(moved) > waitBound || now.Sub(begin) > driveBound {
			t.Fatalf("%s: not within %s, %s since the clock last moved (fake clock at +%s, service timer pending: %v)",
				what, now.Sub(begin).Round(time.Millisecond), now.Sub(moved).Round(time.Millisecond), b.clock.Now().Sub(testStart), pending)
		}
		if pending {
			b.clock.Set(at)
			moved = time.Now()
			continue
		}
		select {
		case <-b.clock.set:
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitFor waits until cond holds without moving the clock, for at most
// waitBound of wall time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitBound)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// driveTo drives until task id is in one of statuses and returns it.
func (b *testBundle) driveTo(t *testing.T, id string, statuses ...weir.TaskStatus) weir.Task {
	t.Helper()
	var tk weir.Task
	b.drive(t, "task "+id+" to "+string(statuses[0]), func() bool {
		tk = b.get(t, id)
		return slices.Contains(statuses, tk.Status)
	})
	return tk
}

// testClock is the bundle's fake clock, seen by the service through a
// wrapper that keeps the service's pending timers, so that drive can move
// the clock to the next of them.
type testClock struct {
	*clock.Fake
	set chan struct{}

	mu      sync.Mutex
	pending map[*testTimer]time.Time
	// polls counts the timers armed for the fleet ledger's next poll (a
	// wait within FleetPoll's range, fleetTestPoll in the fleet tests).
	polls atomic.Int64
	// longest is the longest wait a timer was armed for.
	longest atomic.Int64
	// pollAt is when the last timer counted in polls falls due.
	pollAt atomic.Pointer[time.Time]
}

func newTestClock(f *clock.Fake) *testClock {
	return &testClock{Fake: f, set: make(chan struct{}, 1), pending: map[*testTimer]time.Time{}}
}

type testTimer struct {
	c     *testClock
	inner clock.Timer
}

func (c *testClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	tm := &testTimer{c: c}
	if d >= fleetTestPoll/2 && d < fleetTestPoll*3/2 {
		at := c.Now().Add(d)
		c.pollAt.Store(&at)
		c.polls.Add(1)
	}
	for l := c.longest.Load(); int64(d) > l && !c.longest.CompareAndSwap(l, int64(d)); l = c.longest.Load() {
	}
	c.mu.Lock()
	c.pending[tm] = c.Now().Add(d)
	c.mu.Unlock()
	tm.inner = c.Fake.AfterFunc(d, func() {
		c.done(tm)
		f()
	})
	select {
	case c.set <- struct{}{}:
	default:
	}
	return tm
}

func (c *testClock) done(tm *testTimer) {
	c.mu.Lock()
	delete(c.pending, tm)
	c.mu.Unlock()
}

func (tm *testTimer) Stop() bool {
	tm.c.done(tm)
	return tm.inner.Stop()
}

// next is when the service's earliest pending timer falls due.
func (c *testClock) next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for _, at := range c.pending {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// testPlanner plans each model's candidates from a map, one platform
// model's scope each, and hears the upstream's health.
type testPlanner struct {
	mu      sync.Mutex
	models  map[string][]string
	targets map[string]Target
	health  []healthReport
	pauses  []string // "pm for d", from PauseUpstream
	// fail, while set, is what every Plan returns.
	fail error
	// queues are the River queues of the jobs of tasks admitted to a
	// platform model (Queuer); none: the default.
	queues map[string]string
	// retireAt are the platform models that leave the catalog as a step
	// first asks for their target (retireAtStep).
	retireAt map[string]bool
	// sites are the targets TargetAt finds by site once a platform
	// model is no longer on it (site_test.go).
	sites map[string]Target
}

func (p *testPlanner) JobQueue(pm string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queues[pm]
}

// failWith makes every later Plan fail with err; nil: plan again.
func (p *testPlanner) failWith(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = err
}

func (p *testPlanner) PauseUpstream(pm string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pauses = append(p.pauses, pm+" for "+d.String())
}

type healthReport struct {
	pm string
	ok bool
}

var (
	_ Planner        = (*testPlanner)(nil)
	_ HealthReporter = (*testPlanner)(nil)
	_ Pauser         = (*testPlanner)(nil)
	_ Queuer         = (*testPlanner)(nil)
)

var errUnknownModel = errors.New("unknown model")

func (p *testPlanner) Plan(_ context.Context, t weir.Task) ([]admission.Candidate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return nil, p.fail
	}
	pms, ok := p.models[t.Model]
	if !ok {
		return nil, errUnknownModel
	}
	if len(pms) == 0 {
		// As the gateway answers for a model left with no platform.
		return nil, fmt.Errorf("%w: model %s has no platform to run on", admission.ErrNoCandidate, t.Model)
	}
	cands := make([]admission.Candidate, len(pms))
	for i, pm := range pms {
		scope := weir.PlatformModelScope(pm)
		if t.RunMode == weir.RunAcceptance {
			scope = weir.AcceptanceScope(scope) // as the gateway plans
		}
		cands[i] = admission.Candidate{Needs: []admission.Need{{Scope: scope, Amount: 1}}}
	}
	return cands, nil
}

func (p *testPlanner) Target(pm string, _ weir.RunMode) (Target, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retireAt[pm] {
		delete(p.retireAt, pm)
		p.retireLocked(pm)
	}
	tg, ok := p.targets[pm]
	return tg, ok
}

func (p *testPlanner) UpstreamResult(pm string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health = append(p.health, healthReport{pm, ok})
}

// drop takes a platform model out of the catalog: no model plans it and
// it has no target.
func (p *testPlanner) drop(pm string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.targets, pm)
	for m, pms := range p.models {
		p.models[m] = slices.DeleteFunc(slices.Clone(pms), func(x string) bool { return x == pm })
	}
}

func (p *testPlanner) reports() []healthReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.health)
}

// recordingMetrics records the transitions the service reports.
type recordingMetrics struct {
	noMetrics
	mu          sync.Mutex
	transitions []weir.TaskStatus
	waited, ran int
	// dispatch and skipped count TaskDispatch's outcomes and
	// TaskCandidateSkipped's reasons.
	dispatch, skipped map[string]int
}

func (m *recordingMetrics) TaskDispatch(outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dispatch == nil {
		m.dispatch = map[string]int{}
	}
	m.dispatch[outcome]++
}

func (m *recordingMetrics) TaskCandidateSkipped(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.skipped == nil {
		m.skipped = map[string]int{}
	}
	m.skipped[reason]++
}

// dispatched is how many times outcome was counted.
func (m *recordingMetrics) dispatched(outcome string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dispatch[outcome]
}

// skips is how many times reason was counted.
func (m *recordingMetrics) skips(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.skipped[reason]
}

func (m *recordingMetrics) TaskTransition(st weir.TaskStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.transitions = append(m.transitions, st)
}

func (m *recordingMetrics) TaskWaited(string, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.waited++
}

func (m *recordingMetrics) TaskRan(string, weir.TaskStatus, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ran++
}

func (m *recordingMetrics) got() ([]weir.TaskStatus, int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.transitions), m.waited, m.ran
}

// waitReleased waits until no capacity is held in any platform model's
// scope nor in WorkersScope: a task's lease is released just after its
// end is stored.
func (b *testBundle) waitReleased(t *testing.T) {
	t.Helper()
	waitFor(t, "every task's capacity released", func() bool {
		for _, st := range b.engine.Scopes(t.Context()) {
			if st.Used != 0 {
				return false
			}
		}
		return true
	})
}

// logCounter is a slog.Handler that counts the records of each message.
type logCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newLogCounter() *logCounter { return &logCounter{counts: map[string]int{}} }

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCounter) WithGroup(string) slog.Handler            { return h }

func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Message]++
	return nil
}

func (h *logCounter) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[msg]
}

// testStore is the bundle's store as the service sees it: TaskGet fails
// while failGets is set, as a store that cannot be read would.
type testStore struct {
	*sqlite.DB
	failGets atomic.Bool
}

var _ Store[*sql.Tx] = (*testStore)(nil)

var errStoreDown = errors.New("store unavailable (test)")

func (s *testStore) TaskGet(ctx context.Context, id string) (weir.Task, error) {
	if s.failGets.Load() {
		return weir.Task{}, errStoreDown
	}
	return s.DB.TaskGet(ctx, id)
}
