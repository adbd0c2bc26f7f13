package fleet

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// node is one replica in a failover test: its engine, its listener's
// address, and the connections it dialled (to cut them).
type node struct {
	id    string
	e     *Engine
	addr  string
	valid atomic.Bool
	// dead: the node's process is gone, as Config.Dead reports it;
	// silent: its connections carry nothing either way and close
	// nothing, as a paused process's (silentConn).
	dead   atomic.Bool
	silent atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
	// serving is closed when Serve, on the node's listener, has returned.
	serving chan struct{}
}

func startNodes(t *testing.T, timeout time.Duration, ids ...string) map[string]*node {
	t.Helper()
	return startNodesWith(t, timeout, nil, ids...)
}

// startNodesWith starts nodes whose configs edit changes (nil: none).
// Each node's Config.Dead reports the node asked about dead once it
// died (node.die).
func startNodesWith(t *testing.T, timeout time.Duration, edit func(*Config), ids ...string) map[string]*node {
	t.Helper()
	out := make(map[string]*node)
	for _, id := range ids {
		out[id] = &node{id: id}
	}
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := out[id]
		n.addr = ln.Addr().String()
		n.valid.Store(true)
		var d net.Dialer
		cfg := Config{Replica: id, Gen: 1, Secret: "s", SessionTimeout: timeout,
			Valid: func(uint64) bool { return n.valid.Load() },
			Dead: func(_ context.Context, replica string, _ uint64) bool {
				o := out[replica]
				return o != nil && o.dead.Load()
			},
			Dial: func(ctx context.Context, addr string) (net.Conn, error) {
				if n.silent.Load() {
					return nil, errors.New("silent")
				}
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil {
					c = &silentConn{Conn: c, n: n, done: make(chan struct{})}
					n.mu.Lock()
					n.conns = append(n.conns, c)
					n.mu.Unlock()
				}
				return c, err
			}}
		if edit != nil {
			edit(&cfg)
		}
		n.e = New(cfg)
		n.serving = make(chan struct{})
		go func() {
			defer close(n.serving)
			_ = n.e.Serve(ln)
		}()
		t.Cleanup(func() { ln.Close() })
		t.Cleanup(n.e.Close)
		t.Cleanup(n.unsilence)
	}
	return out
}

// die ends n as a process that died would: its engine closes, and the
// others may prove it dead.
func (n *node) die() {
	n.dead.Store(true)
	n.e.Close()
}

// silence makes n go silent, as a paused process does: what it sends
// and what is sent to it goes nowhere, and it closes nothing, so the
// leader hears neither a frame nor an end.
func (n *node) silence() { n.silent.Store(true) }

// unsilence closes what n's engine closed while it was silent.
func (n *node) unsilence() {
	n.silent.Store(false)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		if sc, ok := c.(*silentConn); ok {
			sc.settle()
		}
	}
}

// silentConn is a dialled connection of a node that may go silent.
type silentConn struct {
	net.Conn
	n *node

	mu     sync.Mutex
	closed bool
	done   chan struct{}
}

func (c *silentConn) Read(b []byte) (int, error) {
	for {
		if !c.n.silent.Load() {
			return c.Conn.Read(b)
		}
		select {
		case <-c.done:
			return 0, net.ErrClosed
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (c *silentConn) Write(b []byte) (int, error) {
	if c.n.silent.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *silentConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	c.mu.Unlock()
	if c.n.silent.Load() {
		return nil // a paused process closes nothing
	}
	return c.Conn.Close()
}

// settle closes the real connection of a silentConn closed while
// silent.
func (c *silentConn) settle() {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		_ = c.Conn.Close()
	}
}

// elect makes leader lead epoch on every node given, with live the
// replicas the new leader waits for.
func elect(epoch uint64, leader *node, live []string, nodes ...*node) {
	term := Term{Epoch: epoch, Leader: leader.id, Addr: leader.addr}
	for _, n := range nodes {
		n.e.SetTerm(term, n == leader, live)
	}
}

func ready(t *testing.T, nodes ...*node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	for _, n := range nodes {
		if err := n.e.Ready(ctx); err != nil {
			t.Fatalf("%s not synced: %v", n.id, err)
		}
	}
}

// cut closes every connection n dialled, as a network fault would.
func (n *node) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.Close()
	}
	n.conns = nil
}

type outcome struct {
	lease admission.Lease
	err   error
}

func enqueue(t *testing.T, e *Engine, id string, scope string) chan outcome {
	t.Helper()
	ch := make(chan outcome, 1)
	err := e.Enqueue(t.Context(), admission.Request{ID: id, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}},
		func(l admission.Lease, err error) { ch <- outcome{l, err} })
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", id, err)
	}
	return ch
}

func tryAcquire(t *testing.T, e *Engine, id, scope string) admission.Lease {
	t.Helper()
	l, err := e.TryAcquire(t.Context(), admission.Request{ID: id, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}})
	if err != nil {
		t.Fatalf("TryAcquire(%s): %v", id, err)
	}
	return l
}

func wait(t *testing.T, ch chan outcome, what string) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(guard):
		t.Fatalf("%s: no outcome within %s", what, guard)
		return outcome{}
	}
}

func pending(t *testing.T, ch chan outcome, what string) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("%s: ended (lease %d, %v); want still queued", what, o.lease.ID, o.err)
	default:
	}
}

func used(t *testing.T, e *Engine, scope string) (int64, int) {
	t.Helper()
	st, err := e.Scope(t.Context(), scope)
	if err != nil {
		t.Fatalf("Scope(%s): %v", scope, err)
	}
	return st.Used, st.Queued
}

// TestNewLeaderHonoursHeldLeases: when the term passes to another
// replica, the leases held across the fleet and the waiters queued carry
// over: the new leader counts the old leases against the limit, keeps
// the waiters queued, and a release of a lease granted in the old term,
// by the id it was granted with, admits the next waiter. The scope is
// configured on b alone, and a may sync first: a's lease and waiter on
// it must wait for b's scopes rather than be dropped as unknown.
func TestNewLeaderHonoursHeldLeases(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 5*time.Second, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if err := b.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 2}); err != nil {
		t.Fatal(err)
	}
	l1 := tryAcquire(t, b.e, "h1", "s")
	l2 := tryAcquire(t, a.e, "h2", "s")
	w := enqueue(t, a.e, "w", "s")
	pending(t, w, "w before the change")

	elect(2, b, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if u, q := used(t, a.e, "s"); u != 2 || q != 1 {
		t.Fatalf("under the new leader: used %d, queued %d; want 2, 1", u, q)
	}
	if _, err := b.e.TryAcquire(t.Context(), admission.Request{ID: "x", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}}); !errors.Is(err, admission.ErrWouldWait) {
		t.Fatalf("TryAcquire past the limit under the new leader: %v; want ErrWouldWait", err)
	}
	pending(t, w, "w after the change")
	if err := b.e.Release(t.Context(), l1.ID, l1.Owner); err != nil {
		t.Fatalf("Release of a lease of the old term: %v", err)
	}
	o := wait(t, w, "w")
	if o.err != nil || o.lease.ID>>40 != 2 {
		t.Fatalf("w: lease %#x, %v; want a lease of epoch 2", uint64(o.lease.ID), o.err)
	}
	for _, l := range []admission.Lease{l2, o.lease} {
		if err := a.e.Release(t.Context(), l.ID, l.Owner); err != nil {
			t.Fatal(err)
		}
	}
	if u, q := used(t, b.e, "s"); u != 0 || q != 0 {
		t.Fatalf("after every release: used %d, queued %d", u, q)
	}
}

// TestLeaderWaitsForReplicasToSync: a new leader admits nothing until
// every replica alive at the term's start has told it what it holds;
// otherwise a replica's leases, unknown to it, would not count.
func TestLeaderWaitsForReplicasToSync(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, guard, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if err := a.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	tryAcquire(t, a.e, "h", "s")

	// b leads epoch 2; a does not know yet. (b's own calls wait too: its
	// own sync completes only once the term's replicas have synced.)
	b.e.SetTerm(Term{Epoch: 2, Leader: "b", Addr: b.addr}, true, []string{"a", "b"})
	got := make(chan error, 1)
	go func() {
		_, err := b.e.TryAcquire(context.Background(), admission.Request{ID: "x", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
		got <- err
	}()
	a.e.SetTerm(Term{Epoch: 2, Leader: "b", Addr: b.addr}, false, nil)
	select {
	case err := <-got:
		if !errors.Is(err, admission.ErrWouldWait) {
			t.Fatalf("TryAcquire while a's lease is held: %v; want ErrWouldWait", err)
		}
	case <-time.After(guard):
		t.Fatal("TryAcquire never answered")
	}
}

// TestLateGrantRefused: a leader whose term has passed on its own clock
// (it was paused past it) grants nothing more; the waiter stays queued
// at its replica and the next leader admits it, once.
func TestLateGrantRefused(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 5*time.Second, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if err := a.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	h := tryAcquire(t, a.e, "h", "s")
	w := enqueue(t, b.e, "w", "s")

	a.valid.Store(false) // a's term has run out on its clock
	if err := a.e.Release(t.Context(), h.ID, h.Owner); err != nil {
		t.Fatal(err)
	}
	pending(t, w, "w after a release by a leader past its term")

	elect(2, b, []string{"a", "b"}, a, b)
	o := wait(t, w, "w under the next leader")
	if o.err != nil || o.lease.ID>>40 != 2 {
		t.Fatalf("w: lease %#x, %v; want a lease of epoch 2", uint64(o.lease.ID), o.err)
	}
	if u, _ := used(t, b.e, "s"); u != 1 {
		t.Fatalf("used %d; want 1 (w alone)", u)
	}
}

// TestGoneReplicaDropped: a replica whose process died is dropped: its
// leases go back and the next waiter is admitted.
func TestGoneReplicaDropped(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 300*time.Millisecond, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if err := a.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	tryAcquire(t, b.e, "h", "s")
	w := enqueue(t, a.e, "w", "s")
	b.die() // holding its lease
	o := wait(t, w, "w after b died")
	if o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestReconnectKeepsPlace: a session cut by a network fault comes back
// within the timeout; its replica's waiter keeps its place ahead of a
// later one, and its lease is still held.
func TestReconnectKeepsPlace(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 5*time.Second, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if err := a.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	h := tryAcquire(t, b.e, "h", "s")
	first := enqueue(t, b.e, "first", "s")
	second := enqueue(t, a.e, "second", "s")

	b.cut()
	// b's Release waits for the session to come back, then reaches the
	// leader.
	if err := b.e.Release(t.Context(), h.ID, h.Owner); err != nil {
		t.Fatal(err)
	}
	o := wait(t, first, "first")
	if o.err != nil {
		t.Fatalf("first: %v", o.err)
	}
	pending(t, second, "second")
	if err := b.e.Release(t.Context(), o.lease.ID, o.lease.Owner); err != nil {
		t.Fatal(err)
	}
	if o := wait(t, second, "second"); o.err != nil {
		t.Fatalf("second: %v", o.err)
	}
}

// TestDurableWorkIsTheTerms: the engine OnLead gives the leader admits
// against the same limits as every replica, and its leases are not
// carried to the next leader (which recovers durable work from its
// store); when the term ends here, OnLead hears nil.
func TestDurableWorkIsTheTerms(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 5*time.Second, "a", "b")
	a, b := ns["a"], ns["b"]
	leads := make(chan admission.Engine, 4)
	a.e.cfg.OnLead = func(e admission.Engine, _ uint64) { leads <- e }
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	var d admission.Engine
	select {
	case d = <-leads:
	case <-time.After(guard):
		t.Fatal("OnLead not called")
	}
	if d == nil {
		t.Fatal("OnLead(nil) at the start of a's term")
	}
	if err := b.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TryAcquire(t.Context(), admission.Request{ID: "task", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}}); err != nil {
		t.Fatalf("durable TryAcquire: %v", err)
	}
	if _, err := b.e.TryAcquire(t.Context(), admission.Request{ID: "x", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}}); !errors.Is(err, admission.ErrWouldWait) {
		t.Fatalf("TryAcquire beside a durable lease: %v; want ErrWouldWait", err)
	}

	elect(2, b, []string{"a", "b"}, a, b)
	ready(t, a, b)
	select {
	case d := <-leads:
		if d != nil {
			t.Fatal("OnLead at the end of a's term got an engine; want nil")
		}
	case <-time.After(guard):
		t.Fatal("OnLead(nil) not called when a's term ended")
	}
	if u, _ := used(t, b.e, "s"); u != 0 {
		t.Fatalf("under b: used %d; want 0 (durable leases are recovered from the store, not synced)", u)
	}
}

// TestFencesCarryToTheNextLeader: owners fenced and activated under one
// leader stay so under the next, though each replica recorded only its
// own calls: a fenced owner is refused, a scope whose owner's newer
// generation was activated stays usable.
func TestFencesCarryToTheNextLeader(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 5*time.Second, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	ctx := t.Context()
	n2 := admission.Owner{ID: "n2", Gen: 1}
	if err := b.e.SetScope(ctx, "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.e.SetScope(ctx, "slots", admission.ScopeConfig{Limit: 1, Owner: "node", OwnerGen: 1}); err != nil {
		t.Fatal(err)
	}
	l, err := a.e.TryAcquire(ctx, admission.Request{ID: "w", Owner: n2, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() error{
		func() error { return a.e.Fence(ctx, "n2", 1) },
		func() error { return a.e.Fence(ctx, "node", 1) },
		func() error { return a.e.Activate(ctx, "node", 2) },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}

	elect(2, b, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if err := b.e.Release(ctx, l.ID, n2); !errors.Is(err, admission.ErrStaleOwner) {
		t.Errorf("Release by n2@1, fenced under the old leader: %v; want ErrStaleOwner", err)
	}
	if _, err := b.e.TryAcquire(ctx, admission.Request{ID: "x", Owner: n2, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}}); err == nil {
		t.Error("TryAcquire by fenced n2@1 under the new leader was admitted")
	}
	if u, _ := used(t, b.e, "s"); u != 0 {
		t.Errorf("s under the new leader: used %d; want 0 (the fenced owner's lease is gone)", u)
	}
	if _, err := b.e.TryAcquire(ctx, admission.Request{ID: "y", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "slots", Amount: 1}}}}}); err != nil {
		t.Errorf("TryAcquire on a scope whose owner's generation 2 was activated: %v", err)
	}
}
