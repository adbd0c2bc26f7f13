package admission

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// scope is one named capacity: its configuration, its usage and the
// classes queued on it.
type scope struct {
	name     string
	cfg      ScopeConfig
	used     int64
	leases   int
	queued   int
	orphaned bool
	removed  bool
	// gated: paused or shadow, so fitsLocked looks at one field for both.
	gated bool
	// shadow is the would-be state while the scope is shadow (shadow.go);
	// nil otherwise.
	shadow *shadowState
	// dirty: in m.dirty, to be pumped; again: made dirty while being
	// pumped; checkHolder: the holder has not been looked at since.
	dirty, again, checkHolder bool

	// waiting holds the classes waiting on this scope, in its order.
	waiting indexHeap[parked]
	// passed holds the classes passed over here while blocked elsewhere,
	// earliest arrival first; the first to outwait FairnessWindow becomes
	// the holder, for whom the scope keeps its share.
	passed  indexHeap[parked]
	holder  *waiter
	holdAmt int64

	rpm, tpm   bucket
	budget     budget
	rateWakeAt int64
	rateIdx    int
	// overs holds the queued waiters by the largest cost they reserve
	// here, while the scope has a budget; overCheck: in m.overChecks.
	overs     indexHeap[*costEntry]
	overCheck bool

	flows  map[string]*flow // round-robin turns by fairness key
	vclock int64

	meanHold float64 // EWMA of hold time, ns
	classes  map[*class]struct{}

	// What the scope would have done while shadow (ScopeStats Shadow*).
	shadowWaits, shadowRefusals, shadowTimeouts int64
}

type flow struct {
	pass    int64
	waiting int
}

// SetScope creates a scope or changes its configuration.
func (m *Memory) SetScope(ctx context.Context, name string, cfg ScopeConfig) error {
	if name == "" {
		return invalidf("scope has no name")
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("scope %s: %w", name, err)
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	now := m.nowLocked()
	if m.closed {
		return ErrClosed
	}
	s := m.scopes[name]
	if s == nil {
		s = &scope{name: name, rateIdx: -1, classes: make(map[*class]struct{})}
		s.waiting = indexHeap[parked]{
			less:   s.before,
			setIdx: func(e parked, i int) { e.p.idx = i },
		}
		s.passed = indexHeap[parked]{
			less:   func(a, b parked) bool { return a.seq < b.seq },
			setIdx: func(e parked, i int) { e.p.idx = i },
		}
		m.scopes[name] = s
	}
	old := s.cfg
	s.cfg = cfg
	s.gated = cfg.Paused || cfg.Shadow
	if old.Owner != cfg.Owner {
		unindex(m.ownedScopes, old.Owner, s)
		index(m.ownedScopes, cfg.Owner, s)
	}
	s.rpm.configure(cfg.RPM, now)
	s.tpm.configure(cfg.TPM, now)
	if cfg.Owner != "" && cfg.OwnerGen <= m.fenced[cfg.Owner] {
		s.orphaned = true
	} else if old.Owner != cfg.Owner || old.OwnerGen != cfg.OwnerGen {
		s.orphaned = false
	}
	if old.RoundRobin != cfg.RoundRobin {
		// The order changed: rebuild the waiting heap under it.
		items := s.waiting.items
		s.waiting.items = nil
		for _, e := range items {
			s.waiting.push(s.entry(e.p))
		}
	}
	if s.holder != nil && (cfg.FairnessWindow == 0 || cfg.Limit == 0) {
		s.holder = nil
	}
	if cfg.Shadow || old.Shadow {
		m.setShadowLocked(s, old, now)
	}
	// A scope that starts to enforce applies its TPM, Budget and MaxWait
	// to the waiters already queued, as a lowered TPM or Budget or a
	// changed MaxWait does.
	enforced := old.Shadow && !cfg.Shadow
	tighter := cfg.TPM > 0 && (old.TPM == 0 || cfg.TPM < old.TPM || enforced)
	if m.configureBudgetLocked(s, old) || (cfg.Budget > 0 && enforced) {
		tighter = true
	}
	if (old.Budget > 0) != (cfg.Budget > 0) {
		m.rebudgetLocked(s, old)
	}
	if len(s.classes) > 0 && (tighter || cfg.MaxWait != old.MaxWait || cfg.Shadow != old.Shadow) {
		m.rescopeLocked(s, now, tighter)
	}
	if cfg.Paused && !old.Paused {
		// Its waiters with a resolver are asked where else they may go.
		m.reresolveLocked(now, []*scope{s}, false)
	}
	m.markDirtyLocked(s)
	return nil
}

// RemoveScope retires a scope.
func (m *Memory) RemoveScope(ctx context.Context, name string) error {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	now := m.nowLocked()
	s := m.scopes[name]
	if s == nil {
		return fmt.Errorf("%w: %s", ErrUnknownScope, name)
	}
	delete(m.scopes, name)
	unindex(m.ownedScopes, s.cfg.Owner, s)
	s.removed = true
	s.orphaned = true
	if s.cfg.Budget > 0 {
		m.budgetScopes--
	}
	if s.shadow != nil {
		// Nothing more is admitted there: nothing more to judge.
		s.shadow = nil
		m.shadowScopes--
	}
	m.reresolveLocked(now, []*scope{s}, false)
	return nil
}

// Scope reports one scope's state.
func (m *Memory) Scope(ctx context.Context, name string) (ScopeStats, error) {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	now := m.nowLocked()
	s := m.scopes[name]
	if s == nil {
		return ScopeStats{}, fmt.Errorf("%w: %s", ErrUnknownScope, name)
	}
	st := ScopeStats{
		Name:     name,
		Config:   s.cfg,
		Used:     s.used,
		Leases:   s.leases,
		Queued:   s.queued,
		Orphaned: s.orphaned,
		MeanHold: time.Duration(s.meanHold),

		ShadowWaits:    s.shadowWaits,
		ShadowRefusals: s.shadowRefusals,
		ShadowTimeouts: s.shadowTimeouts,
	}
	if s.shadow != nil {
		st.ShadowQueued = s.shadow.live
	}
	if s.holder != nil {
		st.Held = s.holdAmt
	}
	if s.cfg.RPM > 0 {
		s.rpm.refill(now)
		st.RPMAvailable = s.rpm.level
	}
	if s.cfg.TPM > 0 {
		s.tpm.refill(now)
		st.TPMAvailable = s.tpm.level
	}
	m.budgetStats(s, &st)
	return st, nil
}

// Scopes reports every scope, sorted by name.
func (m *Memory) Scopes(ctx context.Context) []ScopeStats {
	m.mu.Lock()
	names := make([]string, 0, len(m.scopes))
	for name := range m.scopes {
		names = append(names, name)
	}
	m.mu.Unlock()
	slices.Sort(names)
	out := make([]ScopeStats, 0, len(names))
	for _, name := range names {
		if st, err := m.Scope(ctx, name); err == nil {
			out = append(out, st)
		}
	}
	return out
}

func (m *Memory) markDirtyLocked(s *scope) {
	s.checkHolder = true
	if s.dirty {
		s.again = true
		return
	}
	s.dirty = true
	m.dirty = append(m.dirty, s)
}
