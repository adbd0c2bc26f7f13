package admissiontest

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// 9. RPM and TPM are token buckets checked on the admission path: a limited
// candidate is skipped; when all are limited the waiter waits for the window.
func exerciseRateLimits(t *testing.T, newEngine NewEngine) {
	run(t, "RateLimitedCandidateSkipped", newEngine, func(t *testing.T, h *harness) {
		h.setScope("r", admission.ScopeConfig{RPM: 1})
		h.setScope("o", admission.ScopeConfig{})
		l1 := h.holdReq(req("r1", one("r"), one("o")))
		if l1.Candidate != 0 {
			t.Errorf("r1 took candidate %d, want 0", l1.Candidate)
		}
		if st := h.stats("r"); math.Abs(st.RPMAvailable) > 1e-6 {
			t.Errorf("r RPMAvailable = %v after one request of RPM 1, want 0", st.RPMAvailable)
		}
		l2 := h.holdReq(req("r2", one("r"), one("o")))
		if l2.Candidate != 1 {
			t.Errorf("r2 took candidate %d, want 1 (r is out of requests)", l2.Candidate)
		}
		wantNeeds(t, "r2", l2.Needs, need("o", 1))
		h.wantUsage("r", 1, 1, 0)
	})

	run(t, "TryAcquireRetryAfter", newEngine, func(t *testing.T, h *harness) {
		h.setScope("r", admission.ScopeConfig{RPM: 2})
		h.hold(need("r", 1))
		h.hold(need("r", 1))
		_, err := h.e.TryAcquire(h.ctx, req("r3", one("r")))
		var rl *admission.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("TryAcquire over RPM: got %v, want a *RateLimitedError", err)
		}
		if !errors.Is(err, admission.ErrRateLimited) {
			t.Errorf("TryAcquire over RPM: %v is not ErrRateLimited", err)
		}
		if rl.RetryAfter <= 0 || rl.RetryAfter > 30*time.Second {
			t.Errorf("RetryAfter = %s, want in (0, 30s] for RPM 2", rl.RetryAfter)
		}
		h.wantEvent("rate_limited r3", isWaiterEvent(admission.OutcomeRateLimited, "r3"))
		h.wantUsage("r", 2, 2, 0)

		// RetryAfter tells the truth.
		h.advance(rl.RetryAfter)
		h.holdReq(req("r4", one("r")))
	})

	run(t, "WaitsForEarliestWindow", newEngine, func(t *testing.T, h *harness) {
		h.setScope("r1", admission.ScopeConfig{RPM: 1}) // a request a minute
		h.setScope("r2", admission.ScopeConfig{RPM: 2}) // one every 30s
		h.hold(need("r1", 1))
		h.hold(need("r2", 1))
		h.hold(need("r2", 1))
		w := h.enqueue(req("w", one("r1"), one("r2")))
		h.wantEvent("queued w", isWaiterEvent(admission.OutcomeQueued, "w"))

		h.advance(29 * time.Second)
		w.pending()
		h.advance(2 * time.Second)
		l := w.admitted()
		if l.Candidate != 1 {
			t.Errorf("w took candidate %d, want 1 (r2 refills first)", l.Candidate)
		}
	})

	run(t, "AcquireWaitsForWindow", newEngine, func(t *testing.T, h *harness) {
		h.setScope("r", admission.ScopeConfig{RPM: 1})
		h.hold(need("r", 1))
		w := h.acquireQueued(h.ctx, req("w", one("r")))
		h.advance(30 * time.Second)
		w.pending()
		h.advance(31 * time.Second)
		w.admitted()
	})

	run(t, "DeadlineBeforeWindow", newEngine, func(t *testing.T, h *harness) {
		h.setScope("r", admission.ScopeConfig{RPM: 1})
		h.hold(need("r", 1))
		w := h.newWaiter(withDeadline(req("w", one("r")), start.Add(10*time.Second)))
		if err := h.e.Enqueue(h.ctx, w.req, w.notify); err != nil {
			// Refusing at once is fine too: the deadline comes first.
			if !errors.Is(err, admission.ErrTimeout) && !errors.Is(err, admission.ErrRateLimited) {
				t.Errorf("Enqueue: %v", err)
			}
			return
		}
		h.advance(11 * time.Second)
		r := w.wait()
		if !errors.Is(r.err, admission.ErrTimeout) && !errors.Is(r.err, admission.ErrRateLimited) {
			t.Errorf("waiter whose deadline comes before the window: got (lease %d, %v), want ErrTimeout", r.lease.ID, r.err)
		}
	})

	run(t, "TPMAndReconcile", newEngine, func(t *testing.T, h *harness) {
		h.setScope("t", admission.ScopeConfig{TPM: 100})
		wantTPM := func(scope string, want float64) {
			t.Helper()
			if got := h.stats(scope).TPMAvailable; math.Abs(got-want) > 1e-6 {
				t.Errorf("%s TPMAvailable = %v, want %v", scope, got, want)
			}
		}
		tokens := func(id, scope string, n int64) admission.Request {
			return req(id, admission.Candidate{Needs: []admission.Need{need(scope, 1)}, Tokens: n})
		}
		la := h.holdReq(tokens("a", "t", 80))
		if la.Tokens != 80 {
			t.Errorf("lease a reserves %d tokens, want 80", la.Tokens)
		}
		wantTPM("t", 20)

		_, err := h.e.TryAcquire(h.ctx, tokens("b", "t", 60))
		var rl *admission.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("TryAcquire over TPM: got %v, want a *RateLimitedError", err)
		}
		if rl.RetryAfter <= 0 || rl.RetryAfter > time.Minute {
			t.Errorf("RetryAfter = %s, want in (0, 1m]", rl.RetryAfter)
		}
		wantTPM("t", 20)

		// a used 30 of its 80: the 50 come back.
		wantNoErr(t, "Reconcile(a, 30)", h.e.Reconcile(h.ctx, la.ID, la.Owner, admission.Settlement{Tokens: 30}))
		wantTPM("t", 70)
		lb := h.holdReq(tokens("b", "t", 60))
		wantTPM("t", 10)
		wantNoErr(t, "Reconcile(b, 50)", h.e.Reconcile(h.ctx, lb.ID, lb.Owner, admission.Settlement{Tokens: 50}))
		wantTPM("t", 20)

		// Using more than reserved charges the difference.
		h.setScope("t2", admission.ScopeConfig{TPM: 1000})
		lc := h.holdReq(tokens("c", "t2", 100))
		wantTPM("t2", 900)
		wantNoErr(t, "Reconcile(c, 400)", h.e.Reconcile(h.ctx, lc.ID, lc.Owner, admission.Settlement{Tokens: 400}))
		wantTPM("t2", 600)
	})

	// A candidate reserving more tokens than its scope's TPM never fits:
	// it is dropped at once, and a request with no other candidate fails
	// with a *TokenLimitError (an ErrNoCandidate), not a rate limit.
	run(t, "TokensOverTPMNeverFit", newEngine, func(t *testing.T, h *harness) {
		h.setScope("t", admission.ScopeConfig{TPM: 100})
		h.setScope("o", admission.ScopeConfig{Limit: 1})
		big := admission.Candidate{Needs: []admission.Need{need("t", 1)}, Tokens: 150}
		wantTokenLimit := func(what string, err error) {
			t.Helper()
			var tl *admission.TokenLimitError
			if !errors.As(err, &tl) || !errors.Is(err, admission.ErrNoCandidate) {
				t.Errorf("%s: %v, want a *TokenLimitError", what, err)
				return
			}
			if tl.Scope != "t" || tl.TPM != 100 || tl.Tokens != 150 {
				t.Errorf("%s: %+v, want scope t, TPM 100, 150 tokens", what, *tl)
			}
		}
		_, err := h.e.TryAcquire(h.ctx, req("w1", big))
		wantTokenLimit("TryAcquire of 150 tokens against TPM 100", err)
		h.wantEvent("no_candidate w1", isWaiterEvent(admission.OutcomeNoCandidate, "w1"))
		w2 := h.newWaiter(req("w2", big))
		wantTokenLimit("Enqueue of 150 tokens against TPM 100", h.e.Enqueue(h.ctx, w2.req, w2.notify))
		ctx, cancel := context.WithTimeout(h.ctx, guard) // an engine that waits fails, not hangs
		defer cancel()
		_, err = h.e.Acquire(ctx, req("w3", big))
		wantTokenLimit("Acquire of 150 tokens against TPM 100", err)

		// With a fallback, only the fallback is offered.
		fb := admission.Candidate{Needs: []admission.Need{need("o", 1)}, Tokens: 150}
		l := h.holdReq(req("w4", big, fb))
		if l.Candidate != 1 {
			t.Errorf("w4 took candidate %d, want 1", l.Candidate)
		}
		w5 := h.enqueue(req("w5", big, fb))
		h.wantUsage("t", 0, 0, 0)
		h.wantUsage("o", 1, 1, 1)
		h.release(l)
		w5.admittedNow("the release of o")
		if st := h.stats("t"); st.TPMAvailable != 100 {
			t.Errorf("t has %v tokens, want 100 (nothing reserved)", st.TPMAvailable)
		}
	})

	run(t, "LoweredTPMDropsCandidates", newEngine, func(t *testing.T, h *harness) {
		h.setScope("t", admission.ScopeConfig{TPM: 1000})
		h.setScope("o", admission.ScopeConfig{Limit: 1})
		h.holdReq(req("drain", admission.Candidate{Needs: []admission.Need{need("t", 1)}, Tokens: 1000}))
		h.hold(need("o", 1))
		c500 := admission.Candidate{Needs: []admission.Need{need("t", 1)}, Tokens: 500}
		c100 := admission.Candidate{Needs: []admission.Need{need("t", 1)}, Tokens: 100}
		w1 := h.enqueue(req("w1", c500))
		w2 := h.enqueue(req("w2", c500, one("o")))
		w3 := h.enqueue(req("w3", c100))
		h.wantUsage("t", 1, 1, 3)

		h.setScope("t", admission.ScopeConfig{TPM: 400})
		r := w1.wait()
		var tl *admission.TokenLimitError
		if !errors.As(r.err, &tl) || tl.Scope != "t" || tl.TPM != 400 || tl.Tokens != 500 {
			t.Errorf("w1 after TPM 1000 -> 400: (lease %d, %v), want a *TokenLimitError for 500 tokens in t (TPM 400)", r.lease.ID, r.err)
		}
		h.wantEvent("no_candidate w1", isWaiterEvent(admission.OutcomeNoCandidate, "w1"))
		w2.pending()
		w3.pending()
		h.wantUsage("t", 1, 1, 1) // w3; w2 waits on o alone
		h.wantUsage("o", 1, 1, 1)
	})
}
