package admission

import "slices"

// A class waits on the scopes that block its head: it is parked in each
// one's waiting heap and looked at again when such a scope gains capacity
// or its order there changes. A class that a scope could serve but that must wait elsewhere
// is recorded in that scope's passed heap; once its head has waited the
// scope's FairnessWindow it becomes the scope's holder, for whom the scope
// keeps the capacity it needs.

// parking is a class's entry in one scope's waiting or passed heap; idx is
// its place there.
type parking struct {
	c   *class
	s   *scope
	idx int
}

// parked is a heap entry: the parking and a copy of its class head's sort
// key in the scope. Comparisons read the heap's own array only, so a heap
// of a million classes costs a cache miss per level, not several per
// comparison.
type parked struct {
	prio int32
	vt   int64
	seq  uint64
	p    *parking
}

func (s *scope) entry(p *parking) parked {
	h := p.c.head()
	e := parked{prio: h.prio, seq: h.seq, p: p}
	if s.cfg.RoundRobin {
		e.vt = h.vtIn(s)
	}
	return e
}

func (s *scope) before(a, b parked) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.vt != b.vt {
		return a.vt < b.vt
	}
	return a.seq < b.seq
}

// passLocked records that c was passed over in s while blocked elsewhere.
func (m *Memory) passLocked(c *class, s *scope) {
	for _, p := range c.passes {
		if p.s == s {
			return
		}
	}
	p := &parking{c: c, s: s, idx: -1}
	c.passes = append(c.passes, p)
	s.passed.push(s.entry(p))
}

func (m *Memory) unpassLocked(p *parking) {
	p.s.passed.remove(p.idx)
	p.c.passes = slices.DeleteFunc(p.c.passes, func(q *parking) bool { return q == p })
}

// promoteHolderLocked makes the earliest class passed over in s its holder
// once its head has waited s's fairness window.
func (m *Memory) promoteHolderLocked(s *scope) {
	if s.holder != nil || s.passed.len() == 0 || s.cfg.FairnessWindow == 0 || s.cfg.Limit == 0 || s.shadow != nil {
		return
	}
	p := s.passed.top().p
	h := p.c.head()
	if m.nowLocked()-h.arrival < int64(s.cfg.FairnessWindow) {
		return
	}
	m.unpassLocked(p)
	s.holder = h
	s.holdAmt = h.amountIn(s)
}

func (m *Memory) parkLocked(c *class, s *scope) {
	for _, p := range c.parks {
		if p.s == s {
			return
		}
	}
	p := &parking{c: c, s: s, idx: -1}
	c.parks = append(c.parks, p)
	s.waiting.push(s.entry(p))
}

func (m *Memory) unparkLocked(p *parking) {
	c := p.c
	if p.idx == 0 {
		m.markDirtyLocked(p.s) // the next class in p.s may now go
	}
	p.s.waiting.remove(p.idx)
	for i, q := range c.parks {
		if q == p {
			c.parks = slices.Delete(c.parks, i, i+1)
			break
		}
	}
}

// parkOnBlockersLocked makes c wait on exactly the scopes in m.blk.
func (m *Memory) parkOnBlockersLocked(c *class) {
	for i := len(c.parks) - 1; i >= 0; i-- {
		p := c.parks[i]
		if !m.isBlockerLocked(p.s) {
			m.unparkLocked(p)
		}
	}
	for _, b := range m.blk {
		m.parkLocked(c, b.s)
		if b.wake != 0 {
			m.scheduleRateWakeLocked(b.s, b.wake)
		}
	}
}

func (m *Memory) scheduleRateWakeLocked(s *scope, at int64) {
	switch {
	case s.rateIdx < 0:
		s.rateWakeAt = at
		m.rateWakes.push(s)
	case at < s.rateWakeAt:
		s.rateWakeAt = at
		m.rateWakes.fix(s.rateIdx)
	}
}

func (w *waiter) amountIn(s *scope) int64 {
	for _, cd := range w.class.cands {
		for _, n := range cd.needs {
			if n.s == s {
				return n.amt
			}
		}
	}
	return 0
}
