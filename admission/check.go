package admission

import "fmt"

// blocker is the scope one candidate waits on.
type blocker struct {
	s    *scope
	wake int64 // when a rate limit refills enough; 0 for capacity
}

// fitsLocked reports whether p may take amt (and tokens and cost) of s now;
// if a rate limit stands in the way, wake says when it will have refilled
// enough. A budget's reservations stand in the way as capacity does.
func (m *Memory) fitsLocked(s *scope, p *probe, amt, tokens, cost int64) (ok bool, wake int64) {
	if s.orphaned || s.gated {
		if s.orphaned || s.cfg.Paused {
			return false, 0
		}
		return true, 0 // shadow: enforces nothing; grantLocked counts what it would have done
	}
	if lim := s.cfg.Limit; lim > 0 {
		if s.used+amt > lim {
			return false, 0
		}
		if s.holder == nil && s.passed.len() > 0 {
			m.promoteHolderLocked(s)
		}
		if h := s.holder; h != nil && h != p.w && !globallyPrecedes(p, h) && s.used+s.holdAmt+amt > lim {
			return false, 0
		}
	}
	if s.waiting.len() > 0 && (p.w == nil || p.w != s.holder) {
		if top := s.waiting.top().p.c.head(); top != p.w && !s.probePrecedes(p, top) {
			return false, 0
		}
	}
	if s.cfg.Budget > 0 && cost > 0 && !m.budgetRoomLocked(s, cost) {
		return false, 0
	}
	if s.cfg.RPM > 0 {
		if ok, wake := s.rpm.has(m.nowLocked(), 1); !ok {
			return false, wake
		}
	}
	if s.cfg.TPM > 0 && tokens > 0 {
		if ok, wake := s.tpm.has(m.nowLocked(), float64(tokens)); !ok {
			return false, wake
		}
	}
	return true, 0
}

// evaluateLocked admits w to its first candidate that fits, or collects in
// m.blk the scope each candidate waits on. It reports true when w is no
// longer where it was: admitted, or (its budgets spent meanwhile) moved to
// the class of the candidates it has left, or failed.
func (m *Memory) evaluateLocked(w *waiter) bool {
	if m.budgetScopes > 0 && m.dropOverBudgetLocked(w) {
		return true
	}
	m.blk = m.blk[:0]
	p := probe{w: w, prio: w.prio, seq: w.seq}
	for j := range w.class.cands {
		cd := &w.class.cands[j]
		c := &w.cands[cd.idx]
		b, ok := m.candidateBlockerLocked(&p, cd.needs, c.Tokens, c.Cost)
		if ok {
			m.admitLocked(w, j)
			return true
		}
		m.addBlockerLocked(b)
	}
	return false
}

func (m *Memory) addBlockerLocked(b blocker) {
	for i := range m.blk {
		if m.blk[i].s == b.s {
			if b.wake != 0 && (m.blk[i].wake == 0 || b.wake < m.blk[i].wake) {
				m.blk[i].wake = b.wake
			}
			return
		}
	}
	m.blk = append(m.blk, b)
}

func (m *Memory) candidateBlockerLocked(p *probe, needs []need, tokens, cost int64) (blocker, bool) {
	for _, n := range needs {
		if ok, wake := m.fitsLocked(n.s, p, n.amt, tokens, cost); !ok {
			return blocker{s: n.s, wake: wake}, false
		}
	}
	return blocker{}, true
}

// checkCandidateLocked resolves c's scopes into buf and finds the scope it
// would wait on (none if it fits now). It returns nil needs when a scope is
// orphaned or c can never fit one (then never says why: more tokens than
// its TPM, more cost than its budget has left), and ErrUnknownScope when
// one does not exist.
func (m *Memory) checkCandidateLocked(p *probe, c *Candidate, buf []need) (needs []need, b blocker, never, err error) {
	for _, n := range c.Needs {
		s := m.scopes[n.Scope]
		if s == nil {
			return nil, b, nil, fmt.Errorf("%w: %s", ErrUnknownScope, n.Scope)
		}
		if s.orphaned {
			return nil, b, nil, nil
		}
		if m.neverFitsLocked(s, c.Tokens, c.Cost) {
			return nil, b, m.neverFitError(s, c.Tokens, c.Cost), nil
		}
		buf = append(buf, need{s: s, amt: n.Amount})
		if b.s == nil {
			if ok, wake := m.fitsLocked(s, p, n.Amount, c.Tokens, c.Cost); !ok {
				b = blocker{s: s, wake: wake}
			}
		}
	}
	return buf, b, nil, nil
}

// resolveNeedsLocked maps scope names to scopes. It returns nil needs (and
// no error) when a scope is orphaned.
func (m *Memory) resolveNeedsLocked(in []Need, buf []need) ([]need, error) {
	out := buf
	for _, n := range in {
		s := m.scopes[n.Scope]
		if s == nil {
			return nil, fmt.Errorf("%w: %s", ErrUnknownScope, n.Scope)
		}
		if s.orphaned {
			return nil, nil
		}
		out = append(out, need{s: s, amt: n.Amount})
	}
	return out, nil
}

// queueableLocked reports whether a candidate's scopes exist, are usable,
// can hold its tokens and cost and have room in their queues; if not for a
// full queue alone, full is that scope.
func (m *Memory) queueableLocked(c *Candidate) (ok bool, full *scope) {
	for _, n := range c.Needs {
		s := m.scopes[n.Scope]
		if s == nil || s.orphaned || m.neverFitsLocked(s, c.Tokens, c.Cost) {
			return false, nil
		}
		if q := s.cfg.QueueLimit; q > 0 && s.queued >= q && full == nil && s.shadow == nil {
			full = s
		}
	}
	return full == nil, full
}

func (m *Memory) isBlockerLocked(s *scope) bool {
	for _, b := range m.blk {
		if b.s == s {
			return true
		}
	}
	return false
}
