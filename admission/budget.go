package admission

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Budgets (ScopeConfig.Budget). Each scope counts, in its window, the cost
// settled (spent: the cost of the leases that ended) and the cost reserved
// by the leases held. A candidate with a Cost fits a budget scope when
// spent + reserved + cost is within the Budget; when spent + cost alone is
// past it, nothing but the next window can make room, so the candidate is
// dropped: at arrival, when the end of a lease spends what it needed
// (whatever its waiter waits on: see costEntry), or when a configuration
// tightens the budget. Everything is a few additions and O(log n) heap
// steps per scope of a lease or waiter, with no scan.
//
// A window that ends is followed by the next, from its end, with nothing
// spent and no known end (the caller configures it). Waiters held back by
// the reservations of a window are woken when it ends, by the scope's rate
// wake.

// budget is a scope's spend in the window in force.
type budget struct {
	spent, reserved int64
	// from and until bound the window in force, in Unix nanoseconds;
	// until is 0 while the engine runs a window it started itself.
	from, until int64
}

// roll brings the window up to now: once it has ended, the next starts at
// its end with nothing spent.
func (b *budget) roll(now int64) {
	if b.until != 0 && now >= b.until {
		b.from, b.until, b.spent = b.until, 0, 0
	}
}

// configureBudgetLocked applies s's budget configuration (s.cfg, changed
// from old). BudgetSpent counts only when the window in force changes. It
// reports whether the budget may have tightened, so that candidates that
// no longer fit must be dropped.
func (m *Memory) configureBudgetLocked(s *scope, old ScopeConfig) (tighter bool) {
	cfg, b := s.cfg, &s.budget
	if (old.Budget > 0) != (cfg.Budget > 0) {
		if cfg.Budget > 0 {
			m.budgetScopes++
		} else {
			m.budgetScopes--
		}
	}
	if cfg.Budget == 0 {
		b.from, b.until = 0, 0
		return false
	}
	now := m.nowLocked()
	if old.Budget > 0 {
		b.roll(now)
	}
	spent := b.spent
	if from := cfg.BudgetFrom.UnixNano(); old.Budget == 0 || from != b.from {
		b.from, b.spent = from, cfg.BudgetSpent
	}
	b.until = cfg.BudgetUntil.UnixNano()
	b.roll(now)
	return old.Budget == 0 || cfg.Budget < old.Budget || b.spent > spent
}

// overBudgetLocked reports whether cost can never fit what s's budget has
// left in its window. A shadow scope refuses nothing; it counts the
// would-be refusal (shadowGrantLocked).
func (m *Memory) overBudgetLocked(s *scope, cost int64) bool {
	if s.cfg.Budget == 0 || cost == 0 || s.shadow != nil {
		return false
	}
	s.budget.roll(m.nowLocked())
	return s.budget.spent+cost > s.cfg.Budget
}

// budgetRoomLocked reports whether cost fits s's budget beside the
// reservations held now. If not, s is woken when its window ends, when
// they no longer count.
func (m *Memory) budgetRoomLocked(s *scope, cost int64) bool {
	b := &s.budget
	b.roll(m.nowLocked())
	if b.spent+b.reserved+cost <= s.cfg.Budget {
		return true
	}
	if b.until != 0 {
		m.scheduleRateWakeLocked(s, b.until)
	}
	return false
}

// shadowBudgetLocked reports whether cost would have been refused by
// shadow scope s's budget, or, with reserved, made to wait for the
// reservations held.
func (m *Memory) shadowBudgetLocked(s *scope, cost int64, reserved bool) bool {
	b := &s.budget
	b.roll(m.nowLocked())
	if reserved {
		return b.spent+b.reserved+cost > s.cfg.Budget
	}
	return b.spent+cost > s.cfg.Budget
}

// neverFitsLocked reports whether a candidate reserving tokens and cost
// can never be admitted to s: more tokens than its TPM, or more cost than
// its budget has left.
func (m *Memory) neverFitsLocked(s *scope, tokens, cost int64) bool {
	return s.tooManyTokens(tokens) || m.overBudgetLocked(s, cost)
}

// neverFitError says why a candidate that never fits s does not:
// a *TokenLimitError or a *BudgetExceededError.
func (m *Memory) neverFitError(s *scope, tokens, cost int64) error {
	if s.tooManyTokens(tokens) {
		return tokenLimitError(s, tokens)
	}
	return budgetError(s)
}

func budgetError(s *scope) *BudgetExceededError {
	e := &BudgetExceededError{Scope: s.name}
	if s.budget.until != 0 {
		e.ResetAt = time.Unix(0, s.budget.until)
	}
	return e
}

// outcomeOf is the event of a waiter that failed with a never-fit error.
func outcomeOf(err error) Outcome {
	if _, ok := err.(*BudgetExceededError); ok {
		return OutcomeBudgetExceeded
	}
	return OutcomeNoCandidate
}

// dropOverBudgetLocked drops w's candidates whose cost no longer fits what
// a budget of theirs has left (settlements since w queued spent it), and
// ends w's wait with a *BudgetExceededError, naming the first such
// candidate's scope, if none is left. It reports whether it changed w.
func (m *Memory) dropOverBudgetLocked(w *waiter) bool {
	var first error
	left := m.keepCandsLocked(w, func(cd *cand) bool {
		cost := w.cands[cd.idx].Cost
		for _, n := range cd.needs {
			if m.overBudgetLocked(n.s, cost) {
				if first == nil {
					first = budgetError(n.s)
				}
				return false
			}
		}
		return true
	}, 0)
	if first == nil {
		return false
	}
	if left == 0 {
		m.dropWaiterLocked(w, OutcomeBudgetExceeded, first)
	}
	return true
}

// settleCostLocked moves a lease's cost in s from reserved to spent, in
// the window in force when the lease ends.
func (m *Memory) settleCostLocked(s *scope, cost int64) {
	b := &s.budget
	if s.cfg.Budget > 0 && b.until != 0 {
		b.roll(m.nowLocked())
	}
	b.reserved -= cost
	b.spent += cost
	if s.cfg.Budget > 0 {
		m.checkOversLocked(s)
		if m.spend != nil {
			m.spend(Spend{Scope: s.name, From: time.Unix(0, b.from), Spent: b.spent})
		}
	}
}

// Spend is what a budget scope had spent in a window: the cost settled
// there since From, the window's start.
type Spend struct {
	Scope string
	From  time.Time
	Spent int64
}

// SpendAtLeast raises what scope name has spent in its window in force
// to spent, if that window starts at from and counted less; otherwise
// it changes nothing. Spend only grows within a window, so a figure
// another home counted for it (a fleet's earlier leader, as its
// replicas saw it) is never more than the window spent, and the larger
// of two such figures is the better. Waiters whose cost no longer fits
// are dropped, as after a settlement.
func (m *Memory) SpendAtLeast(ctx context.Context, name string, from time.Time, spent int64) error {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	if m.closed {
		return ErrClosed
	}
	s := m.scopes[name]
	if s == nil {
		return fmt.Errorf("%w: %s", ErrUnknownScope, name)
	}
	b := &s.budget
	if s.cfg.Budget == 0 {
		return nil
	}
	b.roll(m.nowLocked())
	if b.from != from.UnixNano() || spent <= b.spent {
		return nil
	}
	b.spent = spent
	m.checkOversLocked(s)
	return nil
}

// budgetStats fills st's budget figures, in the window in force now.
func (m *Memory) budgetStats(s *scope, st *ScopeStats) {
	b := &s.budget
	if s.cfg.Budget > 0 {
		b.roll(m.nowLocked())
		st.BudgetFrom = time.Unix(0, b.from)
		if b.until != 0 {
			st.BudgetUntil = time.Unix(0, b.until)
		}
	}
	st.BudgetSpent, st.BudgetReserved = b.spent, b.reserved
}

// Waiters that settlements leave no room for. Each budget scope keeps, in
// a heap, its queued waiters by the largest cost they would reserve there
// (costEntry). When what the scope has spent grows (a lease ended) or its
// budget tightens, the next pump drops the candidates of the waiters on
// top whose cost no longer fits, wherever those waiters are parked: a
// waiter learns at once that its budget is spent rather than when it is
// next looked at. Each entry costs O(log n) to add and remove, and each
// drop O(log n).

// costEntry is a queued waiter's largest cost in budget scope s.
type costEntry struct {
	w    *waiter
	s    *scope
	cost int64
	idx  int
}

// indexCostsLocked files w, which just joined its class, in the heaps of
// its class's budget scopes where it reserves a cost.
func (m *Memory) indexCostsLocked(w *waiter) {
	for _, s := range w.class.scopes {
		if s.cfg.Budget > 0 {
			m.indexCostLocked(w, s)
		}
	}
}

// indexCostLocked files w in s's heap under its largest cost there, if any.
func (m *Memory) indexCostLocked(w *waiter, s *scope) {
	var most int64
	for _, cd := range w.class.cands {
		for _, n := range cd.needs {
			if n.s == s {
				most = max(most, w.cands[cd.idx].Cost)
			}
		}
	}
	if most == 0 {
		return
	}
	if s.overs.less == nil {
		s.overs = indexHeap[*costEntry]{
			less:   func(a, b *costEntry) bool { return a.cost > b.cost },
			setIdx: func(e *costEntry, i int) { e.idx = i },
		}
	}
	e := &costEntry{w: w, s: s, cost: most, idx: -1}
	w.costs = append(w.costs, e)
	s.overs.push(e)
}

// unindexCostsLocked takes w, leaving its class, out of those heaps.
func (m *Memory) unindexCostsLocked(w *waiter) {
	for _, e := range w.costs {
		if e.idx >= 0 {
			e.s.overs.remove(e.idx)
		}
	}
	clear(w.costs)
	w.costs = w.costs[:0]
}

// rebudgetLocked applies a budget set on s or taken off it to the heap of
// its queued waiters: O(waiters touching s), on a configuration change.
func (m *Memory) rebudgetLocked(s *scope, old ScopeConfig) {
	switch {
	case old.Budget == 0 && s.cfg.Budget > 0:
		for c := range s.classes {
			c.members.each(func(w *waiter) { m.indexCostLocked(w, s) })
		}
	case old.Budget > 0 && s.cfg.Budget == 0:
		for s.overs.len() > 0 {
			e := s.overs.top()
			s.overs.remove(0)
			e.w.costs = slices.DeleteFunc(e.w.costs, func(x *costEntry) bool { return x == e })
		}
	}
}

// checkOversLocked has the next pump drop the waiters that s's budget no
// longer has room for.
func (m *Memory) checkOversLocked(s *scope) {
	if s.overs.len() > 0 && !s.overCheck {
		s.overCheck = true
		m.overChecks = append(m.overChecks, s)
	}
}

// dropOversLocked drops, in each scope checkOversLocked named, the
// candidates of the waiters whose cost no longer fits what its budget has
// left. Each waiter dropped leaves the top entry of the heap or moves
// under a smaller cost, so the loop ends.
func (m *Memory) dropOversLocked() {
	for len(m.overChecks) > 0 {
		s := m.overChecks[len(m.overChecks)-1]
		m.overChecks = m.overChecks[:len(m.overChecks)-1]
		s.overCheck = false
		for s.overs.len() > 0 && m.overBudgetLocked(s, s.overs.top().cost) {
			m.dropOverBudgetLocked(s.overs.top().w)
		}
	}
}
