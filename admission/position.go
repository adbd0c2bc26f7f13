package admission

import (
	"context"
	"fmt"
	"slices"
)

// Position reports where a queued waiter stands. It counts, in each class
// parked on the scope the waiter waits on, the members ahead of it: all or
// none of a class of another priority, else those before it in the class's
// order, which is its members' arrival order (see aheadIn). So it costs
// O(classes there × log members), not O(waiters there).
func (m *Memory) Position(ctx context.Context, waiterID string) (Position, error) {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	w := m.waiters[waiterID]
	if w == nil {
		return Position{}, fmt.Errorf("%w: %s", ErrNotQueued, waiterID)
	}
	c := w.class
	s := c.waitingOn()
	ahead := 0
	counted := false
	for _, e := range s.waiting.items {
		counted = counted || e.p.c == c
		ahead += e.p.c.aheadIn(s, w)
	}
	if !counted {
		// Not parked there yet: only its own class is known to be ahead.
		ahead += c.members.before(w.seq)
	}
	return Position{Scope: s.name, Ahead: ahead, Queued: s.queued, EstimatedWait: s.waitEstimate(ahead + 1), Place: w.seq}, nil
}

// aheadIn counts c's members that precede w in s's order (s.precedes). A
// class has one priority, so it is all of them or none unless it has w's.
// Then, in a FIFO scope, those that arrived before w are counted by a
// binary search. In a round-robin scope the order is by turn, then
// arrival; a class is one fairness key, whose turns are handed out in
// arrival order, so its members in arrival order are in turn order too and
// those that precede w are a prefix, found by a binary search. A member
// re-resolved into the class can break that (c.turnsMixed); such a class is
// walked.
func (c *class) aheadIn(s *scope, w *waiter) int {
	switch {
	case c.prio > w.prio:
		return c.members.len()
	case c.prio < w.prio:
		return 0
	case !s.cfg.RoundRobin:
		return c.members.before(w.seq)
	}
	vt := w.vtIn(s)
	i := slices.Index(c.rr, s) // -1 if s turned round-robin after c began
	precedes := func(o *waiter) bool {
		var ovt int64
		if i >= 0 {
			ovt = o.vtAt(i)
		}
		return ovt < vt || (ovt == vt && o.seq < w.seq)
	}
	if !c.turnsMixed {
		return c.members.countWhile(precedes)
	}
	n := 0
	c.members.each(func(o *waiter) {
		if precedes(o) {
			n++
		}
	})
	return n
}

// noteTurns marks c turnsMixed if w, just given its turns, has a turn in
// some round-robin scope out of arrival order among c's members.
func (c *class) noteTurns(w *waiter) {
	if c.turnsMixed || len(c.rr) == 0 {
		return
	}
	prev, next := c.members.neighbors(w)
	for i := range c.rr {
		vt := w.vtAt(i)
		if (prev != nil && prev.vtAt(i) > vt) || (next != nil && next.vtAt(i) < vt) {
			c.turnsMixed = true
			return
		}
	}
}
