package admission

import (
	"cmp"
	"slices"
)

// probe is a waiter's identity for ordering checks: a queued waiter, or a
// newcomer that has no waiter yet.
type probe struct {
	w    *waiter
	prio int32
	seq  uint64
	fkey string
}

func (w *waiter) vtIn(s *scope) int64 {
	for i, r := range w.class.rr {
		if r == s {
			return w.vtAt(i)
		}
	}
	return 0
}

func (w *waiter) vtAt(i int) int64 {
	if i == 0 {
		return w.vt0
	}
	return w.vts[i-1]
}

func (w *waiter) setVT(i int, vt int64) {
	if i == 0 {
		w.vt0 = vt
		return
	}
	if w.vts == nil {
		w.vts = make([]int64, len(w.class.rr)-1)
	}
	w.vts[i-1] = vt
}

// precedes reports whether a comes before b in s's order: priority, then in
// a round-robin scope the fairness turn, then arrival.
func (s *scope) precedes(a, b *waiter) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if s.cfg.RoundRobin {
		if va, vb := a.vtIn(s), b.vtIn(s); va != vb {
			return va < vb
		}
	}
	return a.seq < b.seq
}

func (p *probe) vtIn(s *scope) int64 {
	if p.w != nil {
		return p.w.vtIn(s)
	}
	return s.nextVT(p.fkey)
}

// flowLocked finds or makes fkey's turn in s.
func (s *scope) flowLocked(fkey string) *flow {
	if s.flows == nil {
		s.flows = make(map[string]*flow)
	}
	f := s.flows[fkey]
	if f == nil {
		f = &flow{}
		s.flows[fkey] = f
	}
	return f
}

func (s *scope) nextVT(fkey string) int64 {
	if f := s.flows[fkey]; f != nil && f.pass > s.vclock {
		return f.pass + 1
	}
	return s.vclock + 1
}

func (s *scope) probePrecedes(p *probe, b *waiter) bool {
	if p.prio != b.prio {
		return p.prio > b.prio
	}
	if s.cfg.RoundRobin {
		if va, vb := p.vtIn(s), b.vtIn(s); va != vb {
			return va < vb
		}
	}
	return p.seq < b.seq
}

// globallyPrecedes orders by priority and arrival only, the same in every
// scope, so that holds taken in different scopes can never wait on each
// other in a cycle.
func globallyPrecedes(p *probe, b *waiter) bool {
	if p.prio != b.prio {
		return p.prio > b.prio
	}
	return p.seq < b.seq
}

// earlier orders waiters across scopes: priority, then arrival.
func earlier(a, b *waiter) bool {
	return a.prio > b.prio || (a.prio == b.prio && a.seq < b.seq)
}

// sortGlobally sorts ws in global order: priority, then arrival.
func sortGlobally(ws []*waiter) {
	slices.SortFunc(ws, func(a, b *waiter) int {
		return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(a.seq, b.seq))
	})
}
