package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

func one(scope string) admission.Candidate {
	return admission.Candidate{Needs: []admission.Need{{Scope: scope, Amount: 1}}}
}

func release(t *testing.T, e *Engine, l admission.Lease) {
	t.Helper()
	if err := e.Release(t.Context(), l.ID, l.Owner); err != nil {
		t.Fatalf("Release(%d): %v", l.ID, err)
	}
}

// TestFailOpen: while no leader answers (the leader's term has passed on
// its clock, as when PostgreSQL is unreachable, and the other replica's
// session is cut), each of two replicas admits its half of a fail-open
// scope of limit 4, counting the lease it already held; a fail-closed
// scope answers ErrUnavailable; a waiter queues locally. When the next
// leader comes, the leases granted meanwhile are its (Used counts them),
// the waiter still queued moves to its queue, and each lease releases
// once.
func TestFailOpen(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 300*time.Millisecond, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	ctx := t.Context()
	// Each replica configures the scopes it uses, as each applies the
	// whole catalog: running open, it knows only its own.
	for _, e := range []*Engine{a.e, b.e} {
		if err := e.SetScope(ctx, "open", admission.ScopeConfig{Limit: 4, FailOpen: true}); err != nil {
			t.Fatal(err)
		}
		if err := e.SetScope(ctx, "closed", admission.ScopeConfig{Limit: 4}); err != nil {
			t.Fatal(err)
		}
	}
	h := tryAcquire(t, b.e, "h", "open") // held through the outage

	a.valid.Store(false) // a's term passes: it decides nothing more
	b.cut()

	aL1 := tryAcquire(t, a.e, "a1", "open")
	aL2 := tryAcquire(t, a.e, "a2", "open")
	if _, err := a.e.TryAcquire(ctx, admission.Request{ID: "a3", Candidates: []admission.Candidate{one("open")}}); !errors.Is(err, admission.ErrWouldWait) {
		t.Fatalf("a's third open admission: %v; want ErrWouldWait (its share is 2)", err)
	}
	if _, err := a.e.TryAcquire(ctx, admission.Request{ID: "c", Candidates: []admission.Candidate{one("closed")}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fail-closed scope while no leader answers: %v; want ErrUnavailable", err)
	}
	bL, err := b.e.TryAcquire(ctx, admission.Request{ID: "b1", Candidates: []admission.Candidate{one("closed"), one("open")}})
	if err != nil || bL.Candidate != 1 {
		t.Fatalf("b's open admission: candidate %d, %v; want candidate 1 (the fail-open one)", bL.Candidate, err)
	}
	if _, err := b.e.TryAcquire(ctx, admission.Request{ID: "b2", Candidates: []admission.Candidate{one("open")}}); !errors.Is(err, admission.ErrWouldWait) {
		t.Fatalf("b's second open admission: %v; want ErrWouldWait (h and b1 fill its share of 2)", err)
	}
	w1 := enqueue(t, a.e, "w1", "open")
	pending(t, w1, "w1 while a's share is full")
	release(t, a.e, aL2)
	o1 := wait(t, w1, "w1")
	if o1.err != nil {
		t.Fatalf("w1: %v", o1.err)
	}
	w2 := enqueue(t, a.e, "w2", "open")
	pending(t, w2, "w2 while a's share is full")
	if running, admitted := a.e.Open(); !running || admitted != 3 {
		t.Fatalf("a.Open() = %v, %d; want true, 3", running, admitted)
	}

	elect(2, b, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if running, _ := b.e.Open(); running {
		t.Fatal("b runs open under a leader")
	}
	if u, q := used(t, a.e, "open"); u != 4 || q != 1 {
		t.Fatalf("under the next leader: used %d, queued %d; want 4 (h, b1, a1, w1), 1 (w2)", u, q)
	}
	pending(t, w2, "w2 under the next leader")
	release(t, a.e, aL1)
	o2 := wait(t, w2, "w2")
	if o2.err != nil || o2.lease.ID>>40 != 2 {
		t.Fatalf("w2: lease %#x, %v; want a lease of epoch 2", uint64(o2.lease.ID), o2.err)
	}
	release(t, a.e, aL1) // twice: a no-op
	if u, _ := used(t, a.e, "open"); u != 4 {
		t.Fatalf("after a1's second release: used %d; want 4", u)
	}
	release(t, a.e, o1.lease)
	release(t, a.e, o2.lease)
	release(t, b.e, bL)
	release(t, b.e, h)
	if u, q := used(t, b.e, "open"); u != 0 || q != 0 {
		t.Fatalf("after every release: used %d, queued %d; want 0, 0", u, q)
	}
}

// TestFailOpenShare: a scope's limits are divided among the replicas,
// rounded down; a share of 0 makes the scope admit nothing here, and a
// scope with no limit, or a shadow one, fails open whatever it says. A
// budget fails closed whatever it says; a shadow one fails open without
// its budget.
func TestFailOpenShare(t *testing.T) {
	t.Parallel()
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	until := from.AddDate(0, 1, 0)
	for _, c := range []struct {
		name string
		cfg  admission.ScopeConfig
		n    int64
		want admission.ScopeConfig
		ok   bool
	}{
		{"closed", admission.ScopeConfig{Limit: 4}, 2, admission.ScopeConfig{}, false},
		{"halved", admission.ScopeConfig{Limit: 5, RPM: 60, TPM: 1000, QueueLimit: 3, FailOpen: true}, 2,
			admission.ScopeConfig{Limit: 2, RPM: 30, TPM: 500, QueueLimit: 1, FailOpen: true}, true},
		{"share of 0", admission.ScopeConfig{Limit: 2, FailOpen: true}, 3, admission.ScopeConfig{}, false},
		{"queue share of 0", admission.ScopeConfig{Limit: 9, QueueLimit: 2, FailOpen: true}, 3, admission.ScopeConfig{}, false},
		{"no limit", admission.ScopeConfig{MaxWait: time.Second}, 3, admission.ScopeConfig{MaxWait: time.Second}, true},
		{"owner", admission.ScopeConfig{Owner: "node", OwnerGen: 1}, 1, admission.ScopeConfig{}, false},
		{"shadow", admission.ScopeConfig{Limit: 4, QueueLimit: 2, Shadow: true}, 2,
			admission.ScopeConfig{Limit: 2, QueueLimit: 1, Shadow: true}, true},
		{"shadow share of 0", admission.ScopeConfig{Limit: 1, Shadow: true}, 3, admission.ScopeConfig{Shadow: true}, true},
		{"shadow owner", admission.ScopeConfig{Limit: 1, Owner: "node", OwnerGen: 1, Shadow: true}, 1, admission.ScopeConfig{}, false},
		{"budget", admission.ScopeConfig{Limit: 4, Budget: 100, BudgetFrom: from, BudgetUntil: until, FailOpen: true}, 2, admission.ScopeConfig{}, false},
		{"budget alone", admission.ScopeConfig{Budget: 100, BudgetFrom: from, BudgetUntil: until}, 2, admission.ScopeConfig{}, false},
		{"shadow budget", admission.ScopeConfig{Budget: 100, BudgetSpent: 5, BudgetFrom: from, BudgetUntil: until, Shadow: true}, 2,
			admission.ScopeConfig{Shadow: true}, true},
	} {
		got, ok := share(c.cfg, c.n)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s: share(%+v, %d) = %+v, %v; want %+v, %v", c.name, c.cfg, c.n, got, ok, c.want, c.ok)
		}
	}
}

// TestFailClosedWithoutFailOpenScopes: with no scope that fails open, an
// engine without a leader stays closed: calls fail with ErrUnavailable.
func TestFailClosedWithoutFailOpenScopes(t *testing.T) {
	t.Parallel()
	ns := startNodes(t, 200*time.Millisecond, "a", "b")
	a, b := ns["a"], ns["b"]
	elect(1, a, []string{"a", "b"}, a, b)
	ready(t, a, b)
	if err := b.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 4}); err != nil {
		t.Fatal(err)
	}
	a.e.Close()
	if _, err := b.e.TryAcquire(t.Context(), admission.Request{ID: "x", Candidates: []admission.Candidate{one("s")}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("TryAcquire with the leader gone: %v; want ErrUnavailable", err)
	}
	if running, _ := b.e.Open(); running {
		t.Fatal("b runs open with no scope that fails open")
	}
}
