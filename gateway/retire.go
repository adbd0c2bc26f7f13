package gateway

import (
	"context"

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
// replica takes the catalog, at its place, as in one process.

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
	return n
}
