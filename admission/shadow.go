package admission

import "time"

// Shadow scopes (ScopeConfig.Shadow). A shadow scope never makes anyone
// wait: fitsLocked lets every candidate through it, and it drops no
// candidate for its queue, its MaxWait or its TPM, nor holds capacity for
// anyone. Beside its real usage the engine keeps the scope's would-be
// state — what it would hold, and who would still wait, if it enforced
// its limits — and counts, at each admission through it, what the
// enforced scope would have done instead.
//
// Each lease admitted through a shadow scope is marked there as in (the
// enforced scope would have admitted it), queued (it would still wait,
// in the would-be queue, in arrival order) or out (it would have been
// refused, or dropped when MaxWait passed). excess is the amount of the
// held leases that are queued or out, so Used - excess is what the
// enforced scope would hold; a release or a raised limit that makes room
// there admits the would-be queue's head, as an enforced release would.
// Leases held when the scope became shadow, and restored ones, are in.
//
// An admission through a shadow scope would have been
//   - refused with no_candidate if it reserves more tokens than the TPM;
//   - made to wait (queued) if the would-be queue is not empty or the
//     would-be usage has no room for it — or refused with queue_full if
//     the queue (the waiters counted in the scope and the would-be queue)
//     is at QueueLimit;
//   - refused with budget_exceeded if its cost is more than the budget
//     has left in its window;
//   - made to wait (queued) if only the budget's reservations held stand
//     in the way, or for a rate limit (rate_limited) if a rate bucket is
//     short. These waits are counted, not followed: the lease is in.
//
// A shadow scope's budget counts spent and reserved cost as an enforced
// scope's does.
//
// Only the scope itself is simulated: the other scopes of a request
// decide as they do, and FairnessWindow holds are not simulated. A
// would-be waiter's MaxWait is kept by the engine's timer, through the
// scope's rate wake (a shadow scope never waits for a refill, so it is
// free): when it passes, the waiter is out, counted as a timeout.

// Would-be states of a lease in a shadow scope.
const (
	shadowIn uint8 = iota
	shadowQueued
	shadowOut
)

// shadowState is a shadow scope's would-be state, for as long as it is
// shadow: the scope drops it when Shadow is turned off, and a lease's
// marks of an earlier shadow period (another shadowState) count nothing.
type shadowState struct {
	excess int64
	queue  []shadowEntry // the would-be queue, from head; it may hold dead entries
	head   int
	live   int // live entries in queue[head:]
}

// shadowEntry is a lease in a would-be queue. It is dead once the lease
// has ended (the slot was freed, or reused under another id) or has
// left the queue.
type shadowEntry struct {
	l       *lease
	id      LeaseID
	arrival int64
}

// shadowMark is a lease's would-be state in one shadow scope.
type shadowMark struct {
	s     *scope
	sh    *shadowState
	amt   int64
	state uint8
	would Outcome // at admission, until reported
}

// setShadowLocked applies a change of s's configuration from old to its
// current one, once s.cfg is set.
func (m *Memory) setShadowLocked(s *scope, old ScopeConfig, now int64) {
	switch {
	case s.cfg.Shadow && !old.Shadow:
		s.shadow = &shadowState{}
		s.holder = nil
		m.shadowScopes++
	case !s.cfg.Shadow:
		s.shadow = nil
		m.shadowScopes--
	default:
		// A raised limit may admit would-be waiters; a changed MaxWait
		// may drop some.
		m.shadowServeLocked(s, now)
	}
}

// shadowGrantLocked judges an admission of amt (and tokens and cost)
// through shadow scope s, before s counts it, and charges s's rate buckets.
func (m *Memory) shadowGrantLocked(l *lease, s *scope, amt, tokens, cost int64) {
	sh := s.shadow
	now := m.nowLocked()
	var would Outcome
	state := shadowIn
	rpmOK, tpmOK := true, true
	if s.cfg.RPM > 0 {
		rpmOK, _ = s.rpm.has(now, 1)
	}
	if s.cfg.TPM > 0 && tokens > 0 {
		tpmOK, _ = s.tpm.has(now, float64(tokens))
	}
	switch {
	case m.restoring:
		// Admitted before a restart: it counts as it was.
	case s.cfg.TPM > 0 && tokens > s.cfg.TPM:
		would, state = OutcomeNoCandidate, shadowOut
	case s.cfg.Budget > 0 && cost > 0 && m.shadowBudgetLocked(s, cost, false):
		would, state = OutcomeBudgetExceeded, shadowOut
	case s.cfg.Limit > 0 && (sh.live > 0 || s.used-sh.excess+amt > s.cfg.Limit):
		if q := s.cfg.QueueLimit; q > 0 && s.queued+sh.live >= q {
			would, state = OutcomeQueueFull, shadowOut
		} else {
			would, state = OutcomeQueued, shadowQueued
		}
	case s.cfg.Budget > 0 && cost > 0 && m.shadowBudgetLocked(s, cost, true):
		would = OutcomeQueued
	case !rpmOK || !tpmOK:
		would = OutcomeRateLimited
	}
	if s.cfg.RPM > 0 {
		s.rpm.drain(now, 1)
	}
	if s.cfg.TPM > 0 && tokens > 0 {
		s.tpm.drain(now, float64(tokens))
	}
	l.marks = append(l.marks, shadowMark{s: s, sh: sh, amt: amt, state: state, would: would})
	if state != shadowIn {
		sh.excess += amt
	}
	if state == shadowQueued {
		sh.push(shadowEntry{l: l, id: l.id, arrival: now})
		m.shadowScheduleLocked(s)
	}
}

// shadowReportLocked counts and reports what l's shadow scopes would have
// done at its admission. It runs after the admitted event, so that an
// observer knows the lease (a fleet's leader names it then).
func (m *Memory) shadowReportLocked(l *lease) {
	for i := range l.marks {
		mk := &l.marks[i]
		switch mk.would {
		case 0:
			continue
		case OutcomeQueued, OutcomeRateLimited:
			mk.s.shadowWaits++
		default:
			mk.s.shadowRefusals++
		}
		m.emitLocked(Event{Outcome: OutcomeShadow, WaiterID: l.waiterID, Priority: l.prio, Lease: l.id, Needs: l.pub, Scope: mk.s.name, Would: mk.would})
		mk.would = 0
	}
}

// shadowReleaseLocked ends l's would-be states, once its amounts are
// back, and lets each shadow scope it held admit its would-be waiters.
func (m *Memory) shadowReleaseLocked(l *lease) {
	for i := range l.marks {
		mk := &l.marks[i]
		if mk.s.shadow != mk.sh {
			continue // an earlier shadow period's
		}
		switch mk.state {
		case shadowQueued:
			mk.sh.live-- // its entry is dead now
			mk.sh.excess -= mk.amt
		case shadowOut:
			mk.sh.excess -= mk.amt
		}
	}
	clear(l.marks)
	l.marks = l.marks[:0]
	for _, n := range l.needs {
		if n.s.shadow != nil && n.s.shadow.live > 0 {
			m.shadowServeLocked(n.s, m.nowLocked())
		}
	}
}

// shadowServeLocked brings s's would-be queue up to now: the waiters
// whose MaxWait has passed are out, and those the would-be usage has
// room for are in, in order.
func (m *Memory) shadowServeLocked(s *scope, now int64) {
	sh := s.shadow
	if sh == nil {
		return
	}
	for sh.live > 0 {
		e, mk := sh.front()
		if mw := int64(s.cfg.MaxWait); mw > 0 && e.arrival+mw <= now {
			sh.pop()
			mk.state = shadowOut
			s.shadowTimeouts++
			m.emitLocked(Event{Outcome: OutcomeShadow, WaiterID: e.l.waiterID, Priority: e.l.prio, Lease: e.id, Needs: e.l.pub,
				Waited: time.Duration(now - e.arrival), Scope: s.name, Would: OutcomeTimeout})
			continue
		}
		if lim := s.cfg.Limit; lim > 0 && s.used-sh.excess+mk.amt > lim {
			break
		}
		sh.pop()
		mk.state = shadowIn
		sh.excess -= mk.amt
	}
	m.shadowScheduleLocked(s)
}

// shadowScheduleLocked makes the engine's timer look at s when the
// MaxWait of its would-be queue's head passes.
func (m *Memory) shadowScheduleLocked(s *scope) {
	sh := s.shadow
	mw := int64(s.cfg.MaxWait)
	if mw <= 0 || sh.live == 0 {
		return
	}
	e, _ := sh.front()
	m.scheduleRateWakeLocked(s, e.arrival+mw)
}

// markIn returns the would-be state of e's lease in the shadow period
// sh, if e is still live there.
func (sh *shadowState) markIn(e *shadowEntry) *shadowMark {
	if e.l.id != e.id || e.l.needs == nil {
		return nil
	}
	for i := range e.l.marks {
		if mk := &e.l.marks[i]; mk.sh == sh {
			if mk.state == shadowQueued {
				return mk
			}
			return nil
		}
	}
	return nil
}

// front skips the dead entries at the head and returns the head; sh.live
// must be above 0.
func (sh *shadowState) front() (shadowEntry, *shadowMark) {
	for {
		e := sh.queue[sh.head]
		if mk := sh.markIn(&e); mk != nil {
			return e, mk
		}
		sh.queue[sh.head] = shadowEntry{}
		sh.head++
	}
}

// pop takes the head, which front just returned, out of the queue.
func (sh *shadowState) pop() {
	sh.queue[sh.head] = shadowEntry{}
	sh.head++
	sh.live--
	if sh.head == len(sh.queue) {
		sh.queue, sh.head = sh.queue[:0], 0
	}
}

// push appends e. Dead entries are dropped once they outnumber the live
// ones, so the queue's length stays within a constant of its live
// entries, at O(1) moves per push, amortized.
func (sh *shadowState) push(e shadowEntry) {
	if n := len(sh.queue) - sh.head; n > 2*sh.live+64 {
		kept := sh.queue[:0]
		for i := sh.head; i < len(sh.queue); i++ {
			if sh.markIn(&sh.queue[i]) != nil {
				kept = append(kept, sh.queue[i])
			}
		}
		clear(sh.queue[len(kept):])
		sh.queue, sh.head = kept, 0
	}
	sh.queue = append(sh.queue, e)
	sh.live++
}
