package gateway

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// A catalog applied retires the scopes of the platform models and
// groups it left, once the requests waiting here have moved to its own
// (requeue.go). In a fleet that is not enough: the leader's scopes are
// the fleet's, and a replica that has not taken the new catalog yet
// still has requests waiting on them, which it moves only when it takes
// it. So there (Config.RetireLater) they are kept until RetireLeft,
// which the replica calls once every replica serves a catalog without
// them: until then each keeps its limits (the leader enforces them as
// before), no request of a replica that took the new catalog routes to
// it, and a request waiting on it at one that has not is moved when its
// replica takes the catalog, at its place, as in one process. A task
// the fleet's leader admits to such a platform model before it takes the
// catalog may run here: Target answers with the platform model's target
// in the last catalog that had it, until RetireLeft.
//
// A platform model whose removal is complete (in one process: at the
// apply; in a fleet: at RetireLeft) is still where the tasks started on
// it run upstream: a video job there goes on, costs, and has a result
// for its user. So while its scope holds leases (a task's, from its
// admission to its end; a request's in flight) it is held rather than
// retired: its scope stays, with its limit and the leases counted, and
// Target answers with its last target, marked Retired, for those tasks
// to follow their jobs to the end (a task not submitted yet queues
// again instead: task.Target). No request or task is planned on it.
// Once its scope holds no lease it is retired, at the next poll of the
// overrides (Start) or RetireLeft.
//
// A platform model a catalog keeps by name but points at another site
// (another platform or account: site.go) has left, for the tasks
// submitted on its old site: the last catalog that had it there is kept
// (leavingScopes.moved) while its scope holds leases, and TargetAt
// answers those tasks with their old site's target, marked Retired. Its
// scope is the new one's: nothing is retired.

// leavingScopes are the platform models and groups that left the
// catalog, whose scopes wait for RetireLeft, and the platform models
// held for the leases on their scopes. pms and held hold, by platform
// model, the last catalog that had it, which Target reads without
// applyMu (under mu; they change under both); groups is under applyMu.
// moved are the sites platform models were pointed away from, by site,
// kept for the tasks submitted there (site.go) while their scopes hold
// leases, under mu too.
type leavingScopes struct {
	mu     sync.RWMutex
	pms    map[string]*Snapshot
	held   map[string]*Snapshot
	moved  map[string]*movedSite
	groups map[string]struct{}
}

// retirePlatformModelLocked retires platform model name, which left the
// catalog from prev, or holds it while its scope holds leases
// (retireOrHoldLocked); with Config.RetireLater it waits for RetireLeft
// (keepLeftLocked kept it). The caller holds applyMu.
func (s *Service) retirePlatformModelLocked(ctx context.Context, name string, prev *Snapshot) {
	if s.cfg.RetireLater {
		return
	}
	s.retireOrHoldLocked(ctx, name, prev)
}

// retireOrHoldLocked retires the scopes of platform model name, which
// left the catalog (its own and its acceptance copy's), and reports
// true; or, while they hold leases, holds it with from, the last
// catalog that had it, and reports false. The caller holds applyMu.
func (s *Service) retireOrHoldLocked(ctx context.Context, name string, from *Snapshot) bool {
	held := s.scopeHeld(ctx, weir.PlatformModelScope(name))
	if _, ok := s.acceptCopies.Load(name); ok && !held {
		held = s.scopeHeld(ctx, weir.AcceptanceScope(weir.PlatformModelScope(name)))
	}
	l := &s.leaving
	l.mu.Lock()
	if held {
		if l.held == nil {
			l.held = make(map[string]*Snapshot)
		}
		l.held[name] = from
	} else {
		delete(l.held, name)
	}
	l.mu.Unlock()
	if held {
		return false
	}
	s.removeScope(ctx, weir.PlatformModelScope(name))
	s.removeAcceptanceScopeLocked(ctx, name)
	return true
}

// scopeHeld reports whether scope holds leases, or may: one the engine
// cannot report now is kept for a later look.
func (s *Service) scopeHeld(ctx context.Context, scope string) bool {
	st, err := s.deps.Engine.Scope(ctx, scope)
	if errors.Is(err, admission.ErrUnknownScope) {
		return false
	}
	return err != nil || st.Leases > 0
}

// retireHeldLocked retires the platform models held whose scopes no
// longer hold leases, and returns how many; it forgets the sites moved
// from whose platform models' scopes hold none either. The caller holds
// applyMu.
func (s *Service) retireHeldLocked(ctx context.Context) int {
	s.leaving.mu.RLock()
	held := maps.Clone(s.leaving.held)
	moved := maps.Clone(s.leaving.moved)
	s.leaving.mu.RUnlock()
	for site, m := range moved {
		if !slices.ContainsFunc(m.pms, func(pm string) bool { return s.scopeHeld(ctx, weir.PlatformModelScope(pm)) }) {
			s.leaving.mu.Lock()
			delete(s.leaving.moved, site)
			s.leaving.mu.Unlock()
		}
	}
	n := 0
	for name, from := range held {
		if s.retireOrHoldLocked(ctx, name, from) {
			n++
		}
	}
	return n
}

// retireGroupLocked retires the scope of group name, which left the
// catalog, or leaves it to RetireLeft. The caller holds applyMu.
func (s *Service) retireGroupLocked(ctx context.Context, name string) {
	if s.cfg.RetireLater {
		if s.leaving.groups == nil {
			s.leaving.groups = make(map[string]struct{})
		}
		s.leaving.groups[name] = struct{}{}
		return
	}
	s.removeScope(ctx, weir.GroupScope(name))
}

// Leaving reports whether scopes that left the catalog wait for
// RetireLeft, or are held for their leases.
func (s *Service) Leaving() bool {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.leaving.mu.RLock()
	defer s.leaving.mu.RUnlock()
	return len(s.leaving.pms)+len(s.leaving.held)+len(s.leaving.groups) > 0
}

// RetireLeft retires the scopes kept since they left the catalog
// (Config.RetireLater) but those the catalog served now has again, and
// those of platform models held for their leases, and returns how many
// platform models and groups it retired. Call it once no replica serves
// a catalog that has them: a request still waiting on one fails there
// if no other candidate is left to it. A platform model whose scope
// still holds leases is held (retireOrHoldLocked); it is retired by a
// later call, or the poll of the overrides, once it holds none. One
// another replica retired already is forgotten here.
func (s *Service) RetireLeft(ctx context.Context) int {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	st := s.state.Load()
	n := s.retireHeldLocked(ctx)
	// keepLeftLocked dropped the platform models the catalog has again.
	for name, from := range s.leaving.pms {
		if s.retireOrHoldLocked(ctx, name, from) {
			n++
		}
	}
	for name := range s.leaving.groups {
		if _, ok := st.groups[name]; !ok {
			s.removeScope(ctx, weir.GroupScope(name))
			n++
		}
	}
	s.leaving.mu.Lock()
	s.leaving.pms = nil
	s.leaving.mu.Unlock()
	s.leaving.groups = nil
	return n
}

// keepLeftLocked keeps, with Config.RetireLater, the catalog prev for
// each of its platform models next has not, before next is served, so
// that Target finds them all along; those next has again go, from those
// held too (their scopes, which kept their leases, are next's). The
// caller holds applyMu.
func (s *Service) keepLeftLocked(prev, next *Snapshot) {
	if prev == nil {
		return
	}
	l := &s.leaving
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, kept := range []map[string]*Snapshot{l.pms, l.held} {
		for name := range kept {
			if _, ok := next.pms[name]; ok {
				delete(kept, name)
			}
		}
	}
	if !s.cfg.RetireLater {
		return
	}
	for name := range prev.pms {
		if _, ok := next.pms[name]; !ok {
			if l.pms == nil {
				l.pms = make(map[string]*Snapshot)
			}
			l.pms[name] = prev
		}
	}
}

// leftCatalog is the last catalog that had platform model name, if it
// left and waits for RetireLeft, or is held for its leases (retired);
// nil if neither.
func (s *Service) leftCatalog(name string) (from *Snapshot, retired bool) {
	s.leaving.mu.RLock()
	defer s.leaving.mu.RUnlock()
	if from := s.leaving.pms[name]; from != nil {
		return from, false
	}
	from = s.leaving.held[name]
	return from, from != nil
}
