package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// TestWireBudgetExceeded: a BudgetExceededError crosses the wire whole:
// its scope, its reset and its sentinel.
func TestWireBudgetExceeded(t *testing.T) {
	t.Parallel()
	reset := time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC)
	b, err := json.Marshal(&frame{Op: opReply, Err: encodeErr(fmt.Errorf("enqueue: %w", &admission.BudgetExceededError{Scope: "key:k", ResetAt: reset}))})
	if err != nil {
		t.Fatal(err)
	}
	var f frame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	got := f.Err.err()
	var be *admission.BudgetExceededError
	if !errors.As(got, &be) || !errors.Is(got, admission.ErrBudgetExceeded) {
		t.Fatalf("came back as %v; want a *BudgetExceededError", got)
	}
	if be.Scope != "key:k" || !be.ResetAt.Equal(reset) {
		t.Errorf("came back as %+v; want scope key:k, reset %s", *be, reset)
	}
}

// TestSettledLeasesCarryTheirCost: a lease reconciled before the term
// passes is held by the next leader at its settled cost, not its
// estimate — whether its replica re-asserts it (b's) or the mirror
// carries it for a leader gone silent (a's own).
func TestSettledLeasesCarryTheirCost(t *testing.T) {
	t.Parallel()
	a, b, clk := silentFleet(t, nil)
	bud := admission.ScopeConfig{Budget: 1000, BudgetFrom: clk.Now().Add(-time.Hour), BudgetUntil: clk.Now().Add(time.Hour)}
	for _, n := range []*node{a, b} {
		if err := n.e.SetScope(t.Context(), "bud", bud); err != nil {
			t.Fatal(err)
		}
	}
	costs := func(e *Engine, id string, est, real int64) {
		t.Helper()
		l, err := e.TryAcquire(t.Context(), admission.Request{ID: id, Hold: time.Minute,
			Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "bud", Amount: 1}}, Cost: est}}})
		if err != nil {
			t.Fatalf("TryAcquire(%s): %v", id, err)
		}
		if err := e.Reconcile(t.Context(), l.ID, l.Owner, admission.Settlement{Cost: real}); err != nil {
			t.Fatalf("Reconcile(%s): %v", id, err)
		}
	}
	costs(b.e, "hb", 60, 20)
	costs(a.e, "ha", 30, 10)
	waitMirroredCost(t, b.e, 10)

	// a is paused: b takes the term and a never syncs.
	b.e.SetTerm(Term{Epoch: 2, Leader: "b", Addr: b.addr}, true, []string{"a", "b"})
	got := make(chan admission.ScopeStats, 1)
	go func() {
		st, err := b.e.Scope(context.Background(), "bud")
		if err != nil {
			t.Errorf("Scope(bud) under the new leader: %v", err)
		}
		got <- st
	}()
	waitPeer(t, b.e, "a", "a's lease held for it", func(_, silent bool, n int) bool { return silent && n == 1 })
	clk.Advance(silentTimeout) // the barrier gives up on a
	select {
	case st := <-got:
		if st.BudgetReserved != 30 {
			t.Errorf("the new leader reserves %d of bud; want 30 (the settled 20 and 10, not the estimated 60 and 30)", st.BudgetReserved)
		}
	case <-time.After(guard):
		t.Fatal("Scope never answered")
	}
}

// waitMirroredCost waits until e's mirror holds a lease of that cost.
func waitMirroredCost(t *testing.T, e *Engine, cost int64) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for {
		e.mu.Lock()
		found := false
		for _, m := range e.mirror {
			found = found || (len(m.m.Req.Candidates) == 1 && m.m.Req.Candidates[0].Cost == cost)
		}
		e.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mirrored lease of cost %d within %s", cost, guard)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNewLeaderStartsFromTheSpentCounted: after the leader dies, with
// no reconfiguration since the replicas configured the budget, the next
// leader starts the window from what the dead one had counted, not from
// the configured figure: the leader's own replica's spend reached every
// replica with its mirror, another replica's with its (lazy) release's
// reply; and it takes the larger figure, though the replica that knew
// less synced first.
func TestNewLeaderStartsFromTheSpentCounted(t *testing.T) {
	t.Parallel()
	ns := startNodesWith(t, 5*time.Second, func(c *Config) { c.LazyRelease = true }, "a", "b", "c")
	a, b, c := ns["a"], ns["b"], ns["c"]
	elect(1, a, []string{"a", "b", "c"}, a, b, c)
	ready(t, a, b, c)
	now := time.Now()
	bud := admission.ScopeConfig{Budget: 1000, BudgetFrom: now.Add(-time.Hour), BudgetUntil: now.Add(time.Hour), BudgetSpent: 100}
	for _, n := range []*node{a, b, c} {
		if err := n.e.SetScope(t.Context(), "bud", bud); err != nil {
			t.Fatal(err)
		}
	}
	spend := func(e *Engine, id string, est, real int64) {
		t.Helper()
		l, err := e.TryAcquire(t.Context(), admission.Request{ID: id,
			Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "bud", Amount: 1}}, Cost: est}}})
		if err != nil {
			t.Fatalf("TryAcquire(%s): %v", id, err)
		}
		if err := e.Reconcile(t.Context(), l.ID, l.Owner, admission.Settlement{Cost: real}); err != nil {
			t.Fatalf("Reconcile(%s): %v", id, err)
		}
		if err := e.Release(t.Context(), l.ID, l.Owner); err != nil {
			t.Fatalf("Release(%s): %v", id, err)
		}
	}
	spend(a.e, "on the leader", 50, 20)
	waitSpent(t, b.e, "bud", 120)
	waitSpent(t, c.e, "bud", 120)
	spend(b.e, "on b", 50, 30)
	waitSpent(t, b.e, "bud", 150)

	a.die()
	term := Term{Epoch: 2, Leader: "c", Addr: c.addr}
	live := []string{"b", "c"}
	c.e.SetTerm(term, true, live)
	waitUntil(t, "c's own sync at its first barrier", func() bool {
		l := leaderOf(c.e)
		if l == nil || l.epoch != 2 {
			return false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		w := l.stages[scoped].waiting
		return len(w) == 1 && w["b"]
	})
	b.e.SetTerm(term, false, live)
	ready(t, b, c)
	st, err := c.e.Scope(t.Context(), "bud")
	if err != nil {
		t.Fatal(err)
	}
	if st.BudgetSpent != 150 {
		t.Errorf("the new leader counts %d spent; want 150 (the configured 100, a's 20 and b's 30)", st.BudgetSpent)
	}
}

// waitSpent waits until e keeps spent as what scope spent in its
// window, as a leader told it.
func waitSpent(t *testing.T, e *Engine, scope string, spent int64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%s spent %d", scope, spent), func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.spent[scope].Spent == spent
	})
}
