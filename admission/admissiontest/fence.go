package admissiontest

import (
	"sync"
	"testing"

	"github.com/weir-gateway/weir/admission"
)

// 10. Fence declares an owner generation gone; Activate brings its scopes
// back.
func exerciseFencing(t *testing.T, newEngine NewEngine) {
	r1 := admission.Owner{ID: "r1"}
	n1 := admission.Owner{ID: "n1", Gen: 1}

	run(t, "ReleasesOwnerLeases", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 2})
		ln := h.holdAs(n1, need("s", 1))
		lr := h.holdAs(r1, need("s", 1))
		w := h.enqueue(withOwner(req("w", one("s")), r1))

		wantNoErr(t, "Fence(n1, 1)", h.e.Fence(h.ctx, "n1", 1))
		w.admittedNow("Fence") // the freed unit goes on at once
		h.wantUsage("s", 2, 2, 0)

		// n1's lease ends once, as fenced.
		var ends []admission.Outcome
		for _, e := range h.events.all() {
			if e.Lease == ln.ID && e.Outcome != admission.OutcomeAdmitted {
				ends = append(ends, e.Outcome)
			}
		}
		if len(ends) != 1 || ends[0] != admission.OutcomeFenced {
			t.Errorf("events ending n1's lease: %v, want exactly [fenced]", ends)
		}
		h.wantNoEvent("ending r1's lease", func(e admission.Event) bool {
			return e.Lease == lr.ID && e.Outcome != admission.OutcomeAdmitted
		})
		h.release(lr)
		h.wantUsage("s", 1, 1, 0)
	})

	run(t, "FailsOwnerWaiters", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		h.holdAs(r1, need("s", 1))
		wn1 := h.enqueue(withOwner(req("wn1", one("s")), n1))
		wn2 := h.enqueue(withOwner(req("wn2", one("s")), admission.Owner{ID: "n1", Gen: 2}))
		wr := h.enqueue(withOwner(req("wr", one("s")), r1))

		wantNoErr(t, "Fence(n1, 1)", h.e.Fence(h.ctx, "n1", 1))
		h.wantEvent("fenced wn1", isWaiterEvent(admission.OutcomeFenced, "wn1"))
		wn1.failed(admission.ErrFenced)
		wn2.pending() // a newer generation is not fenced
		wr.pending()
		h.wantUsage("s", 1, 1, 2)

		// A fenced generation is gone: it can take no new lease (one it could
		// never release) and queue no new waiter.
		h.setScope("free", admission.ScopeConfig{Limit: 5})
		_, err := h.e.TryAcquire(h.ctx, withOwner(req("late", one("free")), n1))
		wantErr(t, "TryAcquire by a fenced generation", err, admission.ErrFenced)
		late := h.newWaiter(withOwner(req("late", one("s")), n1))
		wantErr(t, "Enqueue by a fenced generation", h.e.Enqueue(h.ctx, late.req, late.notify), admission.ErrFenced)
		h.wantUsage("free", 0, 0, 0)
		h.wantUsage("s", 1, 1, 2)
	})

	run(t, "OrphansOwnedScopes", newEngine, func(t *testing.T, h *harness) {
		h.setScope("node", admission.ScopeConfig{Limit: 1, Owner: "n1", OwnerGen: 1})
		h.setScope("cloud", admission.ScopeConfig{Limit: 1})
		h.setScope("spare", admission.ScopeConfig{Limit: 1})
		ln := h.holdAs(r1, need("node", 1)) // r1's lease in a scope n1 owns
		lc := h.hold(need("cloud", 1))

		wOnly := h.enqueue(req("wOnly", one("node")))
		wDrop := h.enqueue(req("wDrop", one("node"), one("cloud")))
		var mu sync.Mutex
		var resolved []string
		rRes := req("wRes", one("node"))
		rRes.Resolve = func(id string) ([]admission.Candidate, error) {
			mu.Lock()
			resolved = append(resolved, id)
			mu.Unlock()
			return []admission.Candidate{one("spare")}, nil
		}
		wRes := h.enqueue(rRes)

		wantNoErr(t, "Fence(n1, 1)", h.e.Fence(h.ctx, "n1", 1))
		st := h.stats("node")
		if !st.Orphaned || st.Used != 0 || st.Leases != 0 || st.Queued != 0 {
			t.Errorf("node after Fence: orphaned=%v used=%d leases=%d queued=%d, want true, 0, 0, 0",
				st.Orphaned, st.Used, st.Leases, st.Queued)
		}
		h.wantEvent("fenced lease in node", isLeaseEvent(admission.OutcomeFenced, ln.ID))

		// Left with no candidate: fails at once.
		h.wantEvent("no_candidate wOnly", isWaiterEvent(admission.OutcomeNoCandidate, "wOnly"))
		wOnly.failed(admission.ErrNoCandidate)
		// Re-resolved to spare, which has room.
		lres := wRes.admitted()
		wantNeeds(t, "wRes", lres.Needs, need("spare", 1))
		mu.Lock()
		if len(resolved) == 0 || resolved[0] != "wRes" {
			t.Errorf("Resolve calls: %v, want wRes", resolved)
		}
		mu.Unlock()
		// Lost its node candidate, still waits for cloud.
		wDrop.pending()

		// r1's node lease is gone; releasing it is a no-op.
		wantNoErr(t, "Release of a lease released by Fence", h.e.Release(h.ctx, ln.ID, r1))
		if _, err := h.e.TryAcquire(h.ctx, req("try", one("node"))); err == nil {
			t.Errorf("TryAcquire on an orphaned scope succeeded")
		}
		h.wantUsage("node", 0, 0, 0)

		h.release(lc)
		l := wDrop.admittedNow("the release of cloud")
		wantNeeds(t, "wDrop", l.Needs, need("cloud", 1))
	})

	run(t, "ActivateRedispatches", newEngine, func(t *testing.T, h *harness) {
		h.setScope("node", admission.ScopeConfig{Limit: 2, Owner: "n1", OwnerGen: 1})
		h.setScope("cloud", admission.ScopeConfig{Limit: 1})
		h.holdAs(n1, need("node", 2))
		h.hold(need("cloud", 1))
		// The router keeps offering the node first.
		resolve := func(string) ([]admission.Candidate, error) {
			return []admission.Candidate{one("node"), one("cloud")}, nil
		}
		ws := map[string]*waiter{}
		for _, x := range []struct {
			id string
			p  int32
		}{{"A", 0}, {"B", 5}, {"C", 0}} {
			r := withPriority(req(x.id, one("node"), one("cloud")), x.p)
			r.Resolve = resolve
			ws[x.id] = h.enqueue(r)
		}

		wantNoErr(t, "Fence(n1, 1)", h.e.Fence(h.ctx, "n1", 1))
		for _, w := range ws {
			w.pending()
		}
		if st := h.stats("node"); !st.Orphaned || st.Used != 0 {
			t.Errorf("node after Fence: orphaned=%v used=%d, want true, 0", st.Orphaned, st.Used)
		}

		mark := h.events.len()
		wantNoErr(t, "Activate(n1, 2)", h.e.Activate(h.ctx, "n1", 2))
		lb := ws["B"].admittedNow("Activate")
		la := ws["A"].admittedNow("Activate")
		ws["C"].pending()
		wantNeeds(t, "B", lb.Needs, need("node", 1))
		wantNeeds(t, "A", la.Needs, need("node", 1))
		var order []string
		for _, e := range h.events.all()[mark:] {
			if e.Outcome == admission.OutcomeAdmitted {
				order = append(order, e.WaiterID)
			}
		}
		if len(order) != 2 || order[0] != "B" || order[1] != "A" {
			t.Errorf("admitted after Activate: %v, want [B A] (priority, then arrival)", order)
		}
		if st := h.stats("node"); st.Orphaned || st.Used != 2 {
			t.Errorf("node after Activate: orphaned=%v used=%d, want false, 2", st.Orphaned, st.Used)
		}
	})
}
