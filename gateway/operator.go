package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// What an operator changes at run time (the console's actions), beside
// what the catalog says:
//
//   - A drained platform model admits nothing: what runs there runs on,
//     its waiters wait or are admitted on their other candidates. A drain
//     lasts until it is lifted, through reloads, and ends with the
//     process (it is not in the config).
//   - A scope's limit set at run time holds until the next reload or
//     restart, which apply the config's again: the config file stays the
//     one truth. Lowering it revokes nothing, as a reload's.

// operatorState holds the drains and the run-time limits; its lock is
// taken after applyMu, never before.
type operatorState struct {
	mu      sync.Mutex
	drained map[string]bool  // platform model names
	limits  map[string]int64 // scope names
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

// resetLimits forgets the run-time limits: a reload applies the config's.
func (o *operatorState) resetLimits() {
	o.mu.Lock()
	o.limits = nil
	o.mu.Unlock()
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

// Drain stops (on) or restarts (off) admissions to platform model pm, by
// an operator's hand: see "What an operator changes" above.
func (s *Service) Drain(ctx context.Context, pm string, on bool) error {
	st := s.state.Load()
	if st == nil {
		return &Error{Category: ErrNotFound, Message: "no catalog is applied"}
	}
	if _, ok := st.pms[pm]; !ok {
		return &Error{Category: ErrNotFound, Param: "platform_model", Message: fmt.Sprintf("no platform model %q in the catalog", pm)}
	}
	s.ops.mu.Lock()
	if on {
		if s.ops.drained == nil {
			s.ops.drained = make(map[string]bool)
		}
		s.ops.drained[pm] = true
	} else {
		delete(s.ops.drained, pm)
	}
	s.ops.mu.Unlock()
	s.deps.Logger.Warn("platform model drained by an operator", "platform_model", pm, "drained", on)
	s.setPMScope(pm)
	return nil
}

// SetScopeLimit sets scope's concurrent limit to limit (0: unlimited)
// until the next reload or restart. Platform models', groups' and keys'
// scopes can be set, and a platform model's acceptance copy (which
// otherwise follows its platform model's); a node's slots are the
// node's to say, and the task workers' pool is tasks.workers.
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
	var cfg admission.ScopeConfig
	pmName, isPM := weir.PlatformModelOfScope(scope)
	_, isCopy := weir.AcceptanceOf(scope)
	group, isGroup := strings.CutPrefix(scope, weir.GroupScope(""))
	var pm *weir.PlatformModel // the platform model of scope, or of the copy scope is
	switch {
	case isPM:
		p, ok := st.pms[pmName]
		if !ok {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no platform model %q in the catalog", pmName)}
		}
		if _, made := s.acceptCopies.Load(pmName); isCopy && !made {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no scope %q: a platform model's acceptance copy exists once an acceptance run uses it", scope)}
		}
		pm = &p
	case isGroup:
		g, ok := st.groups[group]
		if !ok {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no group %q in the catalog", group)}
		}
		cfg = groupScopeConfig(g)
	case strings.HasPrefix(scope, weir.KeyScope("")):
		now, err := s.deps.Engine.Scope(ctx, scope)
		if errors.Is(err, admission.ErrUnknownScope) {
			return &Error{Category: ErrNotFound, Param: "scope", Message: fmt.Sprintf("no scope %q: a key's scope exists once the key is used", scope), Err: err}
		}
		if err != nil {
			return fmt.Errorf("scope %s: %w", scope, err)
		}
		cfg = now.Config
	default:
		return &Error{Category: ErrInvalid, Param: "scope", Message: fmt.Sprintf("the limit of %s cannot be set here: only platform models' (and their acceptance copies'), groups' and keys' scopes can (a node's slots are the node's to say; the task workers are tasks.workers)", scope)}
	}
	s.ops.mu.Lock()
	if s.ops.limits == nil {
		s.ops.limits = make(map[string]int64)
	}
	s.ops.limits[scope] = limit
	s.ops.mu.Unlock()
	switch {
	case pm != nil && isCopy:
		cfg = s.acceptanceScopeConfig(*pm) // with the limit just set
	case pm != nil:
		cfg = s.pmScopeConfig(*pm)
	default:
		cfg.Limit = limit
	}
	if err := s.deps.Engine.SetScope(ctx, scope, cfg); err != nil {
		return fmt.Errorf("set the limit of %s: %w", scope, err)
	}
	if pm != nil && !isCopy {
		// The acceptance copy follows production's limit unless an
		// operator set its own.
		if err := s.setAcceptanceScopeLocked(ctx, *pm); err != nil {
			return fmt.Errorf("set the limit of %s's acceptance copy: %w", scope, err)
		}
	}
	s.deps.Logger.Warn("scope limit set by an operator until the next reload", "scope", scope, "limit", limit)
	return nil
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
