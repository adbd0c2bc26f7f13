package admissiontest

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// 15. A shadow scope decides as usual but enforces nothing: its limits
// never make a request wait or drop a candidate, its usage is kept as
// an enforced scope's, and what it would have made wait, refused or
// dropped is counted (ScopeStats) and reported (OutcomeShadow events).
// Setting Shadow false enforces from then on, revoking nothing.
func exerciseShadow(t *testing.T, newEngine NewEngine) {
	run(t, "CountsWouldBeWaits", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, Shadow: true})
		var ls []admission.Lease
		for range 5 {
			ls = append(ls, h.hold(need("s", 1)))
		}
		h.wantUsage("s", 5, 5, 0)
		h.wantShadow("s", shadowCounts{waits: 4, queued: 4})
		if n := h.events.count(isShadowEvent("s", admission.OutcomeQueued)); n != 4 {
			t.Errorf("%d shadow events of s that would have queued, want 4; events: %s", n, h.events.describe())
		}
		h.wantNoEvent("a shadow event for the first lease", isShadowLease(ls[0].ID))

		// Each release of a lease it would hold admits its next would-be
		// waiter; a would-be waiter that ends leaves the would-be queue.
		h.release(ls[0])
		h.wantShadow("s", shadowCounts{waits: 4, queued: 3})
		h.release(ls[4])
		h.wantShadow("s", shadowCounts{waits: 4, queued: 2})
		for _, l := range ls[1:4] {
			h.release(l)
		}
		h.wantUsage("s", 0, 0, 0)
		h.wantShadow("s", shadowCounts{waits: 4})
		h.hold(need("s", 1))
		h.wantShadow("s", shadowCounts{waits: 4})
	})

	run(t, "CountsAmounts", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 3, Shadow: true})
		big := h.hold(need("s", 2))
		h.hold(need("s", 2)) // 4 > 3: would wait
		h.hold(need("s", 1)) // fits 3, but would wait behind the waiter before it
		h.wantShadow("s", shadowCounts{waits: 2, queued: 2})
		h.release(big) // 2 of 3 would be held, then 3: both admitted
		h.wantShadow("s", shadowCounts{waits: 2})
	})

	run(t, "QueueLimitRefusals", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, QueueLimit: 2, Shadow: true})
		for range 5 {
			h.hold(need("s", 1))
		}
		h.wantUsage("s", 5, 5, 0)
		h.wantShadow("s", shadowCounts{waits: 2, refusals: 2, queued: 2})
		if n := h.events.count(isShadowEvent("s", admission.OutcomeQueueFull)); n != 2 {
			t.Errorf("%d shadow events of s that would have been queue_full, want 2; events: %s", n, h.events.describe())
		}
	})

	run(t, "QueueLimitKeepsWaiters", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, QueueLimit: 1, Shadow: true})
		h.setScope("e", admission.ScopeConfig{Limit: 1})
		le := h.hold(need("e", 1))
		// e makes them wait; s's full queue drops no candidate.
		w1 := h.enqueue(req("w1", one("s", "e")))
		w2 := h.enqueue(req("w2", one("s", "e")))
		w1.pending()
		w2.pending()
		h.wantUsage("s", 0, 0, 2)
		h.release(le)
		l1 := w1.admittedNow("the release of e")
		h.wantShadow("s", shadowCounts{})
		h.release(l1)
		w2.admittedNow("the release of w1")
	})

	run(t, "MaxWaitTimeouts", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, MaxWait: 10 * time.Second, Shadow: true})
		first := h.hold(need("s", 1))
		h.hold(need("s", 1))
		h.advance(4 * time.Second)
		h.hold(need("s", 1))
		h.wantShadow("s", shadowCounts{waits: 2, queued: 2})

		h.advance(6 * time.Second) // the first would-be waiter's MaxWait passes
		e := h.events.waitFor(t, "a shadow timeout", isShadowEvent("s", admission.OutcomeTimeout))
		if e.Waited != 10*time.Second {
			t.Errorf("shadow timeout: Waited %s, want 10s", e.Waited)
		}
		h.wantShadow("s", shadowCounts{waits: 2, timeouts: 1, queued: 1})
		h.wantUsage("s", 3, 3, 0) // nothing is revoked

		// A release admits the last one before its MaxWait: no timeout.
		h.release(first)
		h.advance(time.Minute)
		h.wantShadow("s", shadowCounts{waits: 2, timeouts: 1})
	})

	run(t, "MaxWaitKeepsWaiters", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, MaxWait: time.Second, Shadow: true})
		h.setScope("e", admission.ScopeConfig{Limit: 1})
		le := h.hold(need("e", 1))
		w := h.enqueue(req("w", one("s", "e")))
		h.advance(time.Minute)
		w.pending()
		h.release(le)
		w.admittedNow("the release of e")
		h.wantShadow("s", shadowCounts{})
	})

	run(t, "TokenLimitRefusals", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{TPM: 100, Shadow: true})
		l := h.holdReq(req("big", admission.Candidate{Needs: []admission.Need{need("s", 1)}, Tokens: 500}))
		h.wantShadow("s", shadowCounts{refusals: 1})
		h.wantEvent("shadow no_candidate of big", isShadowEvent("s", admission.OutcomeNoCandidate))
		h.release(l)
		if st := h.stats("s"); st.TPMAvailable < 0 {
			t.Errorf("TPMAvailable = %v, want a bucket never in debt", st.TPMAvailable)
		}
	})

	run(t, "RateWaits", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{RPM: 2, Shadow: true})
		for range 3 {
			h.hold(need("s", 1))
		}
		h.wantShadow("s", shadowCounts{waits: 1})
		h.wantEvent("shadow rate_limited", isShadowEvent("s", admission.OutcomeRateLimited))
		if st := h.stats("s"); st.RPMAvailable != 0 {
			t.Errorf("RPMAvailable = %v after 3 requests of RPM 2, want 0: charged, never in debt", st.RPMAvailable)
		}
		h.advance(30 * time.Second) // one request's refill
		h.hold(need("s", 1))
		h.wantShadow("s", shadowCounts{waits: 1})
	})

	run(t, "OtherScopesEnforce", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, Shadow: true})
		h.setScope("e", admission.ScopeConfig{Limit: 1})
		h.hold(need("s", 1))
		le := h.hold(need("e", 1))
		w := h.enqueue(req("w", one("s", "e")))
		w.pending()
		h.wantShadow("s", shadowCounts{})
		h.release(le)
		w.admittedNow("the release of e")
		h.wantShadow("s", shadowCounts{waits: 1, queued: 1})
	})

	run(t, "BecomingShadowAdmitsWaiters", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		h.hold(need("s", 1))
		w1 := h.enqueue(req("w1", one("s")))
		w2 := h.enqueue(req("w2", one("s")))
		h.setScope("s", admission.ScopeConfig{Limit: 1, Shadow: true})
		w1.admittedNow("setting Shadow")
		w2.admittedNow("setting Shadow")
		h.wantUsage("s", 3, 3, 0)
		h.wantShadow("s", shadowCounts{waits: 2, queued: 2})
	})

	run(t, "EnforcedAgain", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 2, Shadow: true})
		var ls []admission.Lease
		for range 3 {
			ls = append(ls, h.hold(need("s", 1)))
		}
		h.setScope("s", admission.ScopeConfig{Limit: 2})
		h.wantUsage("s", 3, 3, 0)
		h.wantShadow("s", shadowCounts{waits: 1}) // kept; nothing would be queued any more
		w := h.enqueue(req("w", one("s")))
		h.release(ls[0])
		w.pending() // 2 held of 2
		h.release(ls[1])
		w.admittedNow("the release under the limit")
		_, err := h.e.TryAcquire(h.ctx, req("try", one("s")))
		wantErr(t, "TryAcquire on the enforced scope", err, admission.ErrWouldWait)
		h.wantShadow("s", shadowCounts{waits: 1})
	})

	run(t, "PausedStillPauses", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, Shadow: true, Paused: true})
		_, err := h.e.TryAcquire(h.ctx, req("try", one("s")))
		wantErr(t, "TryAcquire on a paused shadow scope", err, admission.ErrWouldWait)
	})
}

// shadowCounts are a scope's shadow counters.
type shadowCounts struct {
	waits, refusals, timeouts int64
	queued                    int
}

func (h *harness) wantShadow(name string, want shadowCounts) {
	h.t.Helper()
	st := h.stats(name)
	got := shadowCounts{st.ShadowWaits, st.ShadowRefusals, st.ShadowTimeouts, st.ShadowQueued}
	if got != want {
		h.t.Errorf("scope %s shadow: waits=%d refusals=%d timeouts=%d queued=%d, want waits=%d refusals=%d timeouts=%d queued=%d",
			name, got.waits, got.refusals, got.timeouts, got.queued, want.waits, want.refusals, want.timeouts, want.queued)
	}
}

func isShadowEvent(scope string, would admission.Outcome) func(admission.Event) bool {
	return func(e admission.Event) bool {
		return e.Outcome == admission.OutcomeShadow && e.Scope == scope && e.Would == would && e.WaiterID != "" && e.Lease != 0
	}
}

func isShadowLease(id admission.LeaseID) func(admission.Event) bool {
	return func(e admission.Event) bool { return e.Outcome == admission.OutcomeShadow && e.Lease == id }
}
