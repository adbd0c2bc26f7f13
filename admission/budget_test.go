package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// The budget's bookkeeping seen from inside: what the conformance suite
// cannot reach through the Engine alone.

func (b *shadowBundle) budget(cost int64, until time.Duration) ScopeConfig {
	now := b.clk.Now()
	return ScopeConfig{Budget: cost, BudgetFrom: now, BudgetUntil: now.Add(until)}
}

func costOf(cost int64, scopes ...string) Candidate {
	c := Candidate{Cost: cost}
	for _, s := range scopes {
		c.Needs = append(c.Needs, Need{Scope: s, Amount: 1})
	}
	return c
}

func (b *shadowBundle) enqueue(t *testing.T, id string, cands ...Candidate) chan error {
	t.Helper()
	ch := make(chan error, 1)
	if err := b.m.Enqueue(b.ctx, Request{ID: id, Candidates: cands}, func(_ Lease, err error) { ch <- err }); err != nil {
		t.Fatalf("Enqueue(%s): %v", id, err)
	}
	return ch
}

// TestBudgetDropsWaitersParkedElsewhere: the spend of a release drops at
// once the candidates it leaves no room for, of waiters held back by
// another scope too, or behind a waiter that still fits; a waiter left
// with none fails with the budget's error, one with a fallback waits on.
func TestBudgetDropsWaitersParkedElsewhere(t *testing.T) {
	t.Parallel()
	b := setupShadow(t)
	b.set(t, "c", ScopeConfig{Limit: 1})
	b.set(t, "b", b.budget(100, time.Hour))
	b.hold(t, costOf(0, "c"))
	la := b.hold(t, costOf(60, "b"))
	lx := b.hold(t, costOf(20, "b"))
	ahead := b.enqueue(t, "ahead", costOf(30, "b"))         // fits once x settles
	behind := b.enqueue(t, "behind", costOf(50, "b"))       // behind it in b
	elsewhere := b.enqueue(t, "else", costOf(50, "c", "b")) // held back by c
	fallback := b.enqueue(t, "fb", costOf(50, "c", "b"), costOf(0, "c"))
	b.release(t, la) // 60 spent: 50 never fits again
	for _, w := range []struct {
		id string
		ch chan error
	}{{"behind", behind}, {"else", elsewhere}} {
		select {
		case err := <-w.ch:
			var be *BudgetExceededError
			if !errors.As(err, &be) || be.Scope != "b" {
				t.Errorf("%s: %v; want a *BudgetExceededError of b", w.id, err)
			}
		default:
			t.Errorf("%s still queued after the release spent its budget", w.id)
		}
	}
	select {
	case err := <-ahead:
		t.Fatalf("ahead ended with %v; want it waiting on x's reservation", err)
	default:
	}
	if err := b.m.Reconcile(b.ctx, lx.ID, lx.Owner, Settlement{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ahead:
		if err != nil {
			t.Errorf("ahead: %v; want a lease", err)
		}
	default:
		t.Errorf("ahead still queued once x settled at no cost")
	}
	select {
	case err := <-fallback:
		t.Errorf("fb ended with %v; want it queued on its fallback", err)
	default:
	}
	if st := b.stats(t, "c"); st.Queued != 1 {
		t.Errorf("c queues %d; want 1 (fb)", st.Queued)
	}
	if b.stats(t, "b").Queued != 0 || b.m.scopes["b"].overs.len() != 0 {
		t.Errorf("b still queues %d, with %d in its heap; want none", b.stats(t, "b").Queued, b.m.scopes["b"].overs.len())
	}
}

// TestBudgetEndsEveryPath: expiry and fencing spend a lease's cost as a
// release does, and Restore reserves whatever the budget has left.
func TestBudgetEndsEveryPath(t *testing.T) {
	t.Parallel()
	b := setupShadow(t)
	cfg := b.budget(100, time.Hour)
	cfg.LeaseTTL = time.Minute
	b.set(t, "b", cfg)
	b.hold(t, costOf(10, "b"))
	b.clk.Advance(time.Minute)
	if st := b.stats(t, "b"); st.BudgetSpent != 10 || st.BudgetReserved != 0 {
		t.Errorf("after expiry: spent %d reserved %d; want 10, 0", st.BudgetSpent, st.BudgetReserved)
	}
	owner := Owner{ID: "node", Gen: 1}
	if _, err := b.m.TryAcquire(b.ctx, Request{ID: "o", Owner: owner, Candidates: []Candidate{costOf(20, "b")}}); err != nil {
		t.Fatal(err)
	}
	if err := b.m.Fence(b.ctx, owner.ID, owner.Gen); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(t, "b"); st.BudgetSpent != 30 || st.BudgetReserved != 0 {
		t.Errorf("after the fence: spent %d reserved %d; want 30, 0", st.BudgetSpent, st.BudgetReserved)
	}
	if _, err := b.m.Restore(b.ctx, Request{ID: "r", Candidates: []Candidate{costOf(500, "b")}}, 0); err != nil {
		t.Fatalf("Restore past the budget: %v", err)
	}
	if st := b.stats(t, "b"); st.BudgetReserved != 500 {
		t.Errorf("after Restore: reserved %d; want 500", st.BudgetReserved)
	}
}

// TestBudgetConfiguration: a window already past when configured rolls
// at once; a budget removed and set again applies BudgetSpent again;
// RemoveScope and Budget 0 stop counting the scope as a budget.
func TestBudgetConfiguration(t *testing.T) {
	t.Parallel()
	b := setupShadow(t)
	now := b.clk.Now()
	past := ScopeConfig{Budget: 100, BudgetSpent: 90, BudgetFrom: now.Add(-2 * time.Hour), BudgetUntil: now.Add(-time.Hour)}
	b.set(t, "b", past)
	st := b.stats(t, "b")
	if st.BudgetSpent != 0 || !st.BudgetFrom.Equal(past.BudgetUntil) || !st.BudgetUntil.IsZero() {
		t.Errorf("a past window: spent %d, window [%s, %s); want 0 from its end, open", st.BudgetSpent, st.BudgetFrom, st.BudgetUntil)
	}
	if b.m.budgetScopes != 1 {
		t.Errorf("budgetScopes = %d; want 1", b.m.budgetScopes)
	}
	b.set(t, "b", ScopeConfig{})
	if b.m.budgetScopes != 0 {
		t.Errorf("budgetScopes = %d after Budget 0; want 0", b.m.budgetScopes)
	}
	cur := b.budget(100, time.Hour)
	cur.BudgetSpent = 40
	b.set(t, "b", cur)
	if st := b.stats(t, "b"); st.BudgetSpent != 40 {
		t.Errorf("a budget set again: spent %d; want its BudgetSpent, 40", st.BudgetSpent)
	}
	if err := b.m.RemoveScope(b.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if b.m.budgetScopes != 0 {
		t.Errorf("budgetScopes = %d after RemoveScope; want 0", b.m.budgetScopes)
	}
}

// TestBudgetEnforcedAfterShadow: a shadow budget that starts to enforce
// drops the queued candidates its spend no longer leaves room for.
func TestBudgetEnforcedAfterShadow(t *testing.T) {
	t.Parallel()
	b := setupShadow(t)
	b.set(t, "c", ScopeConfig{Limit: 1})
	cfg := b.budget(100, time.Hour)
	cfg.BudgetSpent, cfg.Shadow = 90, true
	b.set(t, "b", cfg)
	b.hold(t, costOf(0, "c"))
	w := b.enqueue(t, "w", costOf(20, "c", "b"), costOf(0, "c"))
	cfg.Shadow = false
	b.set(t, "b", cfg)
	if st := b.stats(t, "b"); st.Queued != 0 {
		t.Errorf("b queues %d once enforced; want 0 (w's candidate there dropped)", st.Queued)
	}
	if st := b.stats(t, "c"); st.Queued != 1 {
		t.Errorf("c queues %d; want 1 (w, on its fallback)", st.Queued)
	}
	select {
	case err := <-w:
		t.Errorf("w ended with %v; want it queued on its fallback", err)
	default:
	}
}

func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := ScopeConfig{Budget: 1, BudgetFrom: from, BudgetUntil: from.Add(time.Hour)}
	if err := ok.Validate(); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	withFailOpen := ok
	withFailOpen.FailOpen = true
	if err := withFailOpen.Validate(); err != nil {
		t.Errorf("a budget that says it fails open (it fails closed): %v", err)
	}
	if err := (Candidate{Needs: []Need{{Scope: "b"}}, Cost: -1}).validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative cost: %v; want ErrInvalid", err)
	}
	e := &BudgetExceededError{Scope: "b"}
	if !errors.Is(e, ErrBudgetExceeded) || errors.Is(e, ErrNoCandidate) || e.Error() == "" {
		t.Errorf("%v: want ErrBudgetExceeded alone", e)
	}
}

// TestSpendAtLeast: a figure counted elsewhere for the window in force
// raises what it has spent, and drops at once the waiters it leaves no
// room for; a smaller figure, or one of another window, changes nothing.
func TestSpendAtLeast(t *testing.T) {
	t.Parallel()
	b := setupShadow(t)
	cfg := b.budget(100, time.Hour)
	cfg.Limit = 1
	b.set(t, "b", cfg)
	b.release(t, b.hold(t, costOf(10, "b")))
	b.hold(t, costOf(30, "b"))
	w := b.enqueue(t, "w", costOf(50, "b")) // waits for the limit: 10+30+50 fits
	for _, c := range []struct {
		what  string
		from  time.Time
		spent int64
	}{
		{"a smaller figure", cfg.BudgetFrom, 5},
		{"another window's", cfg.BudgetFrom.Add(-time.Hour), 90},
	} {
		if err := b.m.SpendAtLeast(b.ctx, "b", c.from, c.spent); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if st := b.stats(t, "b"); st.BudgetSpent != 10 {
			t.Fatalf("after %s: spent %d; want 10", c.what, st.BudgetSpent)
		}
	}
	select {
	case err := <-w:
		t.Fatalf("w ended before the raise: %v", err)
	default:
	}
	if err := b.m.SpendAtLeast(b.ctx, "b", cfg.BudgetFrom, 60); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(t, "b"); st.BudgetSpent != 60 {
		t.Errorf("after the raise: spent %d; want 60", st.BudgetSpent)
	}
	select {
	case err := <-w:
		var be *BudgetExceededError
		if !errors.As(err, &be) || be.Scope != "b" {
			t.Errorf("w: %v; want a *BudgetExceededError of b", err)
		}
	default:
		t.Error("w still waits; 60 spent leaves no room for its 50")
	}
	if err := b.m.SpendAtLeast(b.ctx, "x", cfg.BudgetFrom, 1); !errors.Is(err, ErrUnknownScope) {
		t.Errorf("SpendAtLeast of an unknown scope: %v; want ErrUnknownScope", err)
	}
}

// TestOnSpend: each settlement in a budget scope tells Options.OnSpend
// the scope's spend in its window; a scope without a budget tells
// nothing.
func TestOnSpend(t *testing.T) {
	t.Parallel()
	var got []Spend
	clk := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	m := NewMemory(Options{Clock: clk, OnSpend: func(s Spend) { got = append(got, s) }})
	t.Cleanup(m.Close)
	b := &shadowBundle{m: m, clk: clk, ctx: context.Background()}
	b.set(t, "b", b.budget(100, time.Hour))
	b.set(t, "plain", ScopeConfig{})
	b.release(t, b.hold(t, costOf(10, "b", "plain")))
	b.release(t, b.hold(t, costOf(5, "b")))
	from := clk.Now()
	want := []Spend{{"b", from, 10}, {"b", from, 15}}
	if len(got) != len(want) {
		t.Fatalf("told %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i].Scope != want[i].Scope || !got[i].From.Equal(want[i].From) || got[i].Spent != want[i].Spent {
			t.Errorf("told %+v; want %+v", got[i], want[i])
		}
	}
}
