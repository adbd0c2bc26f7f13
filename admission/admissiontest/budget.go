package admissiontest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// windowEnd ends the budget window the tests configure, an hour from start.
var windowEnd = start.Add(time.Hour)

func budgetScope(budget, spent int64) admission.ScopeConfig {
	return admission.ScopeConfig{Budget: budget, BudgetSpent: spent, BudgetFrom: start, BudgetUntil: windowEnd}
}

// costs is a candidate reserving cost in each scope.
func costs(cost int64, scopes ...string) admission.Candidate {
	c := one(scopes...)
	c.Cost = cost
	return c
}

// wantBudget checks a scope's spent and reserved cost.
func (h *harness) wantBudget(name string, spent, reserved int64) {
	h.t.Helper()
	st := h.stats(name)
	if st.BudgetSpent != spent || st.BudgetReserved != reserved {
		h.t.Errorf("scope %s: budget spent=%d reserved=%d, want spent=%d reserved=%d",
			name, st.BudgetSpent, st.BudgetReserved, spent, reserved)
	}
}

func (h *harness) settle(l admission.Lease, tokens, cost int64) {
	h.t.Helper()
	if err := h.e.Reconcile(h.ctx, l.ID, l.Owner, admission.Settlement{Tokens: tokens, Cost: cost}); err != nil {
		h.t.Fatalf("Reconcile(lease %d of %s, cost %d): %v", l.ID, l.WaiterID, cost, err)
	}
}

// wantBudgetExceeded checks that err is a *BudgetExceededError naming
// scope, with the window's end as ResetAt.
func wantBudgetExceeded(t *testing.T, what string, err error, scope string, reset time.Time) {
	t.Helper()
	var be *admission.BudgetExceededError
	if !errors.As(err, &be) || !errors.Is(err, admission.ErrBudgetExceeded) {
		t.Errorf("%s: %v, want a *BudgetExceededError", what, err)
		return
	}
	if be.Scope != scope || !be.ResetAt.Equal(reset) {
		t.Errorf("%s: %+v, want scope %s and ResetAt %s", what, *be, scope, reset)
	}
}

// 16. A scope's Budget: a candidate reserves its Cost, Reconcile settles
// it, a release counts it spent; a cost that can never fit what the window
// has left is refused at once, one that only reservations keep out waits.
func exerciseBudgets(t *testing.T, newEngine NewEngine) {
	budgetReservations(t, newEngine)
	budgetRefusals(t, newEngine)
	budgetWindows(t, newEngine)
	budgetBadInput(t, newEngine)
	// With one lease in flight at a time, the spend passes the budget by
	// at most what one settlement added beyond its estimate; with n, by
	// at most what n did.
	run(t, "NeverOverOneInFlight", newEngine, func(t *testing.T, h *harness) { budgetChurn(t, h, 1) })
	run(t, "NeverOverConcurrently", newEngine, func(t *testing.T, h *harness) { budgetChurn(t, h, 4) })
}

// budgetReservations: what a lease reserves, settles and spends, and a
// waiter that reservations keep out.
func budgetReservations(t *testing.T, newEngine NewEngine) {
	run(t, "ReserveAndSettle", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 0))
		la := h.holdReq(req("a", costs(30, "b")))
		if la.Cost != 30 {
			t.Errorf("lease a reserves a cost of %d, want 30", la.Cost)
		}
		h.wantBudget("b", 0, 30)
		h.settle(la, 0, 20)
		h.wantBudget("b", 0, 20)
		h.release(la)
		h.wantBudget("b", 20, 0)

		// Released without a settlement: the whole reservation is spent.
		lb := h.holdReq(req("b1", costs(25, "b")))
		h.wantBudget("b", 20, 25)
		h.release(lb)
		h.wantBudget("b", 45, 0)
		// A second release changes nothing.
		h.release(lb)
		h.wantBudget("b", 45, 0)

		// Scopes without a budget count too, and limit nothing.
		h.setScope("free", admission.ScopeConfig{})
		lf := h.holdReq(req("f", costs(1000, "free")))
		h.release(lf)
		h.wantBudget("free", 1000, 0)
		st := h.stats("b")
		if !st.BudgetFrom.Equal(start) || !st.BudgetUntil.Equal(windowEnd) {
			t.Errorf("scope b's window [%s, %s), want [%s, %s)", st.BudgetFrom, st.BudgetUntil, start, windowEnd)
		}
	})

	run(t, "WaitsOnReservations", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 0))
		la := h.holdReq(req("a", costs(60, "b")))
		_, err := h.e.TryAcquire(h.ctx, req("try", costs(50, "b")))
		wantErr(t, "TryAcquire of 50 beside 60 reserved of 100", err, admission.ErrWouldWait)
		w := h.enqueue(req("w", costs(50, "b")))
		w.pending()
		h.wantUsage("b", 1, 1, 1)
		// a cost 40, not 60: w fits at once.
		h.settle(la, 0, 40)
		lw := w.admittedNow("the settlement of a")
		h.wantBudget("b", 0, 90)
		h.release(la)
		h.release(lw)
		h.wantBudget("b", 90, 0)
	})

	run(t, "DroppedWhenSpent", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 0))
		la := h.holdReq(req("a", costs(60, "b")))
		w := h.enqueue(req("w", costs(50, "b")))
		// a cost more than it reserved: w still waits, as a's cost is
		// not spent until a ends.
		h.settle(la, 0, 70)
		w.pending()
		h.wantBudget("b", 0, 70)
		h.release(la)
		r := w.wait()
		wantBudgetExceeded(t, "w after 70 spent of 100", r.err, "b", windowEnd)
		h.wantEvent("budget_exceeded w", isWaiterEvent(admission.OutcomeBudgetExceeded, "w"))
		h.wantBudget("b", 70, 0)
		h.wantUsage("b", 0, 0, 0)
	})

}

// budgetRefusals: a cost that can never fit is refused at once, or
// dropped when the budget is lowered, and a fallback serves instead.
func budgetRefusals(t *testing.T, newEngine NewEngine) {
	run(t, "RefusedAtOnce", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 90))
		big := costs(20, "b")
		_, err := h.e.TryAcquire(h.ctx, req("w1", big))
		wantBudgetExceeded(t, "TryAcquire of 20 with 10 left", err, "b", windowEnd)
		h.wantEvent("budget_exceeded w1", isWaiterEvent(admission.OutcomeBudgetExceeded, "w1"))
		w2 := h.newWaiter(req("w2", big))
		wantBudgetExceeded(t, "Enqueue of 20 with 10 left", h.e.Enqueue(h.ctx, w2.req, w2.notify), "b", windowEnd)
		ctx, cancel := context.WithTimeout(h.ctx, guard)
		defer cancel()
		_, err = h.e.Acquire(ctx, req("w3", big))
		wantBudgetExceeded(t, "Acquire of 20 with 10 left", err, "b", windowEnd)
		h.wantBudget("b", 90, 0)
		// What is left still serves.
		h.release(h.holdReq(req("w4", costs(10, "b"))))
		h.wantBudget("b", 100, 0)
	})

	run(t, "FallbackWhenDropped", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 0))
		h.setScope("o", admission.ScopeConfig{Limit: 1})
		// Refused at arrival: the fallback serves.
		h.setScope("spent", budgetScope(100, 100))
		l := h.holdReq(req("x", costs(1, "spent"), one("o")))
		if l.Candidate != 1 {
			t.Errorf("x took candidate %d, want 1", l.Candidate)
		}
		// Dropped while waiting: the waiter waits on its fallback.
		la := h.holdReq(req("a", costs(60, "b")))
		w := h.enqueue(req("w", costs(50, "b"), one("o")))
		h.release(la)
		w.pending()
		h.wantUsage("b", 0, 0, 0)
		h.wantUsage("o", 1, 1, 1)
		h.release(l)
		lw := w.admittedNow("the release of o")
		if lw.Candidate != 1 {
			t.Errorf("w took candidate %d, want 1 (its budget spent)", lw.Candidate)
		}
	})

	run(t, "LoweredBudgetDropsWaiters", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 0))
		h.holdReq(req("a", costs(90, "b")))
		w := h.enqueue(req("w", costs(50, "b")))
		h.setScope("b", budgetScope(40, 0))
		wantBudgetExceeded(t, "w after the budget is lowered to 40", w.wait().err, "b", windowEnd)
	})
}

// budgetBadInput: what can never be meaningful is refused and changes
// nothing.
func budgetBadInput(t *testing.T, newEngine NewEngine) {
	run(t, "BadInput", newEngine, func(t *testing.T, h *harness) {
		for _, cfg := range []admission.ScopeConfig{
			{Budget: -1}, {BudgetSpent: -1}, {Budget: 10}, {Budget: 10, BudgetUntil: windowEnd},
			{Budget: 10, BudgetFrom: start, BudgetUntil: start},
		} {
			wantErr(t, fmt.Sprintf("SetScope(%+v)", cfg), h.e.SetScope(h.ctx, "bad", cfg), admission.ErrInvalid)
		}
		h.setScope("b", budgetScope(100, 0))
		_, err := h.e.TryAcquire(h.ctx, req("neg", costs(-1, "b")))
		wantErr(t, "TryAcquire of a negative cost", err, admission.ErrInvalid)
		l := h.holdReq(req("a", costs(10, "b")))
		err = h.e.Reconcile(h.ctx, l.ID, l.Owner, admission.Settlement{Cost: -1})
		wantErr(t, "Reconcile to a negative cost", err, admission.ErrInvalid)
		h.wantBudget("b", 0, 10)
	})
}

// budgetWindows: the window's end, a configuration's BudgetSpent, and a
// shadow budget.
func budgetWindows(t *testing.T, newEngine NewEngine) {
	run(t, "WindowRollsOver", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 90))
		la := h.holdReq(req("a", costs(10, "b")))
		w := h.enqueue(req("w", costs(5, "b")))
		h.advance(time.Hour - time.Second)
		w.pending()
		h.advance(time.Second)
		// The next window has nothing spent: w goes in when it starts.
		w.admitted()
		st := h.stats("b")
		if st.BudgetSpent != 0 || st.BudgetReserved != 15 || !st.BudgetFrom.Equal(windowEnd) || !st.BudgetUntil.IsZero() {
			t.Errorf("scope b in the next window: spent %d reserved %d [%s, %s), want 0, 15, [%s, open)",
				st.BudgetSpent, st.BudgetReserved, st.BudgetFrom, st.BudgetUntil, windowEnd)
		}
		h.release(la)
		h.wantBudget("b", 10, 5)
		// Configured for the window the engine started: what it counted
		// stays; BudgetSpent is what the store knew before.
		next := admission.ScopeConfig{Budget: 100, BudgetSpent: 3, BudgetFrom: windowEnd, BudgetUntil: windowEnd.Add(time.Hour)}
		h.setScope("b", next)
		h.wantBudget("b", 10, 5)
		_, err := h.e.TryAcquire(h.ctx, req("big", costs(95, "b")))
		wantBudgetExceeded(t, "TryAcquire of 95 with 90 left", err, "b", windowEnd.Add(time.Hour))
	})

	run(t, "SpentAppliedOnWindowChange", newEngine, func(t *testing.T, h *harness) {
		h.setScope("b", budgetScope(100, 40))
		h.wantBudget("b", 40, 0)
		h.release(h.holdReq(req("a", costs(10, "b"))))
		h.wantBudget("b", 50, 0)
		// Same window: the count stays, whatever BudgetSpent says.
		h.setScope("b", budgetScope(200, 0))
		h.wantBudget("b", 50, 0)
		// Another window: BudgetSpent is applied.
		other := budgetScope(100, 7)
		other.BudgetFrom, other.BudgetUntil = start.Add(-time.Hour), windowEnd
		h.setScope("b", other)
		h.wantBudget("b", 7, 0)
	})

	run(t, "Shadow", newEngine, func(t *testing.T, h *harness) {
		cfg := budgetScope(100, 90)
		cfg.Shadow = true
		h.setScope("b", cfg)
		l1 := h.holdReq(req("r1", costs(20, "b"))) // would be refused
		l2 := h.holdReq(req("r2", costs(5, "b")))  // would wait on r1's reservation
		h.wantBudget("b", 90, 25)
		st := h.stats("b")
		if st.ShadowRefusals != 1 || st.ShadowWaits != 1 {
			t.Errorf("shadow budget: refusals %d waits %d, want 1 and 1", st.ShadowRefusals, st.ShadowWaits)
		}
		h.wantEvent("a shadow budget_exceeded for r1", func(e admission.Event) bool {
			return e.Outcome == admission.OutcomeShadow && e.Lease == l1.ID && e.Would == admission.OutcomeBudgetExceeded && e.Scope == "b"
		})
		h.release(l1)
		h.release(l2)
		h.wantBudget("b", 115, 0)
	})
}

// budgetChurn runs acquirers whose real costs differ from their
// estimates, inFlight leases at a time: the cost spent never passes the
// budget by more than inFlight times the largest amount a settlement
// added beyond its estimate.
func budgetChurn(t *testing.T, h *harness, inFlight int64) {
	const budget, workers, rounds = 1000, 8, 25
	h.setScope("b", budgetScope(budget, 0))
	h.setScope("c", admission.ScopeConfig{Limit: inFlight})
	var mu sync.Mutex
	var settled, over int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for j := range rounds {
				est := 1 + rng.Int64N(40)
				real := max(0, est+rng.Int64N(21)-10)
				ctx, cancel := context.WithTimeout(h.ctx, guard)
				l, err := h.e.Acquire(ctx, req(fmt.Sprintf("w%d-%d", i, j), costs(est, "b", "c")))
				cancel()
				if errors.Is(err, admission.ErrBudgetExceeded) {
					continue
				}
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if err := h.e.Reconcile(h.ctx, l.ID, l.Owner, admission.Settlement{Cost: real}); err != nil {
					t.Errorf("Reconcile: %v", err)
				}
				mu.Lock()
				settled += real
				over = max(over, real-est)
				mu.Unlock()
				if err := h.e.Release(h.ctx, l.ID, l.Owner); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	st := h.stats("b")
	if st.BudgetSpent != settled || st.BudgetReserved != 0 {
		t.Errorf("spent %d reserved %d, want the %d settled and none reserved", st.BudgetSpent, st.BudgetReserved, settled)
	}
	if settled > budget+inFlight*over {
		t.Errorf("settled %d: past the budget %d by more than %d leases' largest overrun of an estimate (%d)", settled, budget, inFlight, over)
	}
	if settled < budget/2 {
		t.Errorf("settled %d of a budget of %d: the churn should spend most of it", settled, budget)
	}
}
