package gateway

import (
	"context"
	"sync"

	"github.com/weir-gateway/weir"
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

// leavingScopes are the platform models and groups that left the
// catalog, whose scopes wait for RetireLeft. pms holds, by platform
// model, the last catalog that had it, which Target reads without
// applyMu (under mu); groups is under applyMu.
type leavingScopes struct {
	mu     sync.RWMutex
	pms    map[string]*Snapshot
	groups map[string]struct{}
}

// retirePlatformModelLocked retires the scopes of platform model name,
// which left the catalog (its own and its acceptance copy's); with
// Config.RetireLater they wait for RetireLeft (keepLeftLocked kept the
// platform model). The caller holds applyMu.
func (s *Service) retirePlatformModelLocked(ctx context.Context, name string) {
	if s.cfg.RetireLater {
		return
	}
	s.removeScope(ctx, weir.PlatformModelScope(name))
	s.removeAcceptanceScopeLocked(ctx, name)
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
// RetireLeft.
func (s *Service) Leaving() bool {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return len(s.leaving.pms)+len(s.leaving.groups) > 0
}

// RetireLeft retires the scopes kept since they left the catalog
// (Config.RetireLater) but those the catalog served now has again, and
// returns how many platform models and groups it retired. Call it once
// no replica serves a catalog that has them: a request still waiting on
// one fails there if no other candidate is left to it. One another
// replica retired already is forgotten here.
func (s *Service) RetireLeft(ctx context.Context) int {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	st := s.state.Load()
	n := 0
	// keepLeftLocked dropped the platform models the catalog has again.
	for name := range s.leaving.pms {
		s.removeScope(ctx, weir.PlatformModelScope(name))
		s.removeAcceptanceScopeLocked(ctx, name)
		n++
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
// that Target finds them all along; those next has again go. The caller
// holds applyMu.
func (s *Service) keepLeftLocked(prev, next *Snapshot) {
	if !s.cfg.RetireLater || prev == nil {
		return
	}
	l := &s.leaving
	l.mu.Lock()
	defer l.mu.Unlock()
	for name := range l.pms {
		if _, ok := next.pms[name]; ok {
			delete(l.pms, name)
		}
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
// left and waits for RetireLeft; nil if not.
func (s *Service) leftCatalog(name string) *Snapshot {
	s.leaving.mu.RLock()
	defer s.leaving.mu.RUnlock()
	return s.leaving.pms[name]
}
