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
// catalog, whose scopes wait for RetireLeft.
type leavingScopes struct {
	pms, groups map[string]struct{}
}

// retirePlatformModelLocked retires the scopes of platform model name,
// which left the catalog (its own and its acceptance copy's), or leaves
// them to RetireLeft. The caller holds applyMu.
func (s *Service) retirePlatformModelLocked(ctx context.Context, name string) {
	if s.cfg.RetireLater {
		s.leaving.pms = addName(s.leaving.pms, name)
		return
	}
	s.removeScope(ctx, weir.PlatformModelScope(name))
	s.removeAcceptanceScopeLocked(ctx, name)
}

// retireGroupLocked retires the scope of group name, which left the
// catalog, or leaves it to RetireLeft. The caller holds applyMu.
func (s *Service) retireGroupLocked(ctx context.Context, name string) {
	if s.cfg.RetireLater {
		s.leaving.groups = addName(s.leaving.groups, name)
		return
	}
	s.removeScope(ctx, weir.GroupScope(name))
}

func addName(m map[string]struct{}, name string) map[string]struct{} {
	if m == nil {
		m = make(map[string]struct{})
	}
	m[name] = struct{}{}
	return m
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
	for name := range s.leaving.pms {
		if _, ok := st.pms[name]; !ok {
			s.removeScope(ctx, weir.PlatformModelScope(name))
			s.removeAcceptanceScopeLocked(ctx, name)
			n++
		}
	}
	for name := range s.leaving.groups {
		if _, ok := st.groups[name]; !ok {
			s.removeScope(ctx, weir.GroupScope(name))
			n++
		}
	}
	s.leaving = leavingScopes{}
	s.left.forget()
	return n
}

// leftCatalogs are, by platform model, the last catalog that had each
// platform model in leaving: Target reads them without applyMu.
type leftCatalogs struct {
	mu sync.RWMutex
	by map[string]*Snapshot
}

// keepLeftLocked keeps, with Config.RetireLater, the catalog prev for
// each of its platform models next has not, before next is served, so
// that Target finds them all along; those next has again go. The caller
// holds applyMu.
func (s *Service) keepLeftLocked(prev, next *Snapshot) {
	if !s.cfg.RetireLater || prev == nil {
		return
	}
	l := &s.left
	l.mu.Lock()
	defer l.mu.Unlock()
	for name := range l.by {
		if _, ok := next.pms[name]; ok {
			delete(l.by, name)
		}
	}
	for name := range prev.pms {
		if _, ok := next.pms[name]; !ok {
			if l.by == nil {
				l.by = make(map[string]*Snapshot)
			}
			l.by[name] = prev
		}
	}
}

// catalog is the last catalog that had platform model name, if it left
// and waits for RetireLeft; nil if not.
func (l *leftCatalogs) catalog(name string) *Snapshot {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.by[name]
}

func (l *leftCatalogs) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.by = nil
}
