package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// The leader's decisions about replicas that go away (silent.go): a
// replica proven dead gives its leases back at once; a silent one keeps
// them until each one's bound, its own word, or proof that it died;
// ReleaseAtTimeout gives them back at the drop; the leader's own
// replica's leases reach the next leader through the mirror.

const silentTimeout = 200 * time.Millisecond

// silentFleet is two nodes, a leading, on a fake clock, each with scope
// s of limit 1.
func silentFleet(t *testing.T, edit func(*Config)) (a, b *node, clk *clock.Fake) {
	t.Helper()
	clk = clock.NewFake(time.Unix(1_000_000, 0))
	ns := startNodesWith(t, silentTimeout, func(c *Config) {
		c.Options.Clock = clk
		// As a Member sets it: past the new leader's barrier, so that a
		// caller waits out the barrier rather than fail beside it.
		c.Unavailable = 3 * silentTimeout
		if edit != nil {
			edit(c)
		}
	}, "a", "b")
	a, b = ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	for _, n := range []*node{a, b} {
		if err := n.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, clk
}

// holdFor asks e, at once, for s with the given hold bound.
func holdFor(t *testing.T, e *Engine, id string, hold time.Duration) admission.Lease {
	t.Helper()
	l, err := e.TryAcquire(t.Context(), admission.Request{ID: id, Hold: hold,
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
	if err != nil {
		t.Fatalf("TryAcquire(%s): %v", id, err)
	}
	return l
}

// peerState reports how leader's engine sees replica: attached (it has
// a session or is in process), silent (dropped, its leases held), and
// how many leases it holds there.
func peerState(e *Engine, replica string) (attached, silent bool, leases int) {
	e.mu.Lock()
	l := e.lead
	e.mu.Unlock()
	if l == nil {
		return false, false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.peers[replica]; p != nil {
		return p.session != nil, false, len(p.leases)
	}
	for _, p := range l.silent {
		if p.replica == replica {
			return false, true, len(p.leases)
		}
	}
	return false, false, 0
}

// waitPeer waits until cond holds of how leader e sees replica.
func waitPeer(t *testing.T, e *Engine, replica, what string, cond func(attached, silent bool, leases int) bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond(peerState(e, replica)) {
		if time.Now().After(deadline) {
			a, s, n := peerState(e, replica)
			t.Fatalf("%s: replica %s attached %v, silent %v, %d leases", what, replica, a, s, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// goSilent makes b silent and waits until the leader a has dropped it
// (its session gone for the session timeout, which the fake clock
// passes).
func goSilent(t *testing.T, a, b *node, clk *clock.Fake) {
	t.Helper()
	b.silence()
	waitPeer(t, a.e, "b", "b's session timed out at the leader", func(att, _ bool, _ int) bool { return !att })
	clk.Advance(silentTimeout)
}

// TestSilentReplicaHeldUntilBound: a replica that goes silent holding
// a lease (its process paused: no frame, no end) keeps it past the
// drop: the waiter of another replica is admitted only once the lease's
// bound — its hold and the session timeout, from the grant — has passed.
func TestSilentReplicaHeldUntilBound(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, nil)
	start := clk.Now()
	holdFor(t, b.e, "h", time.Minute)
	w := enqueue(t, a.e, "w", "s")
	goSilent(t, a, b, clk)
	waitPeer(t, a.e, "b", "b dropped silent", func(_, silent bool, n int) bool { return silent && n == 1 })
	if u, _ := used(t, a.e, "s"); u != 1 {
		t.Fatalf("used %d after b went silent; want 1 (its lease held)", u)
	}
	clk.Set(start.Add(time.Minute + silentTimeout - time.Millisecond))
	pending(t, w, "w just before the bound of b's lease")
	clk.Set(start.Add(time.Minute + silentTimeout))
	if o := wait(t, w, "w at the bound"); o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestSilentReplicaWithoutBound: a lease without a bound is held for a
// silent replica however long it stays silent, until it is proven dead.
func TestSilentReplicaWithoutBound(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, nil)
	holdFor(t, b.e, "h", 0)
	w := enqueue(t, a.e, "w", "s")
	goSilent(t, a, b, clk)
	waitPeer(t, a.e, "b", "b dropped silent", func(_, silent bool, n int) bool { return silent && n == 1 })
	clk.Advance(24 * time.Hour)
	pending(t, w, "w a day after b went silent")
	b.dead.Store(true)
	clk.Advance(silentTimeout) // the next probe of the silent replicas
	if o := wait(t, w, "w once b is proven dead"); o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestDeadReplicaReleasedAtOnce: a replica proven dead gives its lease
// back at once, without waiting out the session timeout (the fake clock
// does not move).
func TestDeadReplicaReleasedAtOnce(t *testing.T) {
	t.Parallel()
	a, b, _ := silentFleet(t, nil)
	holdFor(t, b.e, "h", time.Minute)
	w := enqueue(t, a.e, "w", "s")
	b.die()
	if o := wait(t, w, "w after b died"); o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestSilentReplicaWord: a silent replica that comes back and syncs is
// held to its own word: the lease it still names is kept (not counted
// twice), and its release admits the waiter.
func TestSilentReplicaWord(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, nil)
	h := holdFor(t, b.e, "h", time.Minute)
	w := enqueue(t, a.e, "w", "s")
	goSilent(t, a, b, clk)
	waitPeer(t, a.e, "b", "b dropped silent", func(_, silent bool, n int) bool { return silent && n == 1 })
	b.unsilence()
	waitPeer(t, a.e, "b", "b back", func(att, _ bool, n int) bool { return att && n == 1 })
	if err := b.e.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	if u, _ := used(t, a.e, "s"); u != 1 {
		t.Fatalf("used %d after b synced again; want 1 (its lease, once)", u)
	}
	pending(t, w, "w while b still holds its lease")
	if err := b.e.Release(t.Context(), h.ID, h.Owner); err != nil {
		t.Fatal(err)
	}
	if o := wait(t, w, "w after b's release"); o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestSilentReplicaWordReleasesTheRest: what a silent replica no longer
// names when it syncs again goes back.
func TestSilentReplicaWordReleasesTheRest(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, nil)
	h := holdFor(t, b.e, "h", time.Minute)
	w := enqueue(t, a.e, "w", "s")
	goSilent(t, a, b, clk)
	waitPeer(t, a.e, "b", "b dropped silent", func(_, silent bool, n int) bool { return silent && n == 1 })
	b.e.forget(h.ID) // its call ended while it was away
	b.unsilence()
	if o := wait(t, w, "w after b synced without its lease"); o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestReleaseSilentAtTimeout: with ReleaseAtTimeout the leader gives a
// silent replica's leases back when it drops it, bound or not.
func TestReleaseSilentAtTimeout(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, func(c *Config) { c.ReleaseSilent = ReleaseAtTimeout })
	holdFor(t, b.e, "h", time.Hour)
	w := enqueue(t, a.e, "w", "s")
	goSilent(t, a, b, clk)
	if o := wait(t, w, "w after b was dropped"); o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestSilentLeaderLeasesCarried: the leader's own replica's lease
// reaches the next leader through the mirror when the leader goes
// silent: the next leader holds it until its bound, though the old
// leader never syncs.
func TestSilentLeaderLeasesCarried(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, nil)
	start := clk.Now()
	holdFor(t, a.e, "h", time.Minute)
	deadline := time.Now().Add(guard)
	for b.e.mirrorCount() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("b keeps a mirror of %d leases; want 1 (the leader's own)", b.e.mirrorCount())
		}
		time.Sleep(time.Millisecond)
	}
	// a is paused: b takes the term and a never syncs.
	b.e.SetTerm(Term{Epoch: 2, Leader: "b", Addr: b.addr}, true, []string{"a", "b"})
	got := make(chan error, 1)
	go func() {
		_, err := b.e.TryAcquire(context.Background(), admission.Request{ID: "x",
			Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
		got <- err
	}()
	waitPeer(t, b.e, "a", "a's lease held for it", func(_, silent bool, n int) bool { return silent && n == 1 })
	clk.Advance(silentTimeout) // the barrier gives up on a
	select {
	case err := <-got:
		if !errors.Is(err, admission.ErrWouldWait) {
			t.Fatalf("TryAcquire under the new leader while a's call may run: %v; want ErrWouldWait", err)
		}
	case <-time.After(guard):
		t.Fatal("TryAcquire never answered")
	}
	w := enqueue(t, b.e, "w", "s")
	clk.Set(start.Add(time.Minute + silentTimeout - time.Millisecond))
	pending(t, w, "w before the bound of a's lease")
	clk.Set(start.Add(time.Minute + 2*silentTimeout))
	if o := wait(t, w, "w after the bound"); o.err != nil {
		t.Fatalf("w: %v", o.err)
	}
}

// TestSilentLeaderReleasedAtTimeout: with ReleaseAtTimeout the leader
// mirrors nothing, and a silent leader's leases count no more once the
// next leader stops waiting for it.
func TestSilentLeaderReleasedAtTimeout(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, func(c *Config) { c.ReleaseSilent = ReleaseAtTimeout })
	holdFor(t, a.e, "h", time.Minute)
	b.e.SetTerm(Term{Epoch: 2, Leader: "b", Addr: b.addr}, true, []string{"a", "b"})
	got := make(chan error, 1)
	go func() {
		_, err := b.e.Acquire(context.Background(), admission.Request{ID: "x",
			Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
		got <- err
	}()
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("Acquire under the new leader: %v", err)
			}
		case <-time.After(guard):
			t.Error("Acquire never admitted")
		}
	}()
	if !clk.AdvanceUntil(ch, silentTimeout, 10*silentTimeout, guard) {
		t.Fatal("not admitted")
	}
	if n := b.e.mirrorCount(); n != 0 {
		t.Errorf("b keeps a mirror of %d leases; want none", n)
	}
}
