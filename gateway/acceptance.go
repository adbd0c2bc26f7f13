package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// The acceptance run mode (weir.RunAcceptance): a request names its run
// (Call.RunID) and needs, in place of each production scope, the run's
// copy of it (weir.AcceptanceScope). A copy takes the production scope's
// limits, concurrency, rates and fairness alike, with the run's own queue
// bound and longest wait; the run's requests queue, take turns and spend
// rates there alone. So an acceptance run saturating its copies leaves
// production's queues as they were, and production's load does not
// starve the run. The upstream is real and shared: a copy's limit is
// production's again, on top of production's use, and an operator who
// must keep the sum under a provider's cap lowers the platform model's
// limit while the run lasts. Edge nodes are left out: their slots are
// physical.
//
// Copies are made when a run first needs them, follow each reload, and
// are retired once their run has had no request for runIdle; at most
// maxRuns runs live at once.

const (
	// runIdle is how long after its last request a run's scopes live: its
	// waits are over by then.
	runIdle = weir.AcceptanceMaxWait + time.Minute
	// maxRuns bounds the acceptance runs alive at once, and so the scopes
	// they make.
	maxRuns = 100
)

// acceptancePrefix marks an acceptance request's platform model in its
// usage, with its run: "acceptance:<run>:<platform model>".
const acceptancePrefix = "acceptance:"

// runs are the acceptance runs alive, with the scope copies each made.
type runs struct {
	mu   sync.Mutex
	byID map[string]*run
	// scopesMu orders the engine calls that make and retire runs'
	// scopes, so that a run retired as it comes back is not left with
	// its new scopes removed by the retirement.
	scopesMu sync.Mutex
}

type run struct {
	// scopes are the production scopes the run has copies of.
	scopes map[string]bool
	last   time.Time
}

// acceptanceConfig is the run's copy of production's cfg.
func acceptanceConfig(cfg admission.ScopeConfig) admission.ScopeConfig {
	cfg.QueueLimit = weir.AcceptanceQueueLimit
	cfg.MaxWait = weir.AcceptanceMaxWait
	// Production's pause (an upstream's Retry-After) is checked at
	// admission (allPausedPast); the copy holds no state of its own.
	cfg.Paused = false
	return cfg
}

// enterRun makes sure run id has its copies of the scopes that the
// candidates of key keyID, of group, on the platform models pms need: the
// tenant's (tenantNeeds) and each platform model's.
func (s *Service) enterRun(ctx context.Context, id, keyID, group string, pms []string) error {
	tenant := tenantNeeds(keyID, group)
	names := make([]string, 0, len(tenant)+len(pms))
	for _, n := range tenant {
		names = append(names, n.Scope)
	}
	for _, pm := range pms {
		names = append(names, weir.PlatformModelScope(pm))
	}
	return s.ensureRun(ctx, id, names)
}

// inRun points needs at the run's copies of their scopes.
func inRun(run string, needs []admission.Need) {
	for j := range needs {
		needs[j].Scope = weir.AcceptanceScope(run, needs[j].Scope)
	}
}

// ensureRun makes sure run has copies of the production scopes, and
// retires runs that have been idle past runIdle.
func (s *Service) ensureRun(ctx context.Context, id string, scopes []string) error {
	now := s.deps.Clock.Now()
	s.runs.mu.Lock()
	if r := s.runs.byID[id]; r != nil && hasAll(r.scopes, scopes) && len(s.idleRunsLocked(id, now)) == 0 {
		// The common case: nothing to make, nothing to retire.
		r.last = now
		s.runs.mu.Unlock()
		return nil
	}
	s.runs.mu.Unlock()
	s.runs.scopesMu.Lock()
	defer s.runs.scopesMu.Unlock()
	s.runs.mu.Lock()
	if s.runs.byID == nil {
		s.runs.byID = make(map[string]*run)
	}
	var retire []string
	for _, rid := range s.idleRunsLocked(id, now) {
		for sc := range s.runs.byID[rid].scopes {
			retire = append(retire, weir.AcceptanceScope(rid, sc))
		}
		delete(s.runs.byID, rid)
	}
	r := s.runs.byID[id]
	if r == nil {
		if len(s.runs.byID) >= maxRuns {
			s.runs.mu.Unlock()
			s.retireScopes(ctx, retire)
			return &Error{Category: ErrRateLimited, RetryAfter: time.Minute,
				Message: fmt.Sprintf("the gateway holds %d acceptance runs, its most; a run ends %s after its last request", maxRuns, runIdle)}
		}
		r = &run{scopes: make(map[string]bool)}
		s.runs.byID[id] = r
	}
	r.last = now
	var missing []string
	for _, sc := range scopes {
		if !r.scopes[sc] {
			missing = append(missing, sc)
		}
	}
	s.runs.mu.Unlock()
	s.retireScopes(ctx, retire)
	for _, sc := range missing {
		st, err := s.deps.Engine.Scope(ctx, sc)
		if err != nil {
			return fmt.Errorf("acceptance run %s: production scope %s: %w", id, sc, err)
		}
		if err := s.deps.Engine.SetScope(ctx, weir.AcceptanceScope(id, sc), acceptanceConfig(st.Config)); err != nil {
			return fmt.Errorf("acceptance run %s: scope %s: %w", id, sc, err)
		}
		s.runs.mu.Lock()
		if r := s.runs.byID[id]; r != nil {
			r.scopes[sc] = true
		}
		s.runs.mu.Unlock()
	}
	return nil
}

// reconfigureRuns gives every live run's copies the limits production's
// scopes have now (after a reload); a copy whose production scope left
// the catalog is retired with it.
func (s *Service) reconfigureRuns(ctx context.Context) {
	s.runs.scopesMu.Lock()
	defer s.runs.scopesMu.Unlock()
	s.runs.mu.Lock()
	type copyOf struct{ run, scope string }
	var copies []copyOf
	for rid, r := range s.runs.byID {
		for sc := range r.scopes {
			copies = append(copies, copyOf{rid, sc})
		}
	}
	s.runs.mu.Unlock()
	for _, c := range copies {
		name := weir.AcceptanceScope(c.run, c.scope)
		st, err := s.deps.Engine.Scope(ctx, c.scope)
		if err != nil {
			s.runs.mu.Lock()
			if r := s.runs.byID[c.run]; r != nil {
				delete(r.scopes, c.scope)
			}
			s.runs.mu.Unlock()
			s.removeScope(ctx, name)
			continue
		}
		if err := s.deps.Engine.SetScope(ctx, name, acceptanceConfig(st.Config)); err != nil {
			s.deps.Logger.Warn("an acceptance run's scope keeps its old limits", "scope", name, "error", err)
		}
	}
}

// hasAll reports whether have holds every one of want.
func hasAll(have map[string]bool, want []string) bool {
	for _, sc := range want {
		if !have[sc] {
			return false
		}
	}
	return true
}

// idleRunsLocked are the runs other than id idle past runIdle.
func (s *Service) idleRunsLocked(id string, now time.Time) []string {
	var idle []string
	for rid, r := range s.runs.byID {
		if rid != id && now.Sub(r.last) > runIdle {
			idle = append(idle, rid)
		}
	}
	return idle
}

func (s *Service) retireScopes(ctx context.Context, names []string) {
	for _, name := range names {
		s.removeScope(ctx, name)
	}
}
