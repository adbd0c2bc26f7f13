package gateway

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// The acceptance run mode (weir.RunAcceptance): a request names its run
// (Call.RunID) and goes to the real upstreams. What it counts against:
//
//   - Its tenant's scopes, the key's and the group's, exactly as a
//     production request does: their concurrency, rpm, tpm, queue and
//     wait are the tenant's whatever the run, and naming more run ids
//     buys nothing.
//   - In place of its platform model's scope, the acceptance copy of it
//     (weir.AcceptanceScope: "acceptance:pm:<name>"), one per platform
//     model and shared by every run. The copy has production's limits
//     (concurrency, rpm, tpm), pause and drain, with a queue of
//     weir.AcceptanceQueueLimit and a wait of up to
//     weir.AcceptanceMaxWait. So acceptance traffic neither starves
//     production at the platform model nor is starved by it, and the runs
//     together add at most one copy of its limits on top of production's:
//     the provider sees at most twice the platform model's limits, never
//     once more per run. An operator who must keep the sum under a
//     provider's cap halves the platform model's limits while runs last
//     (the copy follows them), sets the copy's own limit lower (an
//     operator's limit of "acceptance:pm:<name>", as any scope's), or
//     leaves acceptance out of the groups' run_modes.
//   - Within the copy, keys take turns, as in production's scope (both are
//     round-robin by the request's fairness key, its key), and a key's
//     requests, whatever their runs, go in arrival order. The engine has
//     one fairness key per request for all its round-robin scopes: the
//     run id there would also give each run a turn of its own in a
//     round-robin group, and more run ids would buy more turns.
//   - A task of a run also needs the task service's acceptance share of
//     the workers (task.AcceptanceWorkersScope), so runs never hold
//     every worker production's tasks need.
//
// Edge nodes are left out: their slots are physical.
//
// A run holds nothing in the engine. What is left of it is its usage
// label ("acceptance:<run>:<platform model>") and its place under the
// caps on runs alive: maxRunsPerKey for each key, maxRuns in all, so that
// a key cannot fill the usage with labels nor the gateway's memory with
// runs, and one key's runs leave every other key's alone. A run is alive
// from its first request to runIdle after its last one; a request that
// would start one more run than its key may have gets 429 with a
// Retry-After of when the earliest of its key's runs ends (at the
// gateway's cap, of all runs). Only a client's requests and task
// submissions enter a run: a task of the run queued again (a retry, a
// restart) is not refused by the caps.

const (
	// runIdle is how long after its last request a run stays alive: by
	// then the waits of its requests are over.
	runIdle = weir.AcceptanceMaxWait + time.Minute
	// maxRunsPerKey bounds a key's runs alive at once.
	maxRunsPerKey = 10
	// maxRuns bounds the runs alive at once in the gateway, whatever
	// their keys, for the memory they take.
	maxRuns = 10_000
)

// acceptancePrefix marks an acceptance request's platform model in its
// usage, with its run: "acceptance:<run>:<platform model>".
const acceptancePrefix = "acceptance:"

// runs are the acceptance runs alive.
type runs struct {
	mu sync.Mutex
	// byKey holds each key's runs alive, by run id: elements of order.
	byKey map[string]map[string]*list.Element
	// order holds every run alive (a *run), the least recently entered
	// first: the order in which they end.
	order list.List
}

type run struct {
	key, id string
	// last is when a request last entered the run.
	last time.Time
}

// ends is when r ends if no request enters it again.
func (r *run) ends() time.Time { return r.last.Add(runIdle) }

// EnterRun enters the acceptance run id of key keyID now: a client's
// request or task submission of the run. It fails with a 429
// rate_limited Error if that would start one run more than the key or
// the gateway may have alive (see "The acceptance run mode" above).
func (s *Service) EnterRun(keyID, id string) error {
	now := s.deps.Clock.Now()
	rs := &s.runs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.endLocked(now)
	if e := rs.byKey[keyID][id]; e != nil {
		e.Value.(*run).last = now
		rs.order.MoveToBack(e)
		return nil
	}
	if mine := rs.byKey[keyID]; len(mine) >= maxRunsPerKey {
		var first time.Time
		for _, e := range mine {
			if t := e.Value.(*run).ends(); first.IsZero() || t.Before(first) {
				first = t
			}
		}
		return &Error{Category: ErrRateLimited, RetryAfter: first.Sub(now),
			Message: fmt.Sprintf("this key has %d acceptance runs alive, its most; a run ends %s after its last request, the earliest of this key's in %s",
				maxRunsPerKey, runIdle, first.Sub(now).Round(time.Second))}
	}
	if rs.order.Len() >= maxRuns {
		first := rs.order.Front().Value.(*run).ends()
		return &Error{Category: ErrRateLimited, RetryAfter: first.Sub(now),
			Message: fmt.Sprintf("the gateway has %d acceptance runs alive, its most; the earliest ends in %s",
				maxRuns, first.Sub(now).Round(time.Second))}
	}
	if rs.byKey == nil {
		rs.byKey = make(map[string]map[string]*list.Element)
	}
	if rs.byKey[keyID] == nil {
		rs.byKey[keyID] = make(map[string]*list.Element, 1)
	}
	rs.byKey[keyID][id] = rs.order.PushBack(&run{key: keyID, id: id, last: now})
	return nil
}

// endLocked forgets the runs that have ended by now.
func (rs *runs) endLocked(now time.Time) {
	for e := rs.order.Front(); e != nil; e = rs.order.Front() {
		r := e.Value.(*run)
		if now.Before(r.ends()) {
			return
		}
		rs.order.Remove(e)
		delete(rs.byKey[r.key], r.id)
		if len(rs.byKey[r.key]) == 0 {
			delete(rs.byKey, r.key)
		}
	}
}

// pmScopeFor is the scope a request of mode needs of platform model pm:
// the platform model's own, or in the acceptance run mode its acceptance
// copy.
func pmScopeFor(mode weir.RunMode, pm string) string {
	if mode == weir.RunAcceptance {
		return weir.AcceptanceScope(weir.PlatformModelScope(pm))
	}
	return scopeNames.get(pmScopeKind, pm)
}

// ensureAcceptanceScopes makes sure each of the platform models pms has
// its acceptance copy: made when a run first needs it, it follows the
// platform model's configuration from then on (Apply, setPMScope,
// SetScopeLimit) and leaves the catalog with it. A platform model no
// longer in the catalog is passed over: admission finds its scope gone.
func (s *Service) ensureAcceptanceScopes(ctx context.Context, pms []string) error {
	missing := false
	for _, pm := range pms {
		if _, ok := s.acceptCopies.Load(pm); !ok {
			missing = true
			break
		}
	}
	if !missing {
		return nil
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.ensureAcceptanceScopesLocked(ctx, s.state.Load(), pms)
}

// ensureAcceptanceScopesLocked is ensureAcceptanceScopes, of catalog st,
// with applyMu held.
func (s *Service) ensureAcceptanceScopesLocked(ctx context.Context, st *Snapshot, pms []string) error {
	if st == nil {
		return nil
	}
	for _, name := range pms {
		pm, ok := st.pms[name]
		if _, made := s.acceptCopies.Load(name); made || !ok {
			continue
		}
		if err := s.deps.Engine.SetScope(ctx, weir.AcceptanceScope(weir.PlatformModelScope(name)), s.acceptanceScopeConfig(pm)); err != nil {
			return fmt.Errorf("the acceptance copy of platform model %s: %w", name, err)
		}
		s.acceptCopies.Store(name, struct{}{})
	}
	return nil
}

// acceptanceScopeConfig is the configuration of pm's acceptance copy:
// production's now (its limits, pause, drain and an operator's limit),
// an operator's limit of the copy itself, and the runs' queue and wait.
func (s *Service) acceptanceScopeConfig(pm weir.PlatformModel) admission.ScopeConfig {
	cfg := s.pmScopeConfig(pm)
	s.ops.applyTo(weir.AcceptanceScope(weir.PlatformModelScope(pm.Name)), "", &cfg)
	cfg.QueueLimit = weir.AcceptanceQueueLimit
	cfg.MaxWait = weir.AcceptanceMaxWait
	return cfg
}

// setAcceptanceScopeLocked sets pm's acceptance copy, if it has one, to
// its configuration now. The caller holds applyMu.
func (s *Service) setAcceptanceScopeLocked(ctx context.Context, pm weir.PlatformModel) error {
	if _, ok := s.acceptCopies.Load(pm.Name); !ok {
		return nil
	}
	return s.deps.Engine.SetScope(ctx, weir.AcceptanceScope(weir.PlatformModelScope(pm.Name)), s.acceptanceScopeConfig(pm))
}

// removeAcceptanceScopeLocked retires the acceptance copy of platform
// model name, which left the catalog. The caller holds applyMu.
func (s *Service) removeAcceptanceScopeLocked(ctx context.Context, name string) {
	if _, ok := s.acceptCopies.LoadAndDelete(name); ok {
		s.removeScope(ctx, weir.AcceptanceScope(weir.PlatformModelScope(name)))
	}
}
