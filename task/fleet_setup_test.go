package task

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/riverjob"
)

// The fleet test bundle: replicas of the task service on one PostgreSQL
// schema, each with its own pool and its own fleet engine (package
// fleet), whose leader the test elects (SetTerm, as fleet's own tests
// do). The mock platforms, the planner and one fake clock are shared:
// the services', the leader's engine's and the mocks' time. River runs
// for real on the wall clock.
//
// The ledger polls every fleetTestPoll of the fake clock, which drive
// never reaches: a test moves the clock there itself when it means the
// poll to run.

// fleetTestPoll is the replicas' FleetPoll, far beyond what drive moves
// the clock by.
const fleetTestPoll = time.Hour

// driveHorizon is how far ahead a service timer may be for drive to move
// the fake clock to it: beyond every wait for a poll (PollMax), short of
// the ledger's poll.
const driveHorizon = 10 * time.Second

type fleetOpts struct {
	// Platforms are the mock platforms by platform model; default
	// "vid/a", instant jobs.
	Platforms map[string]mock.Config
	// Limits are the platform models' scope limits; default unlimited.
	Limits map[string]int64
	// Workers is the workers scope's limit each leader is given; default
	// 100.
	Workers int
	// Config is every replica's; the bundle sets the fleet's fields, the
	// clock and short fetch and poll intervals.
	Config Config
}

type fleetBundle struct {
	dsn     string
	db      *postgres.DB
	clock   *testClock
	planner *testPlanner
	up      map[string]*testUpstream
	key     weir.APIKey
	opts    fleetOpts

	mu     sync.Mutex
	nodes  map[string]*fleetNode
	epoch  uint64
	leader string // the replica elected last
}

// fleetNode is one replica: its store (which can be made to lose
// notices), its fleet engine and listener, and its task service.
type fleetNode struct {
	id    string
	gen   uint64
	store *fleetStore
	e     *fleet.Engine
	addr  string
	// feed is what the replica leads, as fleet.Member publishes it: the
	// engine's terms, with the bundle's workers.
	feed admission.LeadFeed
	// deposed makes the replica's store's fence (TermFenceTx) refuse its
	// commits, as the store does once another replica leads; fenced
	// counts the checks, and fencedEpoch is the epoch the last one was
	// asked for.
	deposed     atomic.Bool
	fenced      atomic.Int64
	fencedEpoch atomic.Uint64
	// gate, while set, holds each fence check until it opens: a commit
	// of admissions held inside its transaction.
	gate atomic.Pointer[fenceGate]

	mu sync.Mutex
	s  *Service
}

func (n *fleetNode) service() *Service {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.s
}

// fenceGate holds fence checks: entered is sent to as one begins to
// wait, and open closed to let them go.
type fenceGate struct {
	entered chan struct{}
	open    chan struct{}
}

func newFenceGate() *fenceGate {
	return &fenceGate{entered: make(chan struct{}, 1), open: make(chan struct{})}
}

// fleetStore is a replica's PostgreSQL store as its service sees it:
// while mute, it sends no notice; while deaf, its listener hears none
// (they are dropped and counted), as across a lost connection.
type fleetStore struct {
	*postgres.DB
	// node is the replica whose store this is: its deposed flag stands
	// for the term row, which no election in these tests writes.
	node *fleetNode
	mute atomic.Bool
	deaf atomic.Bool
	// held, while set, holds each notice until it is closed.
	held      atomic.Pointer[chan struct{}]
	dropped   atomic.Int64
	listening atomic.Int64 // LISTENs begun
	txs       atomic.Int64 // transactions begun (InTx)
	// created, while set, is called with each task the store has
	// created, before TaskCreate returns.
	created atomic.Pointer[func(id string)]
	// listed, while set, is called once each TaskList or TaskStateList
	// has read the store, before it returns.
	listed atomic.Pointer[func()]
	// statesListed, while set, is called once each TaskStateList has
	// read the store, before it returns.
	statesListed atomic.Pointer[func()]
	// wholeReads counts the tasks read whole by TaskList and TaskGetMany.
	wholeReads atomic.Int64
	// got, while set, is called with the ids each TaskGet or TaskGetMany
	// has read, before it returns.
	got atomic.Pointer[func(ids []string)]

	mu     sync.Mutex
	listen func(event, id string)
}

var (
	_ Store[pgx.Tx]         = (*fleetStore)(nil)
	_ Notifier              = (*fleetStore)(nil)
	_ JobReclaimer          = (*fleetStore)(nil)
	_ Fencer[pgx.Tx]        = (*fleetStore)(nil)
	_ FencedUpdater[pgx.Tx] = (*fleetStore)(nil)
	_ ManyReader            = (*fleetStore)(nil)
	_ StateLister           = (*fleetStore)(nil)
)

// TermFenceTx is the store's fence with the node's deposed flag for the
// term row: it checks that it runs in a live transaction of the store,
// for the replica's own term.
func (s *fleetStore) TermFenceTx(ctx context.Context, tx pgx.Tx, leader string, epoch uint64) (bool, error) {
	n := s.node
	n.fenced.Add(1)
	n.fencedEpoch.Store(epoch)
	if g := n.gate.Load(); g != nil {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.open
	}
	if leader != n.id {
		return false, fmt.Errorf("fence asked for leader %q; want the replica's own id %q", leader, n.id)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		return false, err
	}
	return !n.deposed.Load(), nil
}

// TaskUpdateManyFencedTx is the store's with the fence above.
func (s *fleetStore) TaskUpdateManyFencedTx(ctx context.Context, tx pgx.Tx, leader string, epoch uint64, ps []weir.TaskUpdateParams) (bool, []bool, error) {
	held, err := s.TermFenceTx(ctx, tx, leader, epoch)
	if err != nil || !held {
		return held, nil, err
	}
	applied, err := s.TaskUpdateManyTx(ctx, tx, ps)
	return true, applied, err
}

func (s *fleetStore) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	s.txs.Add(1)
	return s.DB.InTx(ctx, fn)
}

func (s *fleetStore) TaskCreate(ctx context.Context, t *weir.Task) (bool, error) {
	created, err := s.DB.TaskCreate(ctx, t)
	if f := s.created.Load(); f != nil && err == nil && created {
		(*f)(t.ID)
	}
	return created, err
}

func (s *fleetStore) TaskList(ctx context.Context, f weir.TaskFilter) ([]weir.Task, error) {
	tasks, err := s.DB.TaskList(ctx, f)
	s.wholeReads.Add(int64(len(tasks)))
	if h := s.listed.Load(); h != nil {
		(*h)()
	}
	return tasks, err
}

func (s *fleetStore) TaskStateList(ctx context.Context, f weir.TaskFilter) ([]weir.TaskState, error) {
	states, err := s.DB.TaskStateList(ctx, f)
	if h := s.listed.Load(); h != nil {
		(*h)()
	}
	if h := s.statesListed.Load(); h != nil {
		(*h)()
	}
	return states, err
}

func (s *fleetStore) TaskGetMany(ctx context.Context, ids []string) ([]weir.Task, error) {
	tasks, err := s.DB.TaskGetMany(ctx, ids)
	s.wholeReads.Add(int64(len(tasks)))
	if h := s.got.Load(); h != nil {
		(*h)(ids)
	}
	return tasks, err
}

func (s *fleetStore) TaskGet(ctx context.Context, id string) (weir.Task, error) {
	tk, err := s.DB.TaskGet(ctx, id)
	if h := s.got.Load(); h != nil {
		(*h)([]string{id})
	}
	return tk, err
}

func (s *fleetStore) NotifyTask(ctx context.Context, event, id string) error {
	if s.mute.Load() {
		return nil
	}
	if h := s.held.Load(); h != nil {
		<-*h
	}
	return s.DB.NotifyTask(ctx, event, id)
}

func (s *fleetStore) ListenTasks(ctx context.Context, f func(event, id string)) error {
	s.mu.Lock()
	s.listen = f
	s.mu.Unlock()
	return s.DB.ListenTasks(ctx, func(event, id string) {
		if event == "" {
			s.listening.Add(1)
		}
		if event != "" && s.deaf.Load() {
			s.dropped.Add(1)
			return
		}
		f(event, id)
	})
}

// hear hands the listener's service a notice, as if it came.
func (s *fleetStore) hear(event, id string) {
	s.mu.Lock()
	f := s.listen
	s.mu.Unlock()
	f(event, id)
}

// reconnected tells the listener's service what a new LISTEN tells it.
func (s *fleetStore) reconnected() {
	s.mu.Lock()
	f := s.listen
	s.mu.Unlock()
	f("", "")
}

func setupFleet(t *testing.T, opts fleetOpts, replicas ...string) *fleetBundle {
	t.Helper()
	ctx := t.Context()
	if opts.Platforms == nil {
		opts.Platforms = map[string]mock.Config{"vid/a": {}}
	}
	if opts.Workers == 0 {
		opts.Workers = 100
	}
	fake := clock.NewFake(testStart)
	fb := &fleetBundle{dsn: pgtest.Schema(t), clock: newTestClock(fake), up: map[string]*testUpstream{},
		opts: opts, nodes: map[string]*fleetNode{}}
	db, err := postgres.Open(ctx, fb.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Once, before the replicas start: their Starts migrate too.
	if err := riverjob.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	fb.db = db
	fb.key = weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: testStart}
	if err := db.KeyCreate(ctx, fb.key); err != nil {
		t.Fatal(err)
	}
	var pms []string
	fb.planner = &testPlanner{targets: map[string]Target{}}
	for pm, mc := range opts.Platforms {
		pms = append(pms, pm)
		u := &testUpstream{srv: mock.NewWithClock(mc, fake.Now)}
		u.ts = httptest.NewServer(u.srv)
		t.Cleanup(u.ts.Close)
		u.adapter = &provider.OpenAIVideo{BaseURL: u.ts.URL + "/v1", APIKey: "sk-test-own", Client: u.ts.Client()}
		fb.up[pm] = u
		fb.planner.targets[pm] = Target{PlatformModel: pm, Upstream: "sora-2",
			Adapter: &provider.OpenAIVideo{BaseURL: u.ts.URL + "/v1", APIKey: "sk-" + pm, Client: &http.Client{Transport: u}}}
	}
	slices.Sort(pms)
	fb.planner.models = map[string][]string{"sora-2": pms}
	for _, id := range replicas {
		fb.addNode(t, id, 1)
	}
	return fb
}

// addNode starts replica id at generation gen: its fleet engine,
// following the current term if there is one, and its task service.
func (fb *fleetBundle) addNode(t *testing.T, id string, gen uint64) *fleetNode {
	t.Helper()
	ctx := t.Context()
	db, err := postgres.Open(ctx, fb.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &fleetNode{id: id, gen: gen, store: &fleetStore{DB: db}, addr: ln.Addr().String()}
	n.store.node = n
	n.e = fleet.New(fleet.Config{Replica: id, Gen: gen, Secret: "s", SessionTimeout: 5 * time.Second,
		Options: admission.Options{Clock: fb.clock.Fake},
		OnLead: func(term admission.Engine, epoch uint64) {
			if term == nil {
				n.feed.Publish(admission.LeadEvent{Kind: admission.TermEnded})
				return
			}
			n.feed.Publish(admission.LeadEvent{Kind: admission.TermBegan, Engine: term, Epoch: epoch, Workers: fb.opts.Workers})
		}})
	go n.e.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	t.Cleanup(n.e.Close)
	n.s = fb.newService(t, n)
	fb.mu.Lock()
	fb.nodes[id] = n
	epoch := fb.epoch
	var term fleet.Term
	if epoch > 0 {
		term = fleet.Term{Epoch: epoch, Leader: fb.leader, Addr: fb.nodes[fb.leader].addr}
	}
	fb.mu.Unlock()
	if epoch > 0 {
		n.e.SetTerm(term, false, nil)
		fb.ready(t, n)
		fb.setScopes(t, n)
	}
	return n
}

// newService makes and starts replica n's task service.
func (fb *fleetBundle) newService(t *testing.T, n *fleetNode) *Service {
	t.Helper()
	cfg := fb.opts.Config
	cfg.Replica, cfg.FleetPoll = n.id, fleetTestPoll
	cfg.Clock = fb.clock
	cfg.Owner = admission.Owner{ID: n.id, Gen: n.gen}
	if cfg.FetchPollInterval == 0 {
		cfg.FetchPollInterval = 10 * time.Millisecond
	}
	if cfg.PollMax == 0 {
		cfg.PollMax = 2 * time.Second
	}
	if cfg.LeaseTTL == 0 {
		// Beyond every move of the fake clock, the polls' included.
		cfg.LeaseTTL = 100 * time.Hour
	}
	s, err := New(cfg, Deps[pgx.Tx]{Store: n.store, Engine: n.e, Planner: fb.planner, Leadership: &n.feed})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop %s: %v", n.id, err)
		}
	})
	return s
}

// elect makes replica id lead a new term on every replica, each synced
// with it, and sets the platform models' scopes through each (as each
// replica's gateway does).
func (fb *fleetBundle) elect(t *testing.T, id string) {
	t.Helper()
	fb.mu.Lock()
	fb.epoch++
	fb.leader = id
	term := fleet.Term{Epoch: fb.epoch, Leader: id, Addr: fb.nodes[id].addr}
	var live []string
	nodes := make([]*fleetNode, 0, len(fb.nodes))
	for _, n := range fb.nodes {
		live = append(live, n.id)
		nodes = append(nodes, n)
	}
	fb.mu.Unlock()
	for _, n := range nodes {
		n.e.SetTerm(term, n.id == id, live)
	}
	fb.ready(t, nodes...)
	for _, n := range nodes {
		fb.setScopes(t, n)
	}
}

func (fb *fleetBundle) ready(t *testing.T, nodes ...*fleetNode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	for _, n := range nodes {
		if err := n.e.Ready(ctx); err != nil {
			t.Fatalf("%s not synced with the leader: %v", n.id, err)
		}
	}
}

func (fb *fleetBundle) setScopes(t *testing.T, n *fleetNode) {
	t.Helper()
	for pm := range fb.up {
		if err := n.e.SetScope(t.Context(), weir.PlatformModelScope(pm), admission.ScopeConfig{Limit: fb.opts.Limits[pm]}); err != nil {
			t.Fatal(err)
		}
	}
}

func (fb *fleetBundle) node(id string) *fleetNode {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.nodes[id]
}

// submit submits a task of model sora-2 on replica id.
func (fb *fleetBundle) submit(t *testing.T, id string) weir.Task {
	t.Helper()
	tk := weir.Task{KeyID: fb.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"a heron at dawn","seconds":"4"}`)}
	created, err := fb.node(id).service().Submit(t.Context(), &tk)
	if err != nil || !created {
		t.Fatalf("Submit on %s = %v, %v; want created", id, created, err)
	}
	return tk
}

// holdNotices holds the notices replica id sends until the returned
// release, which the test's end calls if the test did not.
func (fb *fleetBundle) holdNotices(t *testing.T, id string) (release func()) {
	held := make(chan struct{})
	fb.node(id).store.held.Store(&held)
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	return release
}

func (fb *fleetBundle) get(t *testing.T, id string) weir.Task {
	t.Helper()
	tk, err := fb.db.TaskGet(context.Background(), id)
	if err != nil {
		t.Fatalf("TaskGet(%s): %v", id, err)
	}
	return tk
}

// scope is a scope's state, as replica id's engine reports it (the
// leader's).
func (fb *fleetBundle) scope(t *testing.T, id, scope string) admission.ScopeStats {
	t.Helper()
	st, err := fb.node(id).e.Scope(t.Context(), scope)
	if err != nil {
		t.Fatalf("Scope(%s) on %s: %v", scope, id, err)
	}
	return st
}

// drive waits until cond holds, moving the fake clock to the services'
// next timer whenever one is pending within driveHorizon.
func (fb *fleetBundle) drive(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		at, pending := fb.clock.nextWithin(driveHorizon)
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (fake clock at +%s)", what, waitBound, fb.clock.Now().Sub(testStart))
		}
		if pending {
			fb.clock.Set(at)
			continue
		}
		select {
		case <-fb.clock.set:
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// driveTo drives until task id is in one of statuses and returns it.
func (fb *fleetBundle) driveTo(t *testing.T, id string, statuses ...weir.TaskStatus) weir.Task {
	t.Helper()
	var tk weir.Task
	fb.drive(t, "task "+id+" to "+string(statuses[0]), func() bool {
		tk = fb.get(t, id)
		return slices.Contains(statuses, tk.Status)
	})
	return tk
}

// poll moves the fake clock past the ledger's next poll.
func (fb *fleetBundle) poll() {
	// To the poll's own time, and no further: the poll, paced by how
	// long it takes on the clock (pollPace), would find the rest of a
	// longer move in its time.
	if at := fb.clock.pollAt.Load(); at != nil && at.After(fb.clock.Now()) {
		fb.clock.Set(*at)
		return
	}
	fb.clock.Advance(fleetTestPoll * 3 / 2)
}

// nextWithin is when the services' earliest pending timer falls due, if
// it does within d.
func (c *testClock) nextWithin(d time.Duration) (time.Time, bool) {
	at, ok := c.next()
	if !ok || at.Sub(c.Now()) > d {
		return time.Time{}, false
	}
	return at, true
}
