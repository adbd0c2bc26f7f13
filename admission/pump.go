package admission

// The pump hands on what a critical section freed: scopes that gained
// capacity (m.dirty) and classes whose candidates changed (m.unsettled)
// are served one waiter at a time, the earliest (priority, then arrival)
// first.

// settleLocked admits c's waiters in order while they fit, then parks the
// class on whatever its head waits on.
func (m *Memory) settleLocked(c *class) {
	for c.members.len() > 0 {
		w := c.head()
		if m.evaluateLocked(w) {
			continue
		}
		m.parkOnBlockersLocked(c)
		return
	}
}

// pumpLocked hands capacity on in every scope that gained some. The scopes
// are served one waiter at a time, the earliest waiter (priority, then
// arrival) across all of them first: a waiter whose scope just freed is
// re-evaluated, and moves to wait on the next scope it needs, before a
// later waiter can take that scope's capacity.
func (m *Memory) pumpLocked() {
	if len(m.overChecks) > 0 {
		m.dropOversLocked()
	}
	for len(m.dirty) > 0 || m.unsettled.len() > 0 {
		i, w := m.nextDirtyLocked()
		if cw := m.nextUnsettledLocked(); cw != nil && (i < 0 || (w != nil && earlier(cw, w))) {
			m.stepUnsettledLocked()
			continue
		}
		if i < 0 {
			continue // only stale unsettled classes were left, now gone
		}
		s := m.dirty[i]
		if m.stepScopeLocked(s) {
			continue
		}
		if s.again {
			s.again = false
			continue
		}
		last := len(m.dirty) - 1
		m.dirty[i] = m.dirty[last]
		m.dirty = m.dirty[:last]
		s.dirty = false
	}
}

// nextWaiter is the waiter s would look at next, if any.
func (s *scope) nextWaiter() *waiter {
	if h := s.holder; s.checkHolder && h != nil && h.class.head() == h {
		return h
	}
	if s.waiting.len() > 0 {
		return s.waiting.top().p.c.head()
	}
	return nil
}

// nextDirtyLocked picks the dirty scope whose next waiter comes first, and
// that waiter; a scope with nobody to look at comes first of all (with a
// nil waiter), to be dropped. It returns -1 when nothing is dirty.
func (m *Memory) nextDirtyLocked() (int, *waiter) {
	best := -1
	var bw *waiter
	for i, s := range m.dirty {
		w := s.nextWaiter()
		if w == nil {
			return i, nil
		}
		if bw == nil || earlier(w, bw) {
			best, bw = i, w
		}
	}
	return best, bw
}

// unsettleLocked queues c to be settled by the next pump, in its turn among the
// waiters the pump looks at.
func (m *Memory) unsettleLocked(c *class) {
	if c.uidx < 0 && c.members.len() > 0 {
		m.unsettled.push(c)
	}
}

// nextUnsettledLocked is the earliest head among the unsettled classes:
// the heap keeps them in head order (classHeadChangedLocked re-orders a
// class whose head changes; an emptied class leaves it).
func (m *Memory) nextUnsettledLocked() *waiter {
	if m.unsettled.len() == 0 {
		return nil
	}
	return m.unsettled.top().head()
}

// stepUnsettledLocked admits the head of the earliest unsettled class, or
// parks the class on what its head waits for and takes it off the heap.
func (m *Memory) stepUnsettledLocked() {
	c := m.unsettled.top()
	if m.evaluateLocked(c.head()) {
		return
	}
	m.parkOnBlockersLocked(c)
	if c.uidx >= 0 {
		m.unsettled.remove(c.uidx)
	}
}

// stepScopeLocked looks at s's next waiter: it admits it, or moves it to
// wait where it must. It reports whether s may have more to hand on. A
// waiter that s could serve but that must wait elsewhere is passed; once it
// has waited s's fairness window, s holds its share for it.
func (m *Memory) stepScopeLocked(s *scope) bool {
	if h := s.holder; s.checkHolder && h != nil && h.class.head() == h {
		// The waiter s holds for goes first, wherever it is parked.
		s.checkHolder = false
		if !m.evaluateLocked(h) {
			m.parkOnBlockersLocked(h.class)
		}
		return true
	}
	s.checkHolder = false
	if s.waiting.len() == 0 {
		return false
	}
	c := s.waiting.top().p.c
	if m.evaluateLocked(c.head()) {
		return true
	}
	if m.isBlockerLocked(s) {
		m.parkOnBlockersLocked(c)
		return false
	}
	if s.cfg.FairnessWindow > 0 && s.cfg.Limit > 0 && s.shadow == nil {
		m.passLocked(c, s)
		m.promoteHolderLocked(s)
	}
	m.parkOnBlockersLocked(c)
	return true
}
