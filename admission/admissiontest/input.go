package admissiontest

import (
	"context"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// 11. Bad input gets an error wrapping a category sentinel and changes
// nothing.
func exerciseBadInput(t *testing.T, newEngine NewEngine) {
	run(t, "Requests", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		h.setScope("free", admission.ScopeConfig{Limit: 5})
		l := h.hold(need("s", 1))
		w1 := h.enqueue(req("w1", one("s")))
		mark := h.events.len()

		// Every case would be admitted at once to "free" if it were accepted.
		cases := []struct {
			name string
			r    admission.Request
			want error
		}{
			{"EmptyID", req("", one("free")), admission.ErrInvalid},
			{"NoCandidates", req("x"), admission.ErrInvalid},
			{"CandidateWithoutNeeds", req("x", cand(), one("free")), admission.ErrInvalid},
			{"EmptyScopeName", req("x", cand(need("", 1), need("free", 1))), admission.ErrInvalid},
			{"NegativeAmount", req("x", cand(need("free", -1))), admission.ErrInvalid},
			{"NegativeTokens", req("x", admission.Candidate{Needs: []admission.Need{need("free", 1)}, Tokens: -5}), admission.ErrInvalid},
			{"ScopeNamedTwice", req("x", cand(need("free", 1), need("free", 1))), admission.ErrInvalid},
			{"UnknownScope", req("x", one("nope")), admission.ErrUnknownScope},
			{"UnknownScopeBesideKnown", req("x", one("free", "nope")), admission.ErrUnknownScope},
			{"UnknownScopeInLaterCandidate", req("x", one("free"), one("nope")), admission.ErrUnknownScope},
			{"DuplicateWaiter", req("w1", one("free")), admission.ErrDuplicate},
		}
		for _, c := range cases {
			w := h.newWaiter(c.r)
			wantErr(t, c.name+": Enqueue", h.e.Enqueue(h.ctx, c.r, w.notify), c.want)
			ctx, cancel := context.WithTimeout(h.ctx, guard)
			_, err := h.e.Acquire(ctx, c.r)
			cancel()
			wantErr(t, c.name+": Acquire", err, c.want)
			if c.want != admission.ErrDuplicate { // TryAcquire never queues
				_, err = h.e.TryAcquire(h.ctx, c.r)
				wantErr(t, c.name+": TryAcquire", err, c.want)
			}
			if n := w.calls.Load(); n != 0 {
				t.Errorf("%s: notify of a refused Enqueue called %d times", c.name, n)
			}
		}

		h.wantUsage("s", 1, 1, 1)
		h.wantUsage("free", 0, 0, 0)
		if all := h.events.all(); len(all) > mark {
			for _, e := range all[mark:] {
				if e.Outcome == admission.OutcomeQueued || e.Outcome == admission.OutcomeAdmitted {
					t.Errorf("bad input caused event %s for %q", e.Outcome, e.WaiterID)
				}
			}
		}
		// The waiter whose id was reused is undisturbed.
		w1.pending()
		h.release(l)
		l1 := w1.admittedNow("Release")
		wantNeeds(t, "w1", l1.Needs, need("s", 1))
	})

	run(t, "Scopes", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		for _, c := range []struct {
			name string
			cfg  admission.ScopeConfig
		}{
			{"NegativeLimit", admission.ScopeConfig{Limit: -1}},
			{"NegativeQueueLimit", admission.ScopeConfig{Limit: 2, QueueLimit: -1}},
			{"NegativeMaxWait", admission.ScopeConfig{Limit: 2, MaxWait: -time.Second}},
			{"NegativeLeaseTTL", admission.ScopeConfig{Limit: 2, LeaseTTL: -time.Second}},
			{"NegativeRPM", admission.ScopeConfig{Limit: 2, RPM: -1}},
			{"NegativeTPM", admission.ScopeConfig{Limit: 2, TPM: -1}},
			{"GenWithoutOwner", admission.ScopeConfig{Limit: 2, OwnerGen: 3}},
		} {
			wantErr(t, c.name, h.e.SetScope(h.ctx, "s", c.cfg), admission.ErrInvalid)
		}
		if st := h.stats("s"); st.Config != (admission.ScopeConfig{Limit: 1}) {
			t.Errorf("after refused SetScope calls, s config = %+v, want Limit 1", st.Config)
		}
		wantErr(t, "SetScope with no name", h.e.SetScope(h.ctx, "", admission.ScopeConfig{}), admission.ErrInvalid)
		_, err := h.e.Scope(h.ctx, "nope")
		wantErr(t, "Scope(nope)", err, admission.ErrUnknownScope)
		_, err = h.e.Scope(h.ctx, "")
		if err == nil {
			t.Errorf("Scope(\"\") after a refused SetScope: want an error")
		}
	})
}

// 12. RemoveScope retires a scope: waiters lose candidates that touch it;
// held leases run out normally.
func exerciseRemoveScope(t *testing.T, newEngine NewEngine) {
	run(t, "WaitersLoseCandidates", newEngine, func(t *testing.T, h *harness) {
		h.setScope("s", admission.ScopeConfig{Limit: 1})
		h.setScope("u", admission.ScopeConfig{Limit: 1})
		ls, lu := h.hold(need("s", 1)), h.hold(need("u", 1))
		wOnly := h.enqueue(req("wOnly", one("s")))
		wBoth := h.enqueue(req("wBoth", one("s"), one("u")))

		wantNoErr(t, "RemoveScope(s)", h.e.RemoveScope(h.ctx, "s"))
		wOnly.failed(admission.ErrNoCandidate)
		wBoth.pending()
		_, err := h.e.Scope(h.ctx, "s")
		wantErr(t, "Scope of a removed scope", err, admission.ErrUnknownScope)
		_, err = h.e.TryAcquire(h.ctx, req("try", one("s")))
		wantErr(t, "TryAcquire on a removed scope", err, admission.ErrUnknownScope)
		wantErr(t, "RemoveScope(nope)", h.e.RemoveScope(h.ctx, "nope"), admission.ErrUnknownScope)

		// The held lease runs out normally.
		wantNoErr(t, "Release of a lease in a removed scope", h.e.Release(h.ctx, ls.ID, ls.Owner))
		wBoth.pending()
		h.release(lu)
		l := wBoth.admittedNow("the release of u")
		wantNeeds(t, "wBoth", l.Needs, need("u", 1))
	})
}
