package admission

import (
	"slices"
	"strconv"
)

// class is the set of queued waiters sharing a fairness key, a priority and
// candidates: they wait on the same scopes and keep the same order in each,
// so the engine parks and wakes them together.
type class struct {
	key     string
	prio    int32
	fkey    string
	cands   []cand
	scopes  []*scope // distinct scopes over all candidates
	rr      []*scope // the round-robin ones, in waiter.vts order
	flows   []*flow  // the class's fairness key's turn in each of rr
	members roster
	parks   []*parking // in scopes' waiting heaps
	// uidx is c's place in m.unsettled; -1 when it is not there.
	uidx int
	// offset: its members were moved here when that much of their wait
	// had passed (see keepCandsLocked); 0 for a class joined on arrival.
	offset int64
	// turnsMixed: some member's turn in a round-robin scope is out of
	// arrival order (a waiter re-resolved into the class can take one), so
	// Position walks the class instead of searching it.
	turnsMixed bool
	passes     []*parking // in scopes' passed heaps
}

type cand struct {
	idx   int // index in the waiter's candidate list
	needs []need
}

type need struct {
	s   *scope
	amt int64
}

func (c *class) head() *waiter { return c.members.head() }

// Class keys: priority, fairness key, then each live candidate's index and
// scopes with amounts. Every variable part is length-prefixed, so no name
// can make two different classes share a key.
func appendKeyHead(b []byte, fkey string, prio int32) []byte {
	b = strconv.AppendInt(b, int64(prio), 10)
	return appendKeyString(b, fkey)
}

func appendKeyCand(b []byte, idx int, needs []Need) []byte {
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(idx), 10)
	for _, n := range needs {
		b = appendKeyString(b, n.Scope)
		b = strconv.AppendInt(b, n.Amount, 10)
	}
	return b
}

func appendKeyString(b []byte, s string) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

func (m *Memory) newClassLocked(key, fkey string, prio int32, cands []cand) *class {
	c := &class{key: key, prio: prio, fkey: fkey, cands: cands, uidx: -1}
	for _, cd := range cands {
		for _, n := range cd.needs {
			if !slices.Contains(c.scopes, n.s) {
				c.scopes = append(c.scopes, n.s)
				n.s.classes[c] = struct{}{}
				if n.s.cfg.RoundRobin {
					c.rr = append(c.rr, n.s)
					c.flows = append(c.flows, n.s.flowLocked(fkey))
				}
			}
		}
	}
	m.classes[key] = c
	return c
}

func (m *Memory) dropClassIfEmptyLocked(c *class) {
	if c.members.len() > 0 {
		return
	}
	for len(c.parks) > 0 {
		m.unparkLocked(c.parks[len(c.parks)-1])
	}
	for len(c.passes) > 0 {
		m.unpassLocked(c.passes[len(c.passes)-1])
	}
	for _, s := range c.scopes {
		delete(s.classes, c)
	}
	if c.uidx >= 0 {
		m.unsettled.remove(c.uidx)
	}
	delete(m.classes, c.key)
}

// joinClassLocked puts w in class c and counts it in c's scopes.
func (m *Memory) joinClassLocked(w *waiter, c *class) {
	w.class = c
	w.vt0, w.vts = 0, nil
	for i, s := range c.rr {
		f := c.flows[i]
		vt := max(f.pass, s.vclock) + 1
		f.pass = vt
		f.waiting++
		w.setVT(i, vt)
	}
	for _, s := range c.scopes {
		s.queued++
	}
	var wasHead *waiter
	if c.members.len() > 0 {
		wasHead = c.head()
	}
	c.members.push(w)
	if m.budgetScopes > 0 {
		m.indexCostsLocked(w)
	}
	if wasHead != nil && c.head() != wasHead {
		m.classHeadChangedLocked(c)
	}
}

// leaveClassLocked takes w out of its class and uncounts it.
func (m *Memory) leaveClassLocked(w *waiter) {
	c := w.class
	wasHead := c.head() == w
	c.members.remove(w)
	if len(w.costs) > 0 {
		m.unindexCostsLocked(w)
	}
	for _, s := range c.scopes {
		s.queued--
		if s.holder == w {
			s.holder = nil
			m.markDirtyLocked(s)
		}
	}
	// A key's turn is forgotten once it has nobody waiting and the scope
	// has caught up with it; a class holds its flows only while it has
	// members, so a forgotten flow is never used again.
	for i, s := range c.rr {
		f := c.flows[i]
		f.waiting--
		if f.waiting <= 0 && f.pass <= s.vclock {
			delete(s.flows, c.fkey)
		}
	}
	w.class = nil
	if c.members.len() == 0 {
		m.dropClassIfEmptyLocked(c)
		return
	}
	if wasHead {
		m.classHeadChangedLocked(c)
	}
}

// classHeadChangedLocked re-orders c wherever it is parked; the scopes it
// is parked on may now admit a different waiter first.
func (m *Memory) classHeadChangedLocked(c *class) {
	if c.uidx >= 0 {
		m.unsettled.fix(c.uidx)
	}
	for _, p := range c.parks {
		p.s.waiting.items[p.idx] = p.s.entry(p)
		p.s.waiting.fix(p.idx)
		m.markDirtyLocked(p.s)
	}
	for _, p := range c.passes {
		p.s.passed.items[p.idx] = p.s.entry(p)
		p.s.passed.fix(p.idx)
	}
}
