package admissiontest

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// 5. Release, expiry and fencing converge on one release path; a second
// release is a no-op and a stale owner can return nothing.
func exerciseRelease(t *testing.T, newEngine NewEngine) {
	run(t, "ReleaseTwiceIsNoOp", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 2})
		l1 := h.hold(need("s", 1))
		h.hold(need("s", 1))
		w := h.enqueue(req("w", one("s")))
		h.release(l1)
		w.admittedNow("Release")

		// Again: w's unit must not be handed out a second time.
		wantNoErr(t, "second Release", h.e.Release(h.ctx, l1.ID, l1.Owner))
		h.wantUsage("s", 2, 2, 0)
		w2 := h.enqueue(req("w2", one("s")))
		wantNoErr(t, "third Release", h.e.Release(h.ctx, l1.ID, l1.Owner))
		w2.pending()
		h.wantUsage("s", 2, 2, 1)
		if n := h.events.count(isLeaseEvent(admission.OutcomeReleased, l1.ID)); n != 1 {
			t.Errorf("%d released events for lease %d, want 1", n, l1.ID)
		}
	})

	run(t, "LeaseTTLExpiry", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, LeaseTTL: 10 * time.Second})
		l := h.hold(need("s", 1))
		if want := start.Add(10 * time.Second); !l.Expires.Equal(want) {
			t.Errorf("lease Expires = %v, want %v", l.Expires, want)
		}
		w := h.enqueue(req("w", one("s")))

		h.advance(9 * time.Second)
		w.pending()
		h.wantUsage("s", 1, 1, 1)

		h.advance(2 * time.Second)
		lw := w.admitted()
		// The expiry at 10s admitted w, with a TTL of its own.
		if lw.Waited != 10*time.Second || !lw.Expires.Equal(start.Add(20*time.Second)) {
			t.Errorf("w's lease: waited %s, expires %v; want 10s and %v", lw.Waited, lw.Expires, start.Add(20*time.Second))
		}
		if n := h.events.count(isLeaseEvent(admission.OutcomeExpired, l.ID)); n != 1 {
			t.Errorf("%d expired events for lease %d, want 1", n, l.ID)
		}

		// The expired lease is gone: no renewing it, releasing it is a no-op.
		_, err := h.e.Renew(h.ctx, l.ID, l.Owner)
		wantErr(t, "Renew of an expired lease", err, admission.ErrLeaseNotHeld)
		wantNoErr(t, "Release of an expired lease", h.e.Release(h.ctx, l.ID, l.Owner))
		h.wantUsage("s", 1, 1, 0)
		h.wantNoEvent("releasing the expired lease", isLeaseEvent(admission.OutcomeReleased, l.ID))
	})

	run(t, "LeaseTakesSmallestTTL", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{LeaseTTL: 10 * time.Second})
		h.setScope("b", admission.ScopeConfig{LeaseTTL: 20 * time.Second})
		h.setScope("c", admission.ScopeConfig{})
		l := h.hold(need("a", 1), need("b", 1), need("c", 1))
		if want := start.Add(10 * time.Second); !l.Expires.Equal(want) {
			t.Errorf("lease over a, b, c: Expires = %v, want %v", l.Expires, want)
		}
		lc := h.hold(need("c", 1))
		if !lc.Expires.IsZero() {
			t.Errorf("lease over c (no TTL): Expires = %v, want zero", lc.Expires)
		}
		h.advance(11 * time.Second)
		h.events.waitFor(t, "expired lease over a, b, c", isLeaseEvent(admission.OutcomeExpired, l.ID))
		h.wantUsage("a", 0, 0, 0)
		h.wantUsage("b", 0, 0, 0)
		h.wantUsage("c", 1, 1, 0)
		h.advance(time.Hour)
		h.wantUsage("c", 1, 1, 0)
	})

	run(t, "RenewExtends", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, LeaseTTL: 10 * time.Second})
		l := h.hold(need("s", 1))
		h.advance(6 * time.Second)
		exp, err := h.e.Renew(h.ctx, l.ID, l.Owner)
		wantNoErr(t, "Renew", err)
		if want := start.Add(16 * time.Second); !exp.Equal(want) {
			t.Errorf("Renew returned %v, want now+TTL = %v", exp, want)
		}
		w := h.enqueue(req("w", one("s")))

		h.advance(6 * time.Second) // past the first expiry, before the renewed one
		w.pending()
		h.wantNoEvent("expiring the renewed lease early", isLeaseEvent(admission.OutcomeExpired, l.ID))
		h.wantUsage("s", 1, 1, 1)

		h.advance(5 * time.Second)
		w.admitted()
		h.wantEvent("expired lease", isLeaseEvent(admission.OutcomeExpired, l.ID))
	})

	run(t, "RenewReleasedLease", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, LeaseTTL: 10 * time.Second})
		l := h.hold(need("s", 1))
		h.release(l)
		_, err := h.e.Renew(h.ctx, l.ID, l.Owner)
		wantErr(t, "Renew of a released lease", err, admission.ErrLeaseNotHeld)
		h.wantUsage("s", 0, 0, 0)
	})

	run(t, "StaleOwnerAfterFence", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, LeaseTTL: time.Minute})
		n1 := admission.Owner{ID: "n1", Gen: 1}
		l := h.holdAs(n1, need("s", 1))
		w := h.enqueue(withOwner(req("w", one("s")), admission.Owner{ID: "r1"}))

		wantNoErr(t, "Fence(n1, 1)", h.e.Fence(h.ctx, "n1", 1))
		w.admittedNow("Fence")

		// n1@1 can neither renew nor return what is now w's.
		_, err := h.e.Renew(h.ctx, l.ID, n1)
		wantErr(t, "Renew by a fenced generation", err, admission.ErrStaleOwner)
		wantErr(t, "Release by a fenced generation", h.e.Release(h.ctx, l.ID, n1), admission.ErrStaleOwner)
		h.wantUsage("s", 1, 1, 0)

		// The next generation works normally.
		h.setScope("s", admission.ScopeConfig{Limit: 2, LeaseTTL: time.Minute})
		l2 := h.holdAs(admission.Owner{ID: "n1", Gen: 2}, need("s", 1))
		_, err = h.e.Renew(h.ctx, l2.ID, l2.Owner)
		wantNoErr(t, "Renew by the next generation", err)
		h.release(l2)
		h.wantUsage("s", 1, 1, 0)
	})

	run(t, "ForeignOwner", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1, LeaseTTL: time.Minute})
		l := h.holdAs(admission.Owner{ID: "r1"}, need("s", 1))
		other := admission.Owner{ID: "r2"}
		wantErr(t, "Release by another owner", h.e.Release(h.ctx, l.ID, other), admission.ErrStaleOwner)
		_, err := h.e.Renew(h.ctx, l.ID, other)
		wantErr(t, "Renew by another owner", err, admission.ErrStaleOwner)
		h.wantUsage("s", 1, 1, 0)
		h.release(l)
		h.wantUsage("s", 0, 0, 0)
	})
}
