package admissiontest

import (
	"testing"

	"github.com/weir-gateway/weir/admission"
)

// 14. Work sent back to the queue with the place a lease gave it
// (Request.Place) waits where it first arrived: before what arrived
// since, in arrival order and in its key's turn; a place the engine
// cannot have given is ignored.
func exercisePlace(t *testing.T, newEngine NewEngine) {
	run(t, "KeepsArrivalOrder", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		first := h.holdReq(req("a", one("s")))
		if first.Place == 0 {
			t.Fatalf("lease of a has no place")
		}
		wb := h.enqueue(req("b", one("s")))
		wc := h.enqueue(req("c", one("s")))
		h.release(first)
		lb := wb.admitted()
		// a's work comes back (its upstream refused it): it goes before
		// c, which arrived after it.
		back := req("a/2", one("s"))
		back.Place = first.Place
		wa := h.enqueue(back)
		wantAhead(t, h, "a/2", 0)
		wantAhead(t, h, "c", 1)
		h.release(lb)
		la := wa.admitted()
		if la.Place != first.Place {
			t.Errorf("a/2's lease has place %d; want %d, the one it asked for", la.Place, first.Place)
		}
		wc.pending()
		h.release(la)
		wc.admitted()
	})

	run(t, "KeepsItsKeysTurn", newEngine, func(t *testing.T, h *harness) {
		// Round robin: x and y take turns; x's work that comes back goes
		// before x's later waiter, not after it.
		h.setScope("s", admission.ScopeConfig{Limit: 1, RoundRobin: true})
		first := h.holdReq(withKey(req("x1", one("s")), "x"))
		wy1 := h.enqueue(withKey(req("y1", one("s")), "y"))
		wx2 := h.enqueue(withKey(req("x2", one("s")), "x"))
		h.release(first)
		ly1 := wy1.admitted()
		back := withKey(req("x1/2", one("s")), "x")
		back.Place = first.Place
		wx1 := h.enqueue(back)
		wantAhead(t, h, "x1/2", 0)
		h.release(ly1)
		lx1 := wx1.admitted()
		wx2.pending()
		h.release(lx1)
		wx2.admitted()
	})

	run(t, "RequeuedWithOtherCandidates", newEngine, func(t *testing.T, h *harness) {
		// A waiter taken out (its candidates changed: a reload) and
		// queued again at the place Position gave keeps its order.
		h.setScope("old", admission.ScopeConfig{Limit: 1})
		h.setScope("new", admission.ScopeConfig{Limit: 1})
		lo := h.hold(need("old", 1))
		ln := h.hold(need("new", 1))
		wa := h.enqueue(req("a", one("old")))
		wb := h.enqueue(req("b", one("new")))
		pos, err := h.e.Position(h.ctx, "a")
		if err != nil || pos.Place == 0 {
			t.Fatalf("Position(a) = %+v, %v; want a place", pos, err)
		}
		if err := h.e.Cancel(h.ctx, "a"); err != nil {
			t.Fatal(err)
		}
		wa.failed(admission.ErrCancelled)
		moved := req("a", one("new"), one("old"))
		moved.Place = pos.Place
		wa2 := h.enqueue(moved)
		wantAhead(t, h, "a", 0)
		wantAhead(t, h, "b", 1)
		h.release(ln)
		l := wa2.admitted()
		wantNeeds(t, "a", l.Needs, need("new", 1))
		wb.pending()
		h.release(l)
		h.release(lo)
		wb.admitted()
	})

	run(t, "ForeignPlaceIgnored", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		l := h.hold(need("s", 1))
		wb := h.enqueue(req("b", one("s")))
		r := req("late", one("s"))
		r.Place = l.Place + 1<<40 // never given: it arrives now
		wl := h.enqueue(r)
		wantAhead(t, h, "late", 1)
		h.release(l)
		lb := wb.admitted()
		wl.pending()
		h.release(lb)
		wl.admitted()
	})
}

func wantAhead(t *testing.T, h *harness, id string, ahead int) {
	t.Helper()
	pos, err := h.e.Position(h.ctx, id)
	if err != nil || pos.Ahead != ahead {
		t.Errorf("Position(%s) = %+v, %v; want %d ahead", id, pos, err, ahead)
	}
}
