package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// What is set at run time beside the catalog, and how long each lasts:
//
//   - A drained platform model admits nothing: what runs there runs on,
//     its waiters wait or are admitted on their other candidates. A drain
//     lasts until it is lifted, through reloads and restarts of any
//     replica. It is held by the platform model's name: while the name is
//     out of the catalog it waits, and holds again if the name comes back
//     (it can be lifted meanwhile).
//   - A scope's limit set at run time holds until an operator next
//     applies a catalog: the config file stays the one truth, and a
//     replica that applies it (SIGHUP; on SQLite, a start too) forgets
//     every run-time limit, the fleet's with its own, as does a new
//     catalog version published to a fleet (weir apply). A fleet replica
//     that starts on the fleet's version, or takes one another published
//     (Take), keeps them. Lowering a limit revokes nothing, as a reload's
//     does not.
//   - An upstream's pause (pause.go) ends by itself; a reload keeps it.
//
// All three are overrides kept in the store (Deps.Overrides), so that
// every replica of a fleet applies and reports the same ones whichever
// replica set them. A replica reads them whenever it applies a catalog,
// after each change it makes, whenever it reports them (Scopes), and every
// Config.OverridePoll once started (Start). It sets again every scope
// whose override it finds changed, so that what it configures itself — a
// key's scope on first use there, a platform model's on a pause, what it
// gives a new fleet leader — agrees with the rest within OverridePoll. In
// a fleet the engine is shared: a drain, a limit or a pause set through
// one replica holds for every replica at once.

// operatorState is this replica's view of the stored drains and run-time
// limits, as last read; its lock is taken after applyMu, never before.
type operatorState struct {
	mu      sync.Mutex
	drained map[string]bool  // platform model names
	limits  map[string]int64 // scope names
	// failing: the last read failed (logged once until one succeeds).
	failing bool
}

// applyTo sets what the operator changed in cfg, the configuration of
// scope (the platform model pm's, or pm is "").
func (o *operatorState) applyTo(scope, pm string, cfg *admission.ScopeConfig) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if pm != "" && o.drained[pm] {
		cfg.Paused = true
	}
	if l, ok := o.limits[scope]; ok {
		cfg.Limit = l
	}
}

func (o *operatorState) drainedNow(pm string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.drained[pm]
}

func (o *operatorState) limitSet(scope string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.limits[scope]
	return ok
}

// storeTimeout bounds a write of an override made beside a request (an
// upstream's pause): the request does not wait long on a slow store.
const storeTimeout = 5 * time.Second

// readOverridesLocked reads the stored overrides, makes them this
// replica's view, holds here the stored pauses that end later than what
// it holds, and returns the scopes whose override changed: those to set
// again. The caller holds applyMu.
func (s *Service) readOverridesLocked(ctx context.Context) (map[string]bool, error) {
	stored, err := s.deps.Overrides.OverrideList(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: read the overrides (drains, run-time limits, pauses): %w", ErrUnavailable, err)
	}
	now := s.deps.Clock.Now()
	changed := make(map[string]bool)
	drained, limits := make(map[string]bool), make(map[string]int64)
	for _, o := range stored {
		pm, isPM := weir.PlatformModelOfScope(o.Scope)
		switch {
		case o.Kind == weir.OverrideDrain && isPM:
			drained[pm] = true
		case o.Kind == weir.OverrideLimit:
			limits[o.Scope] = o.Limit
		case o.Kind == weir.OverridePause && isPM && o.Until.After(now):
			if s.holdPause(pm, o.Until) {
				s.deps.Logger.Info("upstream paused by another replica's 429: its admissions pause here too", "platform_model", pm, "until", o.Until)
				changed[o.Scope] = true
			}
		}
	}
	s.ops.mu.Lock()
	for pm := range drained {
		if !s.ops.drained[pm] {
			changed[weir.PlatformModelScope(pm)] = true
		}
	}
	for pm := range s.ops.drained {
		if !drained[pm] {
			changed[weir.PlatformModelScope(pm)] = true
		}
	}
	for scope, l := range limits {
		if was, ok := s.ops.limits[scope]; !ok || was != l {
			changed[scope] = true
		}
	}
	for scope := range s.ops.limits {
		if _, ok := limits[scope]; !ok {
			changed[scope] = true
		}
	}
	s.ops.drained, s.ops.limits = drained, limits
	if s.ops.failing {
		s.ops.failing = false
		s.deps.Logger.Info("overrides read again from the store")
	}
	s.ops.mu.Unlock()
	return changed, nil
}

// syncOverridesLocked reads the stored overrides and sets again each
// scope whose override changed, and the scopes also named. A store that
// cannot be read leaves the view as it was (logged once, counted); the
// scopes named are set from it. The caller holds applyMu.
func (s *Service) syncOverridesLocked(ctx context.Context, also ...string) {
	changed, err := s.readOverridesLocked(ctx)
	if err != nil {
		s.deps.Metrics.DroppedError("overrides")
		s.ops.mu.Lock()
		first := !s.ops.failing
		s.ops.failing = true
		s.ops.mu.Unlock()
		if first {
			s.deps.Logger.Warn("could not read the overrides from the store: this replica keeps its last view of drains, run-time limits and pauses", "error", err)
		}
		changed = make(map[string]bool)
	}
	for _, scope := range also {
		changed[scope] = true
	}
	s.reconfigureLocked(ctx, changed)
}

// reconfigureLocked sets scopes again from the catalog and the overrides:
// platform models' and groups' of the served catalog, and keys' that are
// configured (here or on another replica: the engine knows them). The
// caller holds applyMu.
func (s *Service) reconfigureLocked(ctx context.Context, scopes map[string]bool) {
	st := s.state.Load()
	if st == nil {
		return
	}
	for scope := range scopes {
		var cfg admission.ScopeConfig
		if pm, ok := weir.PlatformModelOfScope(scope); ok {
			p, ok := st.pms[pm]
			if !ok {
				continue
			}
			if _, isCopy := weir.AcceptanceOf(scope); !isCopy {
				if err := s.deps.Engine.SetScope(ctx, scope, s.pmScopeConfig(p)); err != nil {
					s.deps.Metrics.DroppedError("overrides")
					s.deps.Logger.Warn("could not set a scope to its overrides", "scope", scope, "error", err)
				}
			}
			// The acceptance copy calls the same upstream: it follows
			// its platform model's pause, drain and limit, and has its
			// own run-time limit.
			if err := s.setAcceptanceScopeLocked(ctx, p); err != nil {
				s.deps.Metrics.DroppedError("overrides")
				s.deps.Logger.Warn("could not set a scope to its overrides", "scope", weir.AcceptanceScope(weir.PlatformModelScope(pm)), "error", err)
			}
			continue
		} else if group, ok := strings.CutPrefix(scope, weir.GroupScope("")); ok {
			g, ok := st.groups[group]
			if !ok {
				continue
			}
			cfg = s.groupConfig(g)
		} else if id, ok := strings.CutPrefix(scope, weir.KeyScope("")); ok {
			now, err := s.deps.Engine.Scope(ctx, scope)
			if err != nil {
				continue // nobody has used the key: its first use sets it
			}
			k, found, err := s.keyByID(ctx, id)
			if err != nil || !found {
				// The key's own limits cannot be read: its scope as it
				// is, with the run-time limit if one is set.
				cfg = now.Config
				s.ops.applyTo(scope, "", &cfg)
			} else {
				cfg = s.keyConfig(k)
			}
		} else {
			continue
		}
		if err := s.deps.Engine.SetScope(ctx, scope, cfg); err != nil {
			s.deps.Metrics.DroppedError("overrides")
			s.deps.Logger.Warn("could not set a scope to its overrides", "scope", scope, "error", err)
		}
	}
}

// setPMScope sets pm's scope from the catalog and the overrides now
// (reading them first), in turn with Apply; a platform model gone from
// the catalog is left alone.
func (s *Service) setPMScope(pm string) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.syncOverridesLocked(context.Background(), weir.PlatformModelScope(pm))
}

// Drain stops (on) or restarts (off) admissions to platform model pm, by
// an operator's hand, for every replica: see "What is set at run time"
// above. A drain can be lifted while pm is out of the catalog.
func (s *Service) Drain(ctx context.Context, pm string, on bool) error {
	st := s.state.Load()
	if st == nil {
		return &Error{Category: ErrNotFound, Message: "no catalog is applied"}
	}
	scope := weir.PlatformModelScope(pm)
	_, known := st.pms[pm]
	notFound := &Error{Category: ErrNotFound, Param: "platform_model", Message: fmt.Sprintf("no platform model %q in the catalog", pm)}
	if on && !known {
		return notFound
	}
	var err error
	if on {
		err = s.deps.Overrides.OverrideSet(ctx, weir.Override{Scope: scope, Kind: weir.OverrideDrain, SetAt: s.deps.Clock.Now()})
	} else {
		var n int
		n, err = s.deps.Overrides.OverrideDelete(ctx, &weir.OverrideDeleteParams{Kind: weir.OverrideDrain, Scope: scope})
		if err == nil && n == 0 && !known {
			return notFound
		}
	}
	if err != nil {
		return &Error{Category: ErrUnavailable, Message: "the store could not record it: nothing changed", Err: err}
	}
	s.deps.Logger.Warn("platform model drained by an operator", "platform_model", pm, "drained", on)
	s.setPMScope(pm)
	return nil
}

// SetScopeLimit sets scope's concurrent limit to limit (0: unlimited)
// until the next reload or restart of any replica. Platform models',
// groups' and keys' scopes can be set, and a platform model's acceptance
// copy (which otherwise follows its platform model's); a node's slots
// are the node's to say, and the task workers' pool is tasks.workers.
func (s *Service) SetScopeLimit(ctx context.Context, scope string, limit int64) error {
	if limit < 0 {
		return &Error{Category: ErrInvalid, Param: "limit", Message: fmt.Sprintf("a limit must be 0 (unlimited) or more, not %d", limit)}
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	st := s.state.Load()
	if st == nil {
		return &Error{Category: ErrNotFound, Message: "no catalog is applied"}
	}
	pm, isPM := weir.PlatformModelOfScope(scope)
	_, isCopy := weir.AcceptanceOf(scope)
	group, isGroup := strings.CutPrefix(scope, weir.GroupScope(""))
	switch {
	case isPM:
		if _, ok := st.pms[pm]; !ok {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no platform model %q in the catalog", pm)}
		}
		if _, made := s.acceptCopies.Load(pm); isCopy && !made {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no scope %q: a platform model's acceptance copy exists once an acceptance run uses it", scope)}
		}
	case isGroup:
		if _, ok := st.groups[group]; !ok {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no group %q in the catalog", group)}
		}
	case strings.HasPrefix(scope, weir.KeyScope("")):
		_, err := s.deps.Engine.Scope(ctx, scope)
		if errors.Is(err, admission.ErrUnknownScope) {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no scope %q: a key's scope exists once the key is used", scope), Err: err}
		}
		if err != nil {
			return fmt.Errorf("scope %s: %w", scope, err)
		}
	default:
		return &Error{Category: ErrInvalid, Param: "scope", Message: fmt.Sprintf("the limit of %s cannot be set here: only platform models' (and their acceptance copies'), groups' and keys' scopes can (a node's slots are the node's to say; the task workers are tasks.workers)", scope)}
	}
	o := weir.Override{Scope: scope, Kind: weir.OverrideLimit, Limit: limit, SetAt: s.deps.Clock.Now()}
	if err := s.deps.Overrides.OverrideSet(ctx, o); err != nil {
		return &Error{Category: ErrUnavailable, Message: "the store could not record the limit: nothing changed", Err: err}
	}
	s.syncOverridesLocked(ctx, scope)
	s.deps.Logger.Warn("scope limit set by an operator until the next reload", "scope", scope, "limit", limit)
	return nil
}

// Start keeps this replica's view of the overrides fresh: it reads them
// every Config.OverridePoll until Stop. Each poll also retires the
// platform models that left the catalog held for their leases, once
// those have ended (retire.go).
func (s *Service) Start(ctx context.Context) error {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	if s.poll != nil || s.stopped {
		return nil
	}
	s.poll = s.deps.Clock.AfterFunc(s.cfg.OverridePoll, s.pollOverrides)
	return nil
}

// Stop ends Start's reads, waiting for one under way.
func (s *Service) Stop(context.Context) error {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	s.stopped = true
	if s.poll != nil {
		s.poll.Stop()
	}
	return nil
}

// pollOverrides is Start's read; it holds pollMu, so that Stop waits for
// it.
func (s *Service) pollOverrides() {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	if s.stopped {
		return
	}
	s.applyMu.Lock()
	s.syncOverridesLocked(context.Background())
	if err := s.reloadBudgetsLocked(context.Background()); err != nil {
		s.deps.Logger.Warn("could not read the budgets", "error", err)
	}
	if n := s.retireHeldLocked(context.Background()); n > 0 {
		s.deps.Logger.Info("retired the platform models the catalog left once their last leases ended", "retired", n)
	}
	s.applyMu.Unlock()
	s.poll = s.deps.Clock.AfterFunc(s.cfg.OverridePoll, s.pollOverrides)
}

// ScopeQueue is one scope's waiters in order (the first max) and leases.
// A fleet replica that does not decide admissions cannot show it.
func (s *Service) ScopeQueue(ctx context.Context, scope string, max int) (admission.QueueView, error) {
	in, ok := s.deps.Engine.(admission.Inspector)
	if !ok {
		return admission.QueueView{}, &Error{Category: ErrUnavailable, Message: "this replica's engine cannot list a queue: ask the fleet's leader"}
	}
	q, err := in.Queue(ctx, scope, max)
	if errors.Is(err, admission.ErrUnknownScope) {
		return q, &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no scope %q", scope), Err: err}
	}
	return q, err
}

// CancelWaiter takes a queued request out of its queue; its client gets
// an error saying an operator removed it. A task is cancelled through
// the task service instead, which records why.
func (s *Service) CancelWaiter(ctx context.Context, id string) error {
	err := s.deps.Engine.Cancel(ctx, id)
	if errors.Is(err, admission.ErrNotQueued) {
		return &Error{Category: ErrNotFound, Param: "id", Message: fmt.Sprintf("no waiter %q is queued (it may have been admitted or given up)", id), Err: err}
	}
	if err == nil {
		s.deps.Logger.Warn("waiter cancelled by an operator", "waiter", id)
	}
	return err
}
