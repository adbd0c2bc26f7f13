package admissiontest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// 6. Queue limits, deadlines and cancellation bound every wait.
func exerciseBounded(t *testing.T, newEngine NewEngine) {
	run(t, "QueueLimit", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, QueueLimit: 2})
		l := h.hold(need("s", 1))
		h.enqueue(req("w1", one("s")))
		h.enqueue(req("w2", one("s")))

		r3 := req("w3", one("s"))
		w3 := h.newWaiter(r3)
		wantErr(t, "Enqueue past the queue limit", h.e.Enqueue(h.ctx, r3, w3.notify), admission.ErrQueueFull)
		h.wantEvent("queue_full w3", isWaiterEvent(admission.OutcomeQueueFull, "w3"))
		h.wantUsage("s", 1, 1, 2)

		ctx, cancel := context.WithTimeout(h.ctx, guard)
		defer cancel()
		_, err := h.e.Acquire(ctx, req("w4", one("s")))
		wantErr(t, "Acquire past the queue limit", err, admission.ErrQueueFull)
		h.wantUsage("s", 1, 1, 2)

		// A slot in the queue frees when w1 is admitted.
		h.release(l)
		h.wantUsage("s", 1, 1, 1)
		h.enqueue(req("w5", one("s")))
		h.wantUsage("s", 1, 1, 2)
		w3.pending()
		if n := w3.calls.Load(); n != 0 {
			t.Errorf("notify of a refused Enqueue called %d times, want 0", n)
		}
	})

	run(t, "QueueLimitDropsCandidate", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, QueueLimit: 1})
		h.setScope("u", admission.ScopeConfig{Limit: 1})
		ls, lu := h.hold(need("s", 1)), h.hold(need("u", 1))
		w1 := h.enqueue(req("w1", one("s")))
		// s's queue is full, so w2 queues on its second candidate only.
		w2 := h.enqueue(req("w2", one("s"), one("u")))
		h.wantUsage("s", 1, 1, 1)
		h.wantUsage("u", 1, 1, 1)

		h.release(ls)
		l1 := w1.admittedNow("the release of s")
		h.release(l1) // s is free now, but w2 no longer has a candidate in it
		w2.pending()
		h.wantUsage("s", 0, 0, 0)
		h.release(lu)
		l2 := w2.admittedNow("the release of u")
		wantNeeds(t, "w2", l2.Needs, need("u", 1))
	})

	run(t, "Deadline", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 2})
		h.hold(need("a", 1))
		big := h.enqueue(withDeadline(req("big", cand(need("a", 2))), start.Add(5*time.Second)))
		small := h.enqueue(req("small", one("a")))

		h.advance(4 * time.Second)
		big.pending()
		small.pending() // behind big, which waits for a itself

		h.advance(2 * time.Second)
		big.failed(admission.ErrTimeout)
		h.wantEvent("timeout big", isWaiterEvent(admission.OutcomeTimeout, "big"))
		// big's wait ended, so small is no longer behind anyone.
		small.admitted()
		h.wantUsage("a", 2, 2, 0)
	})

	run(t, "AcquireDeadline", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		h.hold(need("s", 1))
		w := h.acquireQueued(h.ctx, withDeadline(req("w", one("s")), start.Add(5*time.Second)))
		h.advance(4 * time.Second)
		w.pending()
		h.advance(2 * time.Second)
		w.failed(admission.ErrTimeout)
		h.wantUsage("s", 1, 1, 0)
	})

	run(t, "MaxWaitCaps", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, MaxWait: 3 * time.Second})
		h.setScope("u", admission.ScopeConfig{Limit: 1})
		h.hold(need("s", 1))
		h.hold(need("u", 1))
		late := start.Add(10 * time.Second)
		w1 := h.enqueue(req("w1", one("s")))                               // capped at 3s
		w2 := h.enqueue(withDeadline(req("w2", one("s")), late))           // capped at 3s
		w3 := h.enqueue(withDeadline(req("w3", one("u")), late))           // u has no cap
		w4 := h.enqueue(withDeadline(req("w4", one("u"), one("s")), late)) // loses s at 3s
		h.advance(2 * time.Second)
		w5 := h.enqueue(req("w5", one("s"))) // arrives at 2s: capped at 5s

		h.advance(2 * time.Second)
		wantTimeout(t, w1, "s", admission.SettingMaxWait, 3*time.Second, 3*time.Second)
		wantTimeout(t, w2, "s", admission.SettingMaxWait, 3*time.Second, 3*time.Second)
		w3.pending()
		w4.pending() // s's MaxWait bounds only its candidate on s
		w5.pending()
		h.wantUsage("s", 1, 1, 1)
		h.wantUsage("u", 1, 1, 2)

		h.advance(2 * time.Second)
		wantTimeout(t, w5, "s", admission.SettingMaxWait, 3*time.Second, 3*time.Second)
		w3.pending()
		w4.pending()

		h.advance(5 * time.Second)
		wantTimeout(t, w3, "", admission.SettingDeadline, 10*time.Second, 10*time.Second)
		wantTimeout(t, w4, "", admission.SettingDeadline, 10*time.Second, 10*time.Second)
		h.wantUsage("s", 1, 1, 0)
		h.wantUsage("u", 1, 1, 0)
	})

	// A saturated primary's MaxWait hands its waiters to their fallback
	// instead of failing them (docs/architecture.md, contract point 6).
	run(t, "MaxWaitFallsBack", newEngine, func(t *testing.T, h *harness) {
		h.setScope("key", admission.ScopeConfig{Limit: 5})
		h.setScope("p", admission.ScopeConfig{Limit: 1, MaxWait: 2 * time.Second})
		h.setScope("f", admission.ScopeConfig{Limit: 1})
		lp, lf := h.hold(need("p", 1)), h.hold(need("f", 1))
		w1 := h.enqueue(withDeadline(req("w1", one("key", "p"), one("key", "f")), start.Add(time.Minute)))
		h.advance(time.Second)
		w2 := h.enqueue(req("w2", one("key", "f"))) // later, fallback only
		w3 := h.enqueue(req("w3", one("key", "p"), one("key", "f")))

		h.advance(time.Second) // w1 has waited p's MaxWait
		w1.pending()
		h.wantEvent("reselected w1", isWaiterEvent(admission.OutcomeReselected, "w1"))
		h.wantUsage("p", 1, 1, 1) // w3 alone
		h.wantUsage("f", 1, 1, 3)
		h.wantUsage("key", 0, 0, 3)
		if p, err := h.e.Position(h.ctx, "w1"); err != nil || p.Scope != "f" || p.Ahead != 0 {
			t.Errorf("Position(w1) = %+v, %v; want first on f", p, err)
		}

		// p frees, but w1 no longer waits for it: w3 takes it.
		h.release(lp)
		w1.pending()
		w3.admittedNow("the release of p")
		// f frees: w1 takes it ahead of w2, which arrived after it.
		h.release(lf)
		l1 := w1.admittedNow("the release of f")
		if l1.Candidate != 1 {
			t.Errorf("w1 took candidate %d, want 1 (its fallback)", l1.Candidate)
		}
		w2.pending()
	})

	// Candidates dropped at different times: the error names the limit
	// that dropped the last; of several at once, the most preferred one's.
	run(t, "TimeoutNamesLimit", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 1, MaxWait: 2 * time.Second})
		h.setScope("b", admission.ScopeConfig{Limit: 1, MaxWait: 5 * time.Second})
		h.setScope("c", admission.ScopeConfig{Limit: 1, MaxWait: 5 * time.Second})
		for _, s := range []string{"a", "b", "c"} {
			h.hold(need(s, 1))
		}
		w1 := h.enqueue(req("w1", one("a"), one("b")))
		w2 := h.enqueue(req("w2", one("c"), one("b")))
		w3 := h.enqueue(withDeadline(req("w3", one("a"), one("b")), start.Add(4*time.Second)))
		h.advance(2 * time.Second)
		w1.pending()
		w2.pending()
		w3.pending()
		h.advance(2 * time.Second)
		wantTimeout(t, w3, "", admission.SettingDeadline, 4*time.Second, 4*time.Second)
		h.advance(time.Second)
		wantTimeout(t, w1, "b", admission.SettingMaxWait, 5*time.Second, 5*time.Second)
		wantTimeout(t, w2, "c", admission.SettingMaxWait, 5*time.Second, 5*time.Second)
	})

	// A MaxWait changed by SetScope applies to the waiters already queued,
	// still counted from their arrival.
	run(t, "MaxWaitChangeAppliesToQueued", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, MaxWait: 2 * time.Second})
		h.setScope("u", admission.ScopeConfig{Limit: 1})
		h.hold(need("s", 1))
		h.hold(need("u", 1))
		w1 := h.enqueue(req("w1", one("s")))
		w2 := h.enqueue(req("w2", one("u"), one("s")))
		h.advance(time.Second)
		h.setScope("s", admission.ScopeConfig{Limit: 1, MaxWait: 10 * time.Second})
		h.advance(2 * time.Second)
		w1.pending()
		w2.pending()
		h.wantUsage("s", 1, 1, 2)

		h.setScope("s", admission.ScopeConfig{Limit: 1, MaxWait: 3 * time.Second})
		wantTimeout(t, w1, "s", admission.SettingMaxWait, 3*time.Second, 3*time.Second)
		w2.pending()
		h.wantUsage("s", 1, 1, 0)
		h.wantUsage("u", 1, 1, 1)
	})

	run(t, "QueueFullNamesScope", newEngine, func(t *testing.T, h *harness) {
		h.setScope("p", admission.ScopeConfig{Limit: 1, QueueLimit: 1})
		h.setScope("f", admission.ScopeConfig{Limit: 1, QueueLimit: 2})
		h.setScope("k", admission.ScopeConfig{})
		h.hold(need("p", 1))
		h.hold(need("f", 1))
		h.enqueue(req("w1", one("p")))
		h.enqueue(req("w2", one("f")))
		h.enqueue(req("w3", one("f")))
		err := h.e.Enqueue(h.ctx, req("w4", one("k", "p"), one("k", "f")), h.newWaiter(req("w4")).notify)
		var qe *admission.QueueFullError
		if !errors.As(err, &qe) || !errors.Is(err, admission.ErrQueueFull) {
			t.Fatalf("Enqueue with every queue full: %v, want a *QueueFullError", err)
		}
		if qe.Scope != "p" || qe.Limit != 1 || qe.RetryAfter < 0 {
			t.Errorf("QueueFullError = %+v, want scope p (the first candidate's), limit 1", *qe)
		}
		h.wantUsage("k", 0, 0, 0)
	})
	run(t, "CancelAcquire", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		l := h.hold(need("s", 1))
		ctx, cancel := context.WithCancel(h.ctx)
		defer cancel()
		w1 := h.acquireQueued(ctx, req("w1", one("s")))
		w2 := h.enqueue(req("w2", one("s")))

		cancel()
		r := w1.wait()
		if r.err == nil || !(errors.Is(r.err, context.Canceled) || errors.Is(r.err, admission.ErrCancelled)) {
			t.Errorf("Acquire with a cancelled ctx: got (lease %d, %v), want context.Canceled or ErrCancelled", r.lease.ID, r.err)
		}
		// Gone by the time Acquire returned.
		h.wantUsage("s", 1, 1, 1)
		h.wantEvent("cancelled w1", isWaiterEvent(admission.OutcomeCancelled, "w1"))
		_, err := h.e.Position(h.ctx, "w1")
		wantErr(t, "Position of a cancelled waiter", err, admission.ErrNotQueued)

		// The freed unit goes to w2, not to the cancelled waiter.
		h.release(l)
		w2.admittedNow("Release")
		h.wantUsage("s", 1, 1, 0)
		h.wantNoEvent("admitting w1", isWaiterEvent(admission.OutcomeAdmitted, "w1"))
	})

	run(t, "CancelEnqueued", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		l := h.hold(need("s", 1))
		w1 := h.enqueue(req("w1", one("s")))
		w2 := h.enqueue(req("w2", one("s")))

		wantNoErr(t, "Cancel(w1)", h.e.Cancel(h.ctx, "w1"))
		h.wantUsage("s", 1, 1, 1) // removed at once
		w1.failed(admission.ErrCancelled)
		h.wantEvent("cancelled w1", isWaiterEvent(admission.OutcomeCancelled, "w1"))
		wantErr(t, "Cancel(w1) again", h.e.Cancel(h.ctx, "w1"), admission.ErrNotQueued)
		wantErr(t, "Cancel of an unknown waiter", h.e.Cancel(h.ctx, "nobody"), admission.ErrNotQueued)

		h.release(l)
		w2.admittedNow("Release")
		wantErr(t, "Cancel of an admitted waiter", h.e.Cancel(h.ctx, "w2"), admission.ErrNotQueued)
		h.wantUsage("s", 1, 1, 0)
		h.wantNoEvent("admitting w1", isWaiterEvent(admission.OutcomeAdmitted, "w1"))
	})
}

// 7. Every transition is an event; a waiter can report its position.
func exerciseObservable(t *testing.T, newEngine NewEngine) {
	run(t, "Events", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		l0 := h.holdReq(withPriority(req("h", one("s")), 3))
		e := h.wantEvent("admitted h", isLeaseEvent(admission.OutcomeAdmitted, l0.ID))
		if e.WaiterID != "h" || e.Priority != 3 || e.Waited != 0 {
			t.Errorf("admitted h: %+v, want waiter h, priority 3, waited 0", e)
		}
		wantNeeds(t, "admitted h event", e.Needs, need("s", 1))

		w := h.enqueue(withPriority(req("w", one("s")), 7))
		e = h.wantEvent("queued w", isWaiterEvent(admission.OutcomeQueued, "w"))
		if e.Priority != 7 || e.Lease != 0 {
			t.Errorf("queued w: %+v, want priority 7 and no lease", e)
		}

		h.advance(2 * time.Second)
		h.release(l0)
		rel := h.wantEvent("released h", isLeaseEvent(admission.OutcomeReleased, l0.ID))
		// h was admitted at once: its hold time may be unmeasured (zero),
		// but if measured it is exact.
		if rel.Held != 0 && rel.Held != 2*time.Second {
			t.Errorf("released h: held %s, want 2s (or 0: not measured)", rel.Held)
		}
		wantNeeds(t, "released h event", rel.Needs, need("s", 1))

		lw := w.admittedNow("Release")
		if lw.Waited != 2*time.Second {
			t.Errorf("w's lease: waited %s, want 2s", lw.Waited)
		}
		adm := h.wantEvent("admitted w", isLeaseEvent(admission.OutcomeAdmitted, lw.ID))
		if adm.WaiterID != "w" || adm.Waited != 2*time.Second || adm.Priority != 7 {
			t.Errorf("admitted w: %+v, want waiter w, waited 2s, priority 7", adm)
		}

		// A waiter that queued is always timed.
		h.advance(3 * time.Second)
		h.release(lw)
		if relw := h.wantEvent("released w", isLeaseEvent(admission.OutcomeReleased, lw.ID)); relw.Held != 3*time.Second {
			t.Errorf("released w: held %s, want 3s", relw.Held)
		}

		// Events come in order: w is admitted after the release of h that
		// made room for it.
		all := h.events.all()
		relAt, admAt := -1, -1
		for i, e := range all {
			if e.Outcome == admission.OutcomeReleased && e.Lease == l0.ID {
				relAt = i
			}
			if e.Outcome == admission.OutcomeAdmitted && e.Lease == lw.ID {
				admAt = i
			}
		}
		if relAt < 0 || admAt < relAt {
			t.Errorf("released h at event %d, admitted w at event %d: want release first", relAt, admAt)
		}
		for _, e := range all {
			if e.Outcome < admission.OutcomeQueued || e.Outcome > admission.OutcomeReselected {
				t.Errorf("event with unknown outcome %d", e.Outcome)
			}
		}
	})

	run(t, "Position", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		l := h.hold(need("s", 1))
		for _, id := range []string{"w1", "w2", "w3"} {
			h.enqueue(req(id, one("s")))
		}
		wantPosition := func(id string, ahead, queued int) {
			t.Helper()
			p, err := h.e.Position(h.ctx, id)
			if err != nil {
				t.Errorf("Position(%s): %v", id, err)
				return
			}
			if p.Scope != "s" || p.Ahead != ahead || p.Queued != queued {
				t.Errorf("Position(%s) = scope %q ahead %d queued %d, want s, %d, %d", id, p.Scope, p.Ahead, p.Queued, ahead, queued)
			}
		}
		wantPosition("w1", 0, 3)
		wantPosition("w2", 1, 3)
		wantPosition("w3", 2, 3)

		h.enqueue(withPriority(req("vip", one("s")), 9))
		wantPosition("vip", 0, 4)
		wantPosition("w1", 1, 4)
		wantPosition("w3", 3, 4)

		wantNoErr(t, "Cancel(w2)", h.e.Cancel(h.ctx, "w2"))
		wantPosition("w3", 2, 3)

		h.release(l) // admits vip
		wantPosition("w1", 0, 2)
		wantPosition("w3", 1, 2)
		for _, id := range []string{"vip", "w2", "nobody"} {
			_, err := h.e.Position(h.ctx, id)
			wantErr(t, "Position("+id+")", err, admission.ErrNotQueued)
		}
	})
}

// wantTimeout waits for w to time out with a *TimeoutError naming scope
// (empty for its own deadline), setting and value, after waiting waited.
func wantTimeout(t *testing.T, w *waiter, scope, setting string, value, waited time.Duration) {
	t.Helper()
	r := w.wait()
	var te *admission.TimeoutError
	if !errors.As(r.err, &te) || !errors.Is(r.err, admission.ErrTimeout) {
		t.Errorf("waiter %s: got (lease %d, err %v), want a *TimeoutError", w.req.ID, r.lease.ID, r.err)
		return
	}
	if te.Scope != scope || te.Setting != setting || te.Value != value || te.Waited != waited || te.WaitingOn == "" || te.RetryAfter < 0 {
		t.Errorf("waiter %s: %+v, want scope %q, setting %s, value %s, waited %s, and the scope it waited on", w.req.ID, *te, scope, setting, value, waited)
	}
}
