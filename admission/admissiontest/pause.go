package admissiontest

import (
	"errors"
	"testing"

	"github.com/weir-gateway/weir/admission"
)

// 13. A paused scope admits nothing until it is resumed; what it holds
// stays held, and what waits on it waits, moves to its other candidates,
// or (with a resolver) is asked where else it may go.
func exercisePause(t *testing.T, newEngine NewEngine) {
	run(t, "AdmitsNothingKeepsLeases", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 2})
		l := h.hold(need("s", 1))
		h.setScope("s", admission.ScopeConfig{Limit: 2, Paused: true})
		_, err := h.e.TryAcquire(h.ctx, req("try", one("s")))
		wantErr(t, "TryAcquire on a paused scope", err, admission.ErrWouldWait)
		w := h.enqueue(req("w", one("s")))
		w.pending()
		h.wantUsage("s", 1, 1, 1)
		if st := h.stats("s"); !st.Config.Paused || st.Orphaned {
			t.Errorf("stats of a paused scope: paused=%v orphaned=%v; want paused, not orphaned", st.Config.Paused, st.Orphaned)
		}
		h.release(l) // a release while paused frees the unit, admits nothing
		w.pending()
		h.wantUsage("s", 0, 0, 1)

		h.setScope("s", admission.ScopeConfig{Limit: 2})
		w.admittedNow("the resume")
		h.wantUsage("s", 1, 1, 0)
	})

	run(t, "WaitersTakeOtherCandidates", newEngine, func(t *testing.T, h *harness) {
		h.setScope("a", admission.ScopeConfig{Limit: 1})
		h.setScope("b", admission.ScopeConfig{Limit: 1})
		lb := h.hold(need("b", 1))
		la := h.hold(need("a", 1))
		w := h.enqueue(req("w", one("a"), one("b")))
		h.setScope("a", admission.ScopeConfig{Limit: 1, Paused: true})
		h.release(la) // a is free but paused
		w.pending()
		h.release(lb)
		l := w.admittedNow("the release of b")
		wantNeeds(t, "w", l.Needs, need("b", 1))
		h.wantUsage("a", 0, 0, 0)
	})

	run(t, "ResolvesAtThePause", newEngine, func(t *testing.T, h *harness) {
		h.setScope("node", admission.ScopeConfig{Limit: 1})
		h.setScope("spare", admission.ScopeConfig{Limit: 1})
		h.hold(need("node", 1))
		rMove := req("move", one("node"))
		rMove.Resolve = func(string) ([]admission.Candidate, error) { return []admission.Candidate{one("spare")}, nil }
		wMove := h.enqueue(rMove)
		rGone := req("gone", one("node"))
		rGone.Resolve = func(string) ([]admission.Candidate, error) { return nil, nil }
		wGone := h.enqueue(rGone)
		wStay := h.enqueue(req("stay", one("node"))) // no resolver: waits out the pause

		h.setScope("node", admission.ScopeConfig{Limit: 1, Paused: true})
		l := wMove.admitted()
		wantNeeds(t, "move", l.Needs, need("spare", 1))
		h.wantEvent("no_candidate gone", isWaiterEvent(admission.OutcomeNoCandidate, "gone"))
		wGone.failed(admission.ErrNoCandidate)
		wStay.pending()
		h.wantUsage("node", 1, 1, 1)
	})

	run(t, "ResolverFaultKeepsWaiter", newEngine, func(t *testing.T, h *harness) {
		h.setScope("node", admission.ScopeConfig{Limit: 1, Owner: "n1", OwnerGen: 1})
		h.setScope("cloud", admission.ScopeConfig{Limit: 1})
		h.setScope("other", admission.ScopeConfig{Limit: 1})
		h.hold(need("node", 1))
		lc := h.hold(need("cloud", 1))
		h.hold(need("other", 1))
		r := req("w", one("node"), one("cloud"))
		r.Resolve = func(string) ([]admission.Candidate, error) { return nil, errors.New("the catalog is being reloaded") }
		w := h.enqueue(r)
		rPaused := req("p", one("other"))
		rPaused.Resolve = r.Resolve
		wPaused := h.enqueue(rPaused)

		// The fence asks w's resolver, which fails: w keeps its usable
		// candidate rather than failing with no candidate.
		wantNoErr(t, "Fence(n1, 1)", h.e.Fence(h.ctx, "n1", 1))
		w.pending()
		h.setScope("other", admission.ScopeConfig{Limit: 1, Paused: true})
		wPaused.pending()
		h.release(lc)
		l := w.admittedNow("the release of cloud")
		wantNeeds(t, "w", l.Needs, need("cloud", 1))
	})
}
