package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/metrics"
)

// within bounds every wait for something that should come at once.
const within = 10 * time.Second

type testBundle struct {
	hub    *Hub
	engine *admission.Memory
	clock  *clock.Fake
	client edgepb.EdgeClient
	ends   *leaseEnds
	addr   string // the Hub's listener

	// auths counts the hub's calls of Authenticate; revoked are tokens it
	// refuses from now on.
	auths   atomic.Int64
	mu      sync.Mutex
	revoked map[string]bool

	// conflicts counts the Hub's TokenConflict metric.
	conflicts atomic.Int64
	// metrics counts the Hub's evidence, as a server's /metrics does.
	metrics *metrics.Metrics
}

func (b *testBundle) Evidence(source, decision string) { b.metrics.Evidence(source, decision) }
func (b *testBundle) TokenConflict()                   { b.conflicts.Add(1) }

// revoke makes Authenticate refuse token.
func (b *testBundle) revoke(token string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.revoked[token] = true
}

// leaseEnds counts the engine's lease-end events (released, expired,
// fenced) by lease.
type leaseEnds struct {
	mu sync.Mutex
	n  map[admission.LeaseID]int
}

func (e *leaseEnds) Observe(ev admission.Event) {
	switch ev.Outcome {
	case admission.OutcomeReleased, admission.OutcomeExpired, admission.OutcomeFenced:
		e.mu.Lock()
		e.n[ev.Lease]++
		e.mu.Unlock()
	}
}

// of is how many times lease id has ended.
func (e *leaseEnds) of(id admission.LeaseID) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[id]
}

// The tokens the bundle's Authenticate knows.
var testNodes = map[string]Identity{
	"wn-a": {ID: "node_a", Name: "gpu-a"},
	"wn-b": {ID: "node_b", Name: "gpu-b"},
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	return setupWith(t, nil, false)
}

// setupWith is setup with edit applied to the Hub's Config, and its
// listener guarded (Hub.Guard) if guarded.
func setupWith(t testing.TB, edit func(*Config), guarded bool) *testBundle {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	ends := &leaseEnds{n: make(map[admission.LeaseID]int)}
	eng := admission.NewMemory(admission.Options{Clock: fc, Observer: ends})
	t.Cleanup(eng.Close)
	b := &testBundle{engine: eng, clock: fc, ends: ends, revoked: map[string]bool{}, metrics: metrics.New(nil)}
	cfg := Config{HeartbeatInterval: time.Second, HeartbeatTimeout: 3 * time.Second, Clock: fc}
	if edit != nil {
		edit(&cfg)
	}
	hub := New(cfg, Deps{
		Engine:  eng,
		Metrics: b,
		Authenticate: func(_ context.Context, token string) (Identity, error) {
			b.auths.Add(1)
			b.mu.Lock()
			revoked := b.revoked[token]
			b.mu.Unlock()
			if revoked {
				return Identity{}, ErrUnauthenticated
			}
			if token == "wn-broken" {
				return Identity{}, errors.New("the store is down")
			}
			if n, ok := strings.CutPrefix(token, "wn-many-"); ok {
				return Identity{ID: "node_" + n, Name: "many-" + n}, nil
			}
			id, ok := testNodes[token]
			if !ok {
				return Identity{}, ErrUnauthenticated
			}
			return id, nil
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	if guarded {
		ln = hub.Guard(ln)
	}
	srv := hub.Server()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	b.hub, b.client = hub, edgepb.NewEdgeClient(conn)
	return b
}

// testSession is a node's side of one Control stream.
type testSession struct {
	t testing.TB
	// instance is the process its Register names (none if empty).
	instance string
	stream   edgepb.Edge_ControlClient
	cancel   context.CancelFunc
	gen      uint64
	seq      uint64
}

// open opens a Control stream with token (none if empty).
func (b *testBundle) open(t testing.TB, token string) *testSession {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	stream, err := b.client.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &testSession{t: t, stream: stream, cancel: cancel}
}

// testProvider is a valid provider with slots, serving model m.
func testProvider(id string, slots int32, models ...string) *edgepb.Provider {
	p := &edgepb.Provider{Id: id, Adapter: "openai", Target: "http://127.0.0.1:8000/v1", Slots: slots}
	for _, m := range models {
		p.Models = append(p.Models, &edgepb.ModelRoute{Name: m, Runtime: "rt-" + m})
	}
	return p
}

// register sends Register and returns the next message.
func (s *testSession) register(ps ...*edgepb.Provider) (*edgepb.GatewayMessage, error) {
	// A Send on a stream the server has ended says only io.EOF: the
	// stream's status comes from Recv.
	if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Register{Register: &edgepb.Register{Version: "test", Providers: ps, Instance: s.instance}}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return s.stream.Recv()
}

// welcome registers ps and wants a Welcome.
func (s *testSession) welcome(ps ...*edgepb.Provider) *edgepb.Welcome {
	s.t.Helper()
	m, err := s.register(ps...)
	if err != nil {
		s.t.Fatalf("register: %v", err)
	}
	w := m.GetWelcome()
	if w == nil {
		s.t.Fatalf("register answered %v, want a Welcome", m)
	}
	s.gen = w.Generation
	return w
}

// heartbeat sends a heartbeat with the next sequence number.
func (s *testSession) heartbeat() {
	s.t.Helper()
	s.seq++
	if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: &edgepb.Heartbeat{Generation: s.gen, Seq: s.seq}}}); err != nil {
		s.t.Fatalf("heartbeat: %v", err)
	}
}

// sync sends a stale heartbeat and waits for its refusal: every message
// sent before it has been handled then.
func (s *testSession) sync() {
	s.t.Helper()
	if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: &edgepb.Heartbeat{Generation: s.gen, Seq: 0}}}); err != nil {
		s.t.Fatalf("sync: %v", err)
	}
	if r := s.refusal(); r.Code != "stale_sequence" {
		s.t.Fatalf("sync: refusal %q, want stale_sequence", r.Code)
	}
}

// refusal waits for the next message and wants a Refusal.
func (s *testSession) refusal() *edgepb.Refusal {
	s.t.Helper()
	m, err := s.stream.Recv()
	if err != nil {
		s.t.Fatalf("want a refusal, got %v", err)
	}
	r := m.GetRefusal()
	if r == nil {
		s.t.Fatalf("want a refusal, got %v", m)
	}
	return r
}

// ended waits for the stream's end and returns its status code.
func (s *testSession) ended() codes.Code {
	s.t.Helper()
	for {
		_, err := s.stream.Recv()
		if err != nil {
			return status.Code(err)
		}
	}
}

// hold takes a lease on scope as owner, at once.
func (b *testBundle) hold(t *testing.T, id, scope string, owner admission.Owner) admission.Lease {
	t.Helper()
	l, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: id, Owner: owner,
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}})
	if err != nil {
		t.Fatalf("acquire %s on %s: %v", id, scope, err)
	}
	return l
}

// wait queues a waiter on scope and returns where its outcome comes.
func (b *testBundle) wait(t *testing.T, id, scope string) <-chan error {
	t.Helper()
	out := make(chan error, 1)
	err := b.engine.Enqueue(t.Context(), admission.Request{ID: id,
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}},
		func(_ admission.Lease, err error) { out <- err })
	if err != nil {
		t.Fatalf("enqueue %s on %s: %v", id, scope, err)
	}
	return out
}

func (b *testBundle) scope(t *testing.T, name string) admission.ScopeStats {
	t.Helper()
	st, err := b.engine.Scope(t.Context(), name)
	if err != nil {
		t.Fatalf("scope %s: %v", name, err)
	}
	return st
}

func outcome(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(within):
		t.Fatal("no outcome for the waiter")
		return nil
	}
}

// TestRegisterMakesOwnedScopes: a registered provider's slots are a scope
// owned by the node at the session's generation, and its long-context
// slots a second one; /admin/nodes shows them.
func TestRegisterMakesOwnedScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	long := testProvider("vllm", 4, "llama")
	long.LongSlots, long.LongPromptTokens = 1, 32_000
	w := s.welcome(long, testProvider("ollama", 2, "qwen", "llama"))
	if w.NodeId != "node_a" || w.Generation == 0 || w.HeartbeatIntervalMs != 1000 || w.HeartbeatTimeoutMs != 3000 {
		t.Fatalf("welcome %+v", w)
	}
	owner := weir.NodeOwner("node_a")
	for name, limit := range map[string]int64{
		weir.NodeScope("node_a", "vllm"):     4,
		weir.NodeLongScope("node_a", "vllm"): 1,
		weir.NodeScope("node_a", "ollama"):   2,
	} {
		st := b.scope(t, name)
		if st.Config.Limit != limit || st.Config.Owner != owner || st.Config.OwnerGen != w.Generation || st.Orphaned {
			t.Errorf("scope %s: %+v orphaned=%v; want limit %d owned by %s@%d", name, st.Config, st.Orphaned, limit, owner, w.Generation)
		}
	}
	if _, err := b.engine.Scope(t.Context(), weir.NodeLongScope("node_a", "ollama")); err == nil {
		t.Error("a provider without long slots has a long-context scope")
	}
	nodes := b.hub.Nodes(t.Context())
	if len(nodes) != 1 || !nodes[0].Connected || nodes[0].Name != "gpu-a" || len(nodes[0].Providers) != 2 ||
		nodes[0].Providers[1].ID != "vllm" || nodes[0].Providers[1].LongSlots != 1 {
		t.Errorf("nodes: %+v", nodes)
	}
}

// TestTokensAreChecked: no token, an unknown or revoked one, and a store
// that cannot tell each end the stream before anything is registered.
func TestTokensAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for token, want := range map[string]codes.Code{
		"":          codes.Unauthenticated,
		"wn-nobody": codes.Unauthenticated,
		"wn-broken": codes.Unavailable,
	} {
		s := b.open(t, token)
		if _, err := s.register(testProvider("p", 1, "m")); status.Code(err) != want {
			t.Errorf("token %q: %v, want %s", token, err, want)
		}
	}
	if n := b.hub.Nodes(t.Context()); len(n) != 0 {
		t.Errorf("nodes after refused tokens: %+v", n)
	}
}

// TestBadRegisterChangesNothing: a registration the gateway cannot serve
// exactly is refused with a reason, and configures no scope.
func TestBadRegisterChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	twice := testProvider("p", 2, "m")
	longOnly := testProvider("p", 2, "m")
	longOnly.LongSlots = 1
	tooLong := testProvider("p", 2, "m")
	tooLong.LongSlots, tooLong.LongPromptTokens = 3, 100
	badTarget := testProvider("p", 2, "m")
	badTarget.Target = "file:///etc/passwd"
	badAdapter := testProvider("p", 2, "m")
	badAdapter.Adapter = "grpc"
	dupModel := testProvider("p", 2, "m", "m")
	for name, ps := range map[string][]*edgepb.Provider{
		"no providers":              nil,
		"provider twice":            {twice, twice},
		"no slots":                  {testProvider("p", 0, "m")},
		"too many slots":            {testProvider("p", maxSlots+1, "m")},
		"no models":                 {testProvider("p", 1)},
		"a slash in the id":         {testProvider("a/b", 1, "m")},
		"long slots without tokens": {longOnly},
		"more long slots than all":  {tooLong},
		"target not http":           {badTarget},
		"unknown adapter":           {badAdapter},
		"model twice":               {dupModel},
		"model name with a space":   {testProvider("p", 1, "a b")},
	} {
		s := b.open(t, "wn-a")
		m, err := s.register(ps...)
		if err != nil {
			t.Errorf("%s: %v, want a refusal first", name, err)
			continue
		}
		if r := m.GetRefusal(); r == nil || r.Code != "invalid_register" || r.Message == "" {
			t.Errorf("%s: answered %v, want an invalid_register refusal with a reason", name, m)
		}
		if code := s.ended(); code != codes.InvalidArgument {
			t.Errorf("%s: the stream ended %s, want InvalidArgument", name, code)
		}
	}
	if scopes := b.engine.Scopes(t.Context()); len(scopes) != 0 {
		t.Errorf("scopes after refused registrations: %+v", scopes)
	}
}

// TestDisconnectFences: a node whose session ends has its leases
// released through the engine, its scopes orphaned, and a request
// waiting only on them fails at once rather than waiting out its
// deadline.
func TestDisconnectFences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	w := s.welcome(testProvider("p", 1, "m"))
	scope := weir.NodeScope("node_a", "p")
	b.hold(t, "running", scope, admission.Owner{ID: weir.NodeOwner("node_a"), Gen: w.Generation})
	waiting := b.wait(t, "queued", scope)

	s.cancel()
	if err := outcome(t, waiting); !errors.Is(err, admission.ErrNoCandidate) {
		t.Fatalf("the waiter's outcome: %v, want no_candidate at once", err)
	}
	st := b.scope(t, scope)
	if !st.Orphaned || st.Used != 0 || st.Leases != 0 {
		t.Errorf("the gone node's scope: %+v; want orphaned with nothing held", st)
	}
	if n := b.hub.Nodes(t.Context()); len(n) != 1 || n[0].Connected || !n[0].Providers[0].Orphaned {
		t.Errorf("nodes after the disconnect: %+v", n)
	}
}

// TestMissedHeartbeats: heartbeats keep a session; once none has come
// for the heartbeat timeout, by the gateway's clock, the node is gone.
func TestMissedHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m"))
	scope := weir.NodeScope("node_a", "p")
	for range 5 {
		b.clock.Advance(2 * time.Second)
		s.heartbeat()
		s.sync()
	}
	if st := b.scope(t, scope); st.Orphaned {
		t.Fatal("a node that heartbeats was declared gone")
	}
	b.hold(t, "running", scope, admission.Owner{ID: weir.NodeOwner("node_a"), Gen: s.gen})
	waiting := b.wait(t, "queued", scope)
	b.clock.Advance(3 * time.Second)
	if code := s.ended(); code != codes.Unavailable {
		t.Errorf("the stream of a node that missed its heartbeats ended %s, want Unavailable", code)
	}
	if err := outcome(t, waiting); err == nil {
		t.Error("a waiter on a gone node's slots was admitted")
	}
	if st := b.scope(t, scope); !st.Orphaned || st.Used != 0 {
		t.Errorf("scope of a node that missed its heartbeats: %+v", st)
	}
}

// TestReconnectSupersedes: a second session of a node gets a newer
// generation and ends the first (half-open) one; what the first held is
// released, the scopes are the new generation's and admit again, and the
// old session's end changes nothing of the new one's.
func TestReconnectSupersedes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.open(t, "wn-a")
	w1 := old.welcome(testProvider("p", 1, "m"), testProvider("gone", 1, "m"))
	scope := weir.NodeScope("node_a", "p")
	oldOwner := admission.Owner{ID: weir.NodeOwner("node_a"), Gen: w1.Generation}
	lease := b.hold(t, "old-run", scope, oldOwner)

	s := b.open(t, "wn-a")
	w2 := s.welcome(testProvider("p", 2, "m"))
	if w2.Generation <= w1.Generation {
		t.Fatalf("reconnect got generation %d after %d", w2.Generation, w1.Generation)
	}
	if code := old.ended(); code != codes.Aborted {
		t.Errorf("the superseded stream ended %s, want Aborted", code)
	}
	st := b.scope(t, scope)
	if st.Orphaned || st.Used != 0 || st.Config.Limit != 2 || st.Config.OwnerGen != w2.Generation {
		t.Errorf("scope after the reconnect: %+v orphaned=%v; want limit 2 at generation %d with nothing held", st.Config, st.Orphaned, w2.Generation)
	}
	if err := b.engine.Release(t.Context(), lease.ID, oldOwner); !errors.Is(err, admission.ErrStaleOwner) && err != nil {
		t.Errorf("the old generation's release: %v", err)
	}
	if _, err := b.engine.Scope(t.Context(), weir.NodeScope("node_a", "gone")); err == nil {
		t.Error("a provider the new session does not have kept its scope")
	}
	b.hold(t, "new-run", scope, admission.Owner{ID: weir.NodeOwner("node_a"), Gen: w2.Generation})
	s.heartbeat()
	s.sync()
}

// TestStaleMessagesRefused: a heartbeat of another generation or an old
// sequence number, a second Register and Evidence are refused and keep
// the session.
func TestStaleMessagesRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m"))
	s.heartbeat()
	send := func(m *edgepb.NodeMessage) {
		t.Helper()
		if err := s.stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: &edgepb.Heartbeat{Generation: s.gen - 1, Seq: 9}}})
	if r := s.refusal(); r.Code != "stale_generation" {
		t.Errorf("heartbeat of an older generation: %q", r.Code)
	}
	send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: &edgepb.Heartbeat{Generation: s.gen, Seq: s.seq}}})
	if r := s.refusal(); r.Code != "stale_sequence" {
		t.Errorf("heartbeat repeated: %q", r.Code)
	}
	send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Register{Register: &edgepb.Register{Providers: []*edgepb.Provider{testProvider("q", 9, "m")}}}})
	if r := s.refusal(); r.Code != "registered" {
		t.Errorf("a second register: %q", r.Code)
	}
	send(&edgepb.NodeMessage{})
	if r := s.refusal(); r.Code != "unknown_message" {
		t.Errorf("an empty message: %q", r.Code)
	}
	if _, err := b.engine.Scope(t.Context(), weir.NodeScope("node_a", "q")); err == nil {
		t.Error("a second Register configured a scope")
	}
	s.heartbeat()
	s.sync()
}

// TestRegisterFirst: a session that begins with anything but Register
// is refused and ended.
func TestRegisterFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: &edgepb.Heartbeat{Seq: 1}}}); err != nil {
		t.Fatal(err)
	}
	if r := s.refusal(); r.Code != "register_first" {
		t.Fatalf("refusal %q, want register_first", r.Code)
	}
	if code := s.ended(); code != codes.InvalidArgument {
		t.Errorf("stream ended %s, want InvalidArgument", code)
	}
}

// TestRegisterTimeout: a session that never registers is ended once the
// register timeout passes on the gateway's clock.
func TestRegisterTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	// The handler has started once it set its timer.
	deadline := time.Now().Add(within)
	for b.clock.Pending() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the session's handler never started")
		}
		time.Sleep(time.Millisecond)
	}
	b.clock.Advance(b.hub.cfg.RegisterTimeout)
	if code := s.ended(); code != codes.DeadlineExceeded {
		t.Errorf("a session that never registered ended %s, want DeadlineExceeded", code)
	}
}

// TestManyNodes: 200 nodes of 4 providers each register against one
// hub; every provider serves, and one node's end orphans its own four
// scopes alone.
func TestManyNodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const nodes, providers = 200, 4
	sessions := make([]*testSession, nodes)
	for i := range nodes {
		s := b.open(t, fmt.Sprintf("wn-many-%03d", i))
		var ps []*edgepb.Provider
		for p := range providers {
			ps = append(ps, testProvider(fmt.Sprintf("p%d", p), 2, "m"))
		}
		s.welcome(ps...)
		sessions[i] = s
	}
	if got := len(b.hub.Serving("m")); got != nodes*providers {
		t.Fatalf("serving %d providers, want %d", got, nodes*providers)
	}
	if got := len(b.engine.Scopes(t.Context())); got != nodes*providers {
		t.Fatalf("%d scopes, want %d", got, nodes*providers)
	}
	b.hold(t, "busy", weir.NodeScope("node_007", "p1"), admission.Owner{ID: weir.NodeOwner("node_007"), Gen: sessions[7].gen})
	b.hold(t, "busy2", weir.NodeScope("node_007", "p1"), admission.Owner{ID: weir.NodeOwner("node_007"), Gen: sessions[7].gen})
	queued := b.wait(t, "w", weir.NodeScope("node_007", "p1"))
	sessions[7].cancel()
	if err := outcome(t, queued); err == nil {
		t.Fatal("a waiter on a gone node's full slots was admitted")
	}
	if got := len(b.hub.Serving("m")); got != (nodes-1)*providers {
		t.Fatalf("serving %d after one node left, want %d", got, (nodes-1)*providers)
	}
	orphaned := 0
	for _, st := range b.engine.Scopes(t.Context()) {
		if st.Orphaned {
			orphaned++
			if !strings.HasPrefix(st.Name, weir.NodeScope("node_007", "")) || st.Used != 0 {
				t.Errorf("orphaned scope %s (used %d); want only node_007's, all free", st.Name, st.Used)
			}
		}
	}
	if orphaned != providers {
		t.Errorf("%d scopes orphaned, want node_007's %d", orphaned, providers)
	}
}

// TestSessionQueueHoldsABurst: a second of offers at 1,000 req/s queued
// while the session's sender does not run (a loaded gateway) leaves the
// session live; a sender further behind than sendBuffer ends it.
func TestSessionQueueHoldsABurst(t *testing.T) {
	t.Parallel()
	s := &session{h: New(Config{}, Deps{}), send: make(chan *edgepb.GatewayMessage, sendBuffer), done: make(chan struct{})}
	offer := &edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Offer{Offer: &edgepb.Offer{RunId: "run_x", Provider: "p"}}}
	for i := range 1000 {
		if !s.queue(offer) {
			t.Fatalf("offer %d of a burst of 1000 refused: %v", i, s.cause())
		}
	}
	for range sendBuffer - 1000 {
		s.queue(offer)
	}
	if s.queue(offer) {
		t.Fatal("an offer past sendBuffer was queued")
	}
	select {
	case <-s.done:
	default:
		t.Fatal("a session whose sender is sendBuffer behind is still live")
	}
}

// TestRevokedTokenEndsSession: a live session whose token is revoked
// (by another process, in the store) ends within TokenRecheck: its
// stream ends Unauthenticated, its scopes are fenced, and the token
// opens no new session.
func TestRevokedTokenEndsSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m"))
	scope := weir.NodeScope("node_a", "p")
	// Checks with the token still good change nothing.
	for range 31 {
		b.clock.Advance(time.Second)
		s.heartbeat()
		s.sync()
	}
	if st := b.scope(t, scope); st.Orphaned {
		t.Fatal("a session whose token is good was ended")
	}
	b.revoke("wn-a")
	var end error
	for i := 0; i < 30 && end == nil; i++ {
		b.clock.Advance(time.Second)
		s.heartbeat()
		// As sync, but the stream may end here.
		if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: &edgepb.Heartbeat{Generation: s.gen, Seq: 0}}}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		_, end = s.stream.Recv()
	}
	if code := status.Code(end); code != codes.Unauthenticated {
		t.Errorf("the revoked node's stream ended %v; want Unauthenticated", end)
	}
	b.waitOrphaned(t, scope)
	again := b.open(t, "wn-a")
	if _, err := again.register(testProvider("p", 1, "m")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a new session with the revoked token: %v; want Unauthenticated", err)
	}
}

// TestServedFollowsSessions: Served gives every model a live session's
// providers serve, and Changes says so as a session begins serving and
// as it ends.
func TestServedFollowsSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	changed := func(what string) {
		t.Helper()
		select {
		case <-b.hub.Changes():
		case <-time.After(10 * time.Second):
			t.Fatalf("no change once %s", what)
		}
	}
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m", "n"), testProvider("q", 1, "m"))
	changed("the session serves")
	got := b.hub.Served()
	want := map[string][]weir.NodeTarget{
		"m": {{Node: "node_a", Gen: s.gen, Provider: "p", Runtime: "rt-m"}, {Node: "node_a", Gen: s.gen, Provider: "q", Runtime: "rt-m"}},
		"n": {{Node: "node_a", Gen: s.gen, Provider: "p", Runtime: "rt-n"}},
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Served = %+v, want %+v", got, want)
	}
	s.cancel()
	changed("the session ended")
	// The session's end is seen once its detach ran; Changes came after.
	if got := b.hub.Served(); len(got) != 0 {
		t.Fatalf("Served after the session ended = %+v", got)
	}
}

// TestFleetViews: the fleet's nodes shown once each: a node that moved
// by the view of its live session, then of its newest generation, the
// other replicas' marked with their replica and age.
func TestFleetViews(t *testing.T) {
	t.Parallel()
	local := []NodeView{
		{ID: "node_a", Name: "a", Connected: true, Generation: 5},
		{ID: "node_c", Name: "c", Generation: 2},
	}
	remote := []NodeView{
		{ID: "node_a", Name: "a", Generation: 4, Replica: "r0", AgeMs: 100},
		{ID: "node_b", Name: "b", Connected: true, Generation: 7, Replica: "r0", AgeMs: 100},
		{ID: "node_b", Name: "b", Generation: 8, Replica: "r2", AgeMs: 200},
		{ID: "node_c", Name: "c", Connected: true, Generation: 3, Replica: "r2", AgeMs: 200},
	}
	got := FleetViews(local, remote)
	want := []NodeView{
		{ID: "node_a", Name: "a", Connected: true, Generation: 5},
		{ID: "node_b", Name: "b", Connected: true, Generation: 7, Replica: "r0", AgeMs: 100},
		{ID: "node_c", Name: "c", Connected: true, Generation: 3, Replica: "r2", AgeMs: 200},
	}
	if !slices.EqualFunc(got, want, func(a, b NodeView) bool {
		return a.ID == b.ID && a.Connected == b.Connected && a.Generation == b.Generation && a.Replica == b.Replica && a.AgeMs == b.AgeMs
	}) {
		t.Fatalf("FleetViews = %+v\nwant %+v", got, want)
	}
}
