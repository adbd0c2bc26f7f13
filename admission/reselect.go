package admission

import (
	"fmt"
	"slices"
)

// Reselection: when scopes become unusable (Fence, RemoveScope) or usable
// again (Activate), the waiters they touch get fresh candidates from their
// resolver, or lose those on unusable scopes, and move to the class of
// what they have left.

// liveCandidatesLocked works out w's candidates after a change of usable
// scopes. Without a resolver it keeps what it has, less candidates on
// unusable scopes (never regaining ones dropped earlier). With one, it asks
// for fresh candidates and keeps those on usable scopes that have room in
// their queues (a scope w is already counted in has room for it).
func (m *Memory) liveCandidatesLocked(w *waiter) ([]Candidate, []cand, error) {
	old := w.class
	if w.resolve == nil {
		cands, live := m.keptCandidatesLocked(w)
		return cands, live, nil
	}
	var live []cand
	fresh, err := w.resolve(w.id)
	if err != nil {
		return nil, nil, err
	}
	for i := range fresh {
		if i >= MaxCandidates || fresh[i].validate() != nil {
			continue
		}
		needs, err := m.resolveNeedsLocked(fresh[i].Needs, nil)
		if err != nil || needs == nil {
			continue
		}
		tokens, cost := fresh[i].Tokens, fresh[i].Cost
		if slices.ContainsFunc(needs, func(n need) bool { return m.neverFitsLocked(n.s, tokens, cost) }) {
			continue
		}
		full := slices.ContainsFunc(needs, func(n need) bool {
			q := n.s.cfg.QueueLimit
			return q > 0 && n.s.queued >= q && n.s.shadow == nil && !slices.Contains(old.scopes, n.s)
		})
		if !full {
			live = append(live, cand{idx: i, needs: needs})
		}
	}
	return fresh, live, nil
}

// keptCandidatesLocked is w's candidates less those on unusable scopes
// (never regaining ones dropped earlier).
func (m *Memory) keptCandidatesLocked(w *waiter) ([]Candidate, []cand) {
	var live []cand
	for _, cd := range w.class.cands {
		tokens, cost := w.cands[cd.idx].Tokens, w.cands[cd.idx].Cost
		if !slices.ContainsFunc(cd.needs, func(n need) bool { return n.s.orphaned || m.neverFitsLocked(n.s, tokens, cost) }) {
			live = append(live, cd)
		}
	}
	return w.cands, live
}

// firstTurnAfter finds the earliest turn in rs held by a waiter of key fkey
// that arrived after w. Within a class turns follow arrival, so a class's
// candidate is its first member that arrived after w — not its head, which
// may have arrived before — unless the class's turns are mixed, when each
// later member is looked at. Cost: the classes touching rs, a search in
// each; only reselection uses it.
func firstTurnAfter(rs *scope, fkey string, w *waiter) (int64, bool) {
	var best int64
	found := false
	consider := func(o *waiter) {
		if o == nil || o == w || o.seq <= w.seq {
			return
		}
		if vt := o.vtIn(rs); !found || vt < best {
			best, found = vt, true
		}
	}
	for cc := range rs.classes {
		if cc.fkey != fkey || cc.members.len() == 0 {
			continue
		}
		if cc.turnsMixed {
			cc.members.each(consider)
			continue
		}
		consider(cc.members.firstAfter(w.seq))
	}
	return best, found
}

// reresolveLocked gives fresh candidates to the waiters affected by a
// change of usable scopes, fails those left with none, and settles the rest
// in global order. With all set, every waiter that has a resolver is
// asked (a scope coming back may serve anyone); otherwise only waiters that
// touch the changed scopes.
func (m *Memory) reresolveLocked(now int64, changed []*scope, all bool) {
	var affected []*waiter
	if all {
		for _, w := range m.waiters {
			if w.resolve != nil {
				affected = append(affected, w)
			}
		}
	} else {
		seen := make(map[*class]bool)
		for _, s := range changed {
			for c := range s.classes {
				if !seen[c] {
					seen[c] = true
					affected = c.members.appendTo(affected)
				}
			}
		}
	}
	sortGlobally(affected)
	var touched []*class
	for _, w := range affected {
		old := w.class
		if old == nil {
			continue
		}
		cands, live, err := m.liveCandidatesLocked(w)
		if err != nil {
			// A resolver that fails is not a waiter with no candidate:
			// it keeps those it had that are still usable.
			cands, live = m.keptCandidatesLocked(w)
		}
		if len(live) == 0 {
			m.dropWaiterLocked(w, OutcomeNoCandidate, fmt.Errorf("%w: %s", ErrNoCandidate, w.id))
			continue
		}
		if key := m.classKeyLocked(old.fkey, w.prio, live, old.offset); string(key) == old.key {
			w.cands = cands
			touched = append(touched, old)
			continue
		}
		m.moveLocked(w, string(m.classKeyLocked(old.fkey, w.prio, live, 0)), live, cands, 0)
		m.emitLocked(Event{Outcome: OutcomeReselected, WaiterID: w.id, Priority: w.prio})
		// The MaxWait of scopes it newly waits on may have passed.
		if m.maxWaitLocked(w, now) {
			touched = append(touched, w.class)
		}
	}
	// The pump settles them in global order, together with the waiters of
	// the scopes this change freed.
	for _, c := range touched {
		m.unsettleLocked(c)
	}
	for _, s := range changed {
		m.markDirtyLocked(s)
	}
}
