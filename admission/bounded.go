package admission

import (
	"strconv"
	"time"
)

// The memory home's bounds on a wait (contract point 6): a waiter's own
// deadline, the MaxWait of its scopes, and candidates that reserve more
// tokens than a TPM bucket holds.
//
// Each waiter has one entry in m.deadlines, keyed by its next due moment
// (waiter.due): the earlier of its own deadline and the first moment a
// MaxWait of its class's scopes passes. When it comes, the waiter either
// times out or loses the candidates on the scopes whose MaxWait passed and
// moves to the class of those left, with its arrival and its turns kept.

// capAt is when the first MaxWait of w's scopes passes, counted from w's
// arrival; 0 if none of them has one.
func (w *waiter) capAt() int64 {
	var at int64
	for _, s := range w.class.scopes {
		if mw := int64(s.cfg.MaxWait); mw > 0 && s.shadow == nil {
			if c := w.arrival + mw; at == 0 || c < at {
				at = c
			}
		}
	}
	return at
}

// scheduleLocked files w in m.deadlines under its next due moment, or takes
// it out when it has none.
func (m *Memory) scheduleLocked(w *waiter) {
	due := w.deadline
	if c := w.capAt(); c != 0 && (due == 0 || c < due) {
		due = c
	}
	w.due = due
	switch {
	case due == 0 && w.didx >= 0:
		m.deadlines.remove(int(w.didx))
	case due == 0:
	case w.didx >= 0:
		m.deadlines.fix(int(w.didx))
	default:
		m.deadlines.push(w)
	}
}

// dueLocked settles w, whose due moment has come: its own deadline ends its
// wait; a passed MaxWait drops the candidates that touch that scope.
func (m *Memory) dueLocked(w *waiter, now int64) {
	if w.deadline != 0 && w.deadline <= now {
		m.timeoutLocked(w, now, &TimeoutError{Setting: SettingDeadline, Value: time.Duration(w.deadline - w.arrival)})
		return
	}
	m.maxWaitLocked(w, now)
}

// maxWaitLocked drops w's candidates that touch a scope whose MaxWait has
// passed by now and re-files w under its next due moment. A waiter left
// with no candidate times out, naming the scope of its most preferred
// candidate among those dropped. It reports whether w is still waiting.
func (m *Memory) maxWaitLocked(w *waiter, now int64) bool {
	passed := func(s *scope) bool {
		mw := int64(s.cfg.MaxWait)
		return mw > 0 && w.arrival+mw <= now && s.shadow == nil
	}
	var fired *scope
	var offset int64
	for _, cd := range w.class.cands {
		for _, n := range cd.needs {
			if passed(n.s) {
				if fired == nil {
					fired = n.s
				}
				offset = max(offset, int64(n.s.cfg.MaxWait))
			}
		}
	}
	if fired == nil {
		m.scheduleLocked(w)
		return true
	}
	left := m.keepCandsLocked(w, func(cd *cand) bool {
		for _, n := range cd.needs {
			if passed(n.s) {
				return false
			}
		}
		return true
	}, offset)
	if left == 0 {
		m.timeoutLocked(w, now, &TimeoutError{Scope: fired.name, Setting: SettingMaxWait, Value: fired.cfg.MaxWait})
		return false
	}
	m.scheduleLocked(w)
	return true
}

// timeoutLocked ends w's wait with e, completed with how long it waited
// and, for a retry, the wait estimate of the scope it waited on (the one
// Position names).
func (m *Memory) timeoutLocked(w *waiter, now int64, e *TimeoutError) {
	on := w.class.waitingOn()
	e.Waited = time.Duration(now - w.arrival)
	e.WaitingOn = on.name
	// A request arriving now queues behind all that wait there but w.
	e.RetryAfter = on.waitEstimate(on.queued)
	m.dropWaiterLocked(w, OutcomeTimeout, e)
}

// waitingOn is the scope c's head waits on, as Position reports it.
func (c *class) waitingOn() *scope {
	if len(c.parks) > 0 {
		return c.parks[0].s
	}
	return c.cands[0].needs[0].s
}

// waitEstimate guesses how long the n-th waiter of s's queue waits: n
// leases at the recent mean hold time, Limit at a time, or n requests at
// the RPM rate, whichever is longer. Zero when there is nothing to go on.
func (s *scope) waitEstimate(n int) time.Duration {
	var d float64
	if s.meanHold > 0 {
		d = float64(n) * s.meanHold / float64(max(s.cfg.Limit, 1))
	}
	if r := s.cfg.RPM; r > 0 {
		d = max(d, float64(n)*nanosPerMinute/float64(r))
	}
	return time.Duration(d)
}

// keepCandsLocked keeps of w's candidates those keep accepts. If it
// accepts some but not all, w moves to the class of those left (with its
// arrival and turns kept, and a reselected event) to be settled by the
// next pump. It returns how many are left; with none left w is unchanged,
// for the caller to end its wait.
//
// offset, when not 0, is how far into their wait the waiters moved by it
// are: it goes into the class key, so that waiters moved at the same
// offset from their arrival (a MaxWait) share a class that they join in
// arrival order, and its members are appended, never inserted, even when
// newcomers with the same candidates wait in a class of their own.
func (m *Memory) keepCandsLocked(w *waiter, keep func(*cand) bool, offset int64) int {
	old := w.class
	var kept uint64
	n := 0
	for j := range old.cands {
		if keep(&old.cands[j]) {
			kept |= 1 << j
			n++
		}
	}
	if n == 0 || n == len(old.cands) {
		return n
	}
	live := make([]cand, 0, n)
	for j, cd := range old.cands {
		if kept&(1<<j) != 0 {
			live = append(live, cd)
		}
	}
	b := m.classKeyLocked(old.fkey, w.prio, live, offset)
	c := m.moveLocked(w, string(b), live, w.cands, offset)
	m.emitLocked(Event{Outcome: OutcomeReselected, WaiterID: w.id, Priority: w.prio})
	m.unsettleLocked(c)
	return n
}

// classKeyLocked builds, in m.keyBuf, the key of the class of cands (see
// appendKeyHead), with offset (see keepCandsLocked) when it is not 0.
func (m *Memory) classKeyLocked(fkey string, prio int32, cands []cand, offset int64) []byte {
	b := appendKeyHead(m.keyBuf[:0], fkey, prio)
	for _, cd := range cands {
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(cd.idx), 10)
		for _, n := range cd.needs {
			b = appendKeyString(b, n.s.name)
			b = strconv.AppendInt(b, n.amt, 10)
		}
	}
	if offset != 0 {
		b = append(b, '^')
		b = strconv.AppendInt(b, offset, 10)
	}
	m.keyBuf = b
	return b
}

// moveLocked moves w, queued, to the class with this key, made of live
// (and offset) if it does not exist, and gives it cands. The waiter keeps its place: its
// arrival (seq), and its turn in every round-robin scope it was already
// waiting in; in one new to it, it takes the turn of the first later
// waiter of its key there, so that the key stays first-in-first-out.
//
// The class is looked up only after w has left its old one: leaving may
// forget a fairness key's turn in a scope (leaveClassLocked), and a class
// made before that would hold a flow the scope no longer knows.
func (m *Memory) moveLocked(w *waiter, key string, live []cand, cands []Candidate, offset int64) *class {
	old := w.class
	var buf [4]scopeTurn
	turns := buf[:0]
	for i, rs := range old.rr {
		turns = append(turns, scopeTurn{rs, w.vtAt(i)})
	}
	fkey := old.fkey
	m.leaveClassLocked(w)
	c := m.classes[key]
	if c == nil {
		c = m.newClassLocked(key, fkey, w.prio, live)
		c.offset = offset
	}
	w.cands = cands
	m.joinClassLocked(w, c)
	for i, rs := range c.rr {
		if vt, ok := turnIn(turns, rs); ok {
			w.setVT(i, vt)
		} else if vt, ok := firstTurnAfter(rs, c.fkey, w); ok {
			w.setVT(i, vt)
		}
	}
	c.noteTurns(w)
	if c.head() == w {
		m.classHeadChangedLocked(c)
	}
	return c
}

type scopeTurn struct {
	s  *scope
	vt int64
}

func turnIn(turns []scopeTurn, s *scope) (int64, bool) {
	for _, t := range turns {
		if t.s == s {
			return t.vt, true
		}
	}
	return 0, false
}

// tooManyTokens reports whether tokens can never fit s's TPM bucket. A
// shadow scope drops no candidate for it; it counts the would-be refusal.
func (s *scope) tooManyTokens(tokens int64) bool {
	return s.cfg.TPM > 0 && tokens > s.cfg.TPM && s.shadow == nil
}

func tokenLimitError(s *scope, tokens int64) *TokenLimitError {
	return &TokenLimitError{Scope: s.name, TPM: s.cfg.TPM, Tokens: tokens}
}

// rescopeLocked applies a change of s's MaxWait, or (tighter) a lowered TPM
// or Budget, to the waiters that touch s: their due moments move, and
// candidates whose tokens or cost no longer fit s are dropped. It costs
// O(waiters touching s), on a configuration change only.
func (m *Memory) rescopeLocked(s *scope, now int64, tighter bool) {
	var affected []*waiter
	for c := range s.classes {
		affected = c.members.appendTo(affected)
	}
	sortGlobally(affected)
	for _, w := range affected {
		if w.class == nil {
			continue // ended while an earlier one was handled
		}
		if tighter {
			var never error
			left := m.keepCandsLocked(w, func(cd *cand) bool {
				c := &w.cands[cd.idx]
				for _, n := range cd.needs {
					if n.s == s && m.neverFitsLocked(s, c.Tokens, c.Cost) {
						if never == nil {
							never = m.neverFitError(s, c.Tokens, c.Cost)
						}
						return false
					}
				}
				return true
			}, 0)
			if left == 0 {
				m.dropWaiterLocked(w, outcomeOf(never), never)
				continue
			}
		}
		m.maxWaitLocked(w, now)
	}
}
