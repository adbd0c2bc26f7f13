// Package admissiontest is the conformance suite of the admission engine:
// every home of the engine (memory, PostgreSQL) runs Exercise and must pass
// it, as River's drivers pass riverdrivertest.
//
// Each invariant of the contract in package admission's doc is a numbered
// subtest, numbered as the contract is (1_Atomic, 2_NeverOver, …); rate
// limits, fencing and bad input follow as 9 to 12. Contract point 8 (Cheap)
// is a cost, not a behaviour, and is measured by the benchmarks instead.
//
// Model (model.go) is the suite's random half: it runs long random
// operation sequences against a home and checks every step against a
// reference model.
//
// The suite drives the engine only through admission.Engine. It hands each
// engine a *clock.Fake and an Observer of its own, never sleeps, and waits
// only for events: notify callbacks, Acquire returning, or an Observer
// event, each bounded by a generous guard that only a broken engine hits.
package admissiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// NewEngine builds a fresh, empty engine for one subtest. opts carries the
// suite's *clock.Fake as Clock and its Observer; the engine must use both.
// It should register its own cleanup (Close) with t.Cleanup.
type NewEngine = func(t *testing.T, opts admission.Options) admission.Engine

// Exercise runs the conformance suite against engines built by newEngine.
// Every subtest gets its own engine and clock and runs in parallel.
func Exercise(t *testing.T, newEngine func(t *testing.T, opts admission.Options) admission.Engine) {
	t.Helper()
	sections := []struct {
		name string
		run  func(*testing.T, NewEngine)
	}{
		{"1_Atomic", exerciseAtomic},
		{"2_NeverOver", exerciseNeverOver},
		{"3_Ordered", exerciseOrdered},
		{"4_Prompt", exercisePrompt},
		{"5_ExactlyOnceRelease", exerciseRelease},
		{"6_Bounded", exerciseBounded},
		{"7_Observable", exerciseObservable},
		{"9_RateLimits", exerciseRateLimits},
		{"10_Fencing", exerciseFencing},
		{"11_BadInput", exerciseBadInput},
		{"12_RemoveScope", exerciseRemoveScope},
		{"13_Pause", exercisePause},
		{"14_Place", exercisePlace},
		{"15_Shadow", exerciseShadow},
		{"16_Budgets", exerciseBudgets},
	}
	for _, s := range sections {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t, newEngine)
		})
	}
}

// 1. A waiter gets all of one candidate's scopes at once, or nothing.
func exerciseAtomic(t *testing.T, newEngine NewEngine) {
	run(t, "AllScopesOrNone", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 1})
		h.setScope("b", admission.ScopeConfig{Limit: 1})
		lb := h.hold(need("b", 1))

		_, err := h.e.TryAcquire(h.ctx, req("try", one("a", "b")))
		wantErr(h.t, "TryAcquire {a,b} with b full", err, admission.ErrWouldWait)
		h.wantUsage("a", 0, 0, 0)

		w := h.enqueue(req("w", one("a", "b")))
		w.pending()
		// Queued, w holds nothing in a: a waiter needing only a takes it.
		h.wantUsage("a", 0, 0, 1)
		h.wantUsage("b", 1, 1, 1)
		la := h.hold(need("a", 1))
		h.release(la)
		w.pending()

		h.release(lb)
		l := w.admitted()
		wantNeeds(h.t, "lease of w", l.Needs, need("a", 1), need("b", 1))
		h.wantUsage("a", 1, 1, 0)
		h.wantUsage("b", 1, 1, 0)
	})

	run(t, "AmountsTakenTogether", newEngine, func(t *testing.T, h *harness) {
		for _, s := range []string{"a", "b", "c"} {
			h.setScope(s, admission.ScopeConfig{Limit: 5})
		}
		r1 := req("r1", cand(need("a", 2), need("b", 3)), cand(need("c", 4)))
		l1 := h.holdReq(r1)
		if l1.Candidate != 0 {
			t.Errorf("r1 took candidate %d, want 0", l1.Candidate)
		}
		wantNeeds(h.t, "r1", l1.Needs, need("a", 2), need("b", 3))
		h.wantUsage("a", 2, 1, 0)
		h.wantUsage("b", 3, 1, 0)

		// b has 2 left of the 3 that r2's first candidate needs: r2 takes
		// its second candidate and nothing at all of a or b.
		r2 := req("r2", cand(need("a", 2), need("b", 3)), cand(need("c", 4)))
		l2 := h.holdReq(r2)
		if l2.Candidate != 1 {
			t.Errorf("r2 took candidate %d, want 1", l2.Candidate)
		}
		wantNeeds(h.t, "r2", l2.Needs, need("c", 4))
		h.wantUsage("a", 2, 1, 0)
		h.wantUsage("b", 3, 1, 0)
		h.wantUsage("c", 4, 1, 0)

		h.release(l1)
		h.wantUsage("a", 0, 0, 0)
		h.wantUsage("b", 0, 0, 0)
	})
}

// 2. No admission takes a scope past its limit. Lowering a limit revokes
// nothing; raising one admits at once.
func exerciseNeverOver(t *testing.T, newEngine NewEngine) {
	run(t, "ConcurrentChurn", newEngine, func(t *testing.T, h *harness) {
		limits := map[string]int64{"a": 2, "b": 3, "c": 1, "d": 2}
		for s, l := range limits {
			h.setScope(s, admission.ScopeConfig{Limit: l})
		}
		menu := [][]admission.Candidate{
			{cand(need("a", 1), need("b", 1))},
			{one("c"), one("a", "d")},
			{cand(need("b", 2)), one("d")},
			{cand(need("a", 2))},
			{one("b", "c", "d")},
		}
		const workers, rounds = 6, 30
		var wg sync.WaitGroup
		for g := range workers {
			wg.Go(func() {
				for k := range rounds {
					r := req(fmt.Sprintf("g%d-%d", g, k), menu[(g*7+k)%len(menu)]...)
					r.Priority = int32((g + k) % 3)
					ctx, cancel := context.WithCancel(h.ctx)
					if k%4 == 3 {
						go cancel() // races the admission on purpose
					}
					l, err := h.e.Acquire(ctx, r)
					cancel()
					switch {
					case err == nil:
						if err := h.e.Release(h.ctx, l.ID, l.Owner); err != nil {
							t.Errorf("Release(%s): %v", r.ID, err)
						}
					case errors.Is(err, context.Canceled), errors.Is(err, admission.ErrCancelled):
					default:
						t.Errorf("Acquire(%s): %v", r.ID, err)
					}
				}
			})
		}
		wg.Wait()

		// Replay the events in order: usage never passes a limit, and each
		// admitted lease is released exactly once.
		used := map[string]int64{}
		held := map[admission.LeaseID][]admission.Need{}
		admitted, released := 0, 0
		for _, e := range h.events.all() {
			switch e.Outcome {
			case admission.OutcomeAdmitted:
				admitted++
				if _, dup := held[e.Lease]; dup {
					t.Errorf("lease %d admitted twice", e.Lease)
				}
				held[e.Lease] = e.Needs
				for _, n := range e.Needs {
					used[n.Scope] += n.Amount
					if used[n.Scope] > limits[n.Scope] {
						t.Errorf("admitting %s (lease %d) took %s to %d, limit %d",
							e.WaiterID, e.Lease, n.Scope, used[n.Scope], limits[n.Scope])
					}
				}
			case admission.OutcomeReleased, admission.OutcomeExpired:
				if e.Lease == 0 {
					continue
				}
				needs, ok := held[e.Lease]
				if !ok {
					t.Errorf("%s event for lease %d, which is not held", e.Outcome, e.Lease)
					continue
				}
				released++
				delete(held, e.Lease)
				for _, n := range needs {
					used[n.Scope] -= n.Amount
				}
			}
		}
		if admitted == 0 || admitted != released {
			t.Errorf("%d leases admitted, %d released; want equal and nonzero", admitted, released)
		}
		for s := range limits {
			h.wantUsage(s, 0, 0, 0)
		}
	})

	run(t, "LowerLimitRevokesNothing", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 3})
		l1, l2, l3 := h.hold(need("s", 1)), h.hold(need("s", 1)), h.hold(need("s", 1))

		h.setScope("s", admission.ScopeConfig{Limit: 1})
		st := h.stats("s")
		if st.Config.Limit != 1 || st.Used != 3 || st.Leases != 3 {
			t.Errorf("after lowering: limit=%d used=%d leases=%d, want 1, 3, 3", st.Config.Limit, st.Used, st.Leases)
		}
		h.wantNoEvent("releasing anything", func(e admission.Event) bool {
			return e.Outcome == admission.OutcomeReleased || e.Outcome == admission.OutcomeExpired
		})
		_, err := h.e.TryAcquire(h.ctx, req("try", one("s")))
		wantErr(h.t, "TryAcquire over a lowered limit", err, admission.ErrWouldWait)

		w := h.enqueue(req("w", one("s")))
		h.release(l1)
		w.pending()
		h.wantUsage("s", 2, 2, 1)
		h.release(l2)
		w.pending() // usage 1 is not below the new limit 1
		h.wantUsage("s", 1, 1, 1)
		h.release(l3)
		w.admittedNow("the release that took usage below the limit")
		h.wantUsage("s", 1, 1, 0)
	})

	run(t, "RaiseLimitAdmitsAtOnce", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		h.hold(need("s", 1))
		w1 := h.enqueue(req("w1", one("s")))
		w2 := h.enqueue(req("w2", one("s")))
		w3 := h.enqueue(req("w3", one("s")))
		h.wantUsage("s", 1, 1, 3)

		h.setScope("s", admission.ScopeConfig{Limit: 3})
		w1.admittedNow("SetScope raising the limit")
		w2.admittedNow("SetScope raising the limit")
		w3.pending()
		h.wantUsage("s", 3, 3, 1)
	})
}

// 3. Ordered: priority, then (round-robin) fairness key, then arrival; a later
// waiter passes an earlier one only when the earlier is blocked elsewhere, and
// only for FairnessWindow.
func exerciseOrdered(t *testing.T, newEngine NewEngine) {
	run(t, "PriorityThenArrival", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		cur := h.hold(need("s", 1))
		ws := map[string]*waiter{}
		for _, x := range []struct {
			id string
			p  int32
		}{{"low1", 0}, {"low2", 0}, {"high1", 5}, {"mid", 2}, {"high2", 5}, {"low3", 0}} {
			ws[x.id] = h.enqueue(withPriority(req(x.id, one("s")), x.p))
		}
		for _, want := range []string{"high1", "high2", "mid", "low1", "low2", "low3"} {
			got := h.releaseAndNext(cur)
			if got != want {
				t.Fatalf("next admitted is %s, want %s", got, want)
			}
			cur = ws[want].admitted()
		}
	})

	run(t, "PassOnlyWhenBlockedElsewhere", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 1}) // FairnessWindow 0: never held
		h.setScope("b", admission.ScopeConfig{Limit: 1})
		la, lb := h.hold(need("a", 1)), h.hold(need("b", 1))
		w1 := h.enqueue(req("w1", one("a", "b")))
		w2 := h.enqueue(req("w2", one("a")))

		// Without a fairness window, w1 may be passed however long it waited.
		h.advance(time.Hour)
		if got := h.releaseAndNext(la); got != "w2" {
			t.Fatalf("after freeing a, admitted %s, want w2 (w1 is blocked by b)", got)
		}
		l2 := w2.admitted()
		w1.pending()

		h.release(lb) // b is free but a is now w2's
		w1.pending()
		h.wantUsage("b", 0, 0, 1)
		h.release(l2)
		l1 := w1.admittedNow("the release of a")
		wantNeeds(h.t, "w1", l1.Needs, need("a", 1), need("b", 1))
	})

	run(t, "LargeRequestNotStarved", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 2})
		la1, la2 := h.hold(need("a", 1)), h.hold(need("a", 1))
		big := h.enqueue(req("big", cand(need("a", 2))))
		small := h.enqueue(req("small", one("a")))

		// One unit free: small fits but big, ahead of it, waits for a itself.
		h.release(la1)
		small.pending()
		big.pending()
		h.wantUsage("a", 1, 1, 2)

		h.release(la2)
		lbig := big.admittedNow("the release that made room for big")
		small.pending()
		h.release(lbig)
		lsmall := small.admittedNow("the release of big")

		// A blocker at the head that goes away lets the next one through.
		big2 := h.enqueue(req("big2", cand(need("a", 2))))
		small2 := h.enqueue(req("small2", one("a")))
		small2.pending()
		wantNoErr(h.t, "Cancel(big2)", h.e.Cancel(h.ctx, "big2"))
		big2.failed(admission.ErrCancelled)
		small2.admitted()
		h.wantUsage("a", 2, 2, 0)
		h.release(lsmall)
	})

	run(t, "FairnessWindowHolds", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 2, FairnessWindow: 10 * time.Second})
		h.setScope("b", admission.ScopeConfig{Limit: 1})
		la1, la2 := h.hold(need("a", 1)), h.hold(need("a", 1))
		lb := h.hold(need("b", 1))
		w1 := h.enqueue(req("w1", one("a", "b")))
		w2 := h.enqueue(req("w2", one("a")))
		w3 := h.enqueue(req("w3", one("a")))
		w4 := h.enqueue(req("w4", one("a")))

		// Within the window w1, blocked by b, may be passed.
		h.advance(time.Second)
		if got := h.releaseAndNext(la1); got != "w2" {
			t.Fatalf("within the window, admitted %s, want w2", got)
		}
		l2 := w2.admitted()

		// Past the window, a holds one unit for w1 — though w1 was first
		// passed inside its window and now waits on b, not on a.
		h.advance(10 * time.Second)
		h.release(la2)
		w3.pending()
		st := h.stats("a")
		if st.Used != 1 || st.Held != 1 {
			t.Errorf("past the window: a used=%d held=%d, want used=1 held=1", st.Used, st.Held)
		}

		// Later waiters use only what is left beyond the hold.
		if got := h.releaseAndNext(l2); got != "w3" {
			t.Fatalf("with one unit beyond the hold, admitted %s, want w3", got)
		}
		w3.admitted()
		w4.pending()
		w1.pending()

		h.release(lb)
		l1 := w1.admittedNow("the release of b")
		wantNeeds(h.t, "w1", l1.Needs, need("a", 1), need("b", 1))
		w4.pending()
		st = h.stats("a")
		if st.Used != 2 || st.Held != 0 {
			t.Errorf("after w1 is admitted: a used=%d held=%d, want used=2 held=0", st.Used, st.Held)
		}
	})

	run(t, "FairnessWindowElapsedBeforeFirstPass", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 1, FairnessWindow: 10 * time.Second})
		h.setScope("b", admission.ScopeConfig{Limit: 1})
		la, lb := h.hold(need("a", 1)), h.hold(need("b", 1))
		w1 := h.enqueue(req("w1", one("a", "b")))
		w2 := h.enqueue(req("w2", one("a")))

		h.advance(11 * time.Second)
		h.release(la) // a could serve w1, which has waited past the window
		w2.pending()
		if st := h.stats("a"); st.Used != 0 || st.Held != 1 {
			t.Errorf("a used=%d held=%d, want used=0 held=1", st.Used, st.Held)
		}
		h.release(lb)
		w1.admittedNow("the release of b")
		w2.pending()
		h.wantUsage("a", 1, 1, 1)
	})

	run(t, "RoundRobinByKey", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, RoundRobin: true})
		cur := h.hold(need("s", 1))
		ws := map[string]*waiter{}
		for _, x := range [][2]string{{"A1", "A"}, {"A2", "A"}, {"A3", "A"}, {"A4", "A"}, {"B1", "B"}, {"C1", "C"}, {"B2", "B"}} {
			ws[x[0]] = h.enqueue(withKey(req(x[0], one("s")), x[1]))
		}
		var order []string
		for range ws {
			id := h.releaseAndNext(cur)
			order = append(order, id)
			cur = ws[id].admitted()
		}
		at := map[string]int{}
		for i, id := range order {
			at[id] = i
		}
		// Key A's four waiters do not stall B and C: each key's first waiter
		// is among the first three admitted.
		if at["B1"] > 2 || at["C1"] > 2 {
			t.Errorf("order %v: B1 and C1 must be among the first three", order)
		}
		// B's second waiter comes before A's third and fourth.
		if at["B2"] > at["A3"] {
			t.Errorf("order %v: B2 must come before A3", order)
		}
		// FIFO within a key.
		if !(at["A1"] < at["A2"] && at["A2"] < at["A3"] && at["A3"] < at["A4"] && at["B1"] < at["B2"]) {
			t.Errorf("order %v: not FIFO within a key", order)
		}
	})

	run(t, "CandidatePreference", newEngine, func(t *testing.T, h *harness) {
		h.setScope("p1", admission.ScopeConfig{Limit: 1})
		h.setScope("p2", admission.ScopeConfig{Limit: 10})
		r := func(id string) admission.Request { return req(id, one("p1"), one("p2")) }

		// The first candidate that fits, even when a later one has more room.
		l1 := h.holdReq(r("r1"))
		if l1.Candidate != 0 {
			t.Errorf("r1 took candidate %d, want 0", l1.Candidate)
		}
		wantNeeds(h.t, "r1", l1.Needs, need("p1", 1))
		// Fallback to the second when the first is full.
		l2 := h.holdReq(r("r2"))
		if l2.Candidate != 1 {
			t.Errorf("r2 took candidate %d, want 1", l2.Candidate)
		}
		wantNeeds(h.t, "r2", l2.Needs, need("p2", 1))
		h.wantUsage("p1", 1, 1, 0)
		h.wantUsage("p2", 1, 1, 0)
	})

	run(t, "QueuedWaiterTakesWhicheverFrees", newEngine, func(t *testing.T, h *harness) {
		h.setScope("p1", admission.ScopeConfig{Limit: 1})
		h.setScope("p2", admission.ScopeConfig{Limit: 1})
		h.hold(need("p1", 1))
		l2 := h.hold(need("p2", 1))
		w := h.enqueue(req("w", one("p1"), one("p2")))
		w.pending()
		h.release(l2)
		l := w.admittedNow("the release of p2")
		if l.Candidate != 1 {
			t.Errorf("w took candidate %d, want 1", l.Candidate)
		}
		wantNeeds(h.t, "w", l.Needs, need("p2", 1))
		h.wantUsage("p1", 1, 1, 0)
	})
}

// 4. Freed capacity goes to the next waiter in the same critical section.
func exercisePrompt(t *testing.T, newEngine NewEngine) {
	run(t, "ReleaseAdmitsBeforeReturn", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		l := h.hold(need("s", 1))
		w := h.enqueue(req("w", one("s")))
		w.pending()
		h.release(l)
		lw := w.admittedNow("Release")
		// The observer saw the admission in the releasing call, too.
		h.wantEvent("admitted w", isLeaseEvent(admission.OutcomeAdmitted, lw.ID))
		h.wantUsage("s", 1, 1, 0)
	})

	run(t, "ReleaseWakesAcquire", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		l := h.hold(need("s", 1))
		w := h.acquireQueued(h.ctx, req("w", one("s")))
		w.pending()
		h.release(l)
		w.admitted()
		h.wantUsage("s", 1, 1, 0)
	})
}
