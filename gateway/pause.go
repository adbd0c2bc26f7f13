package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// An upstream that answers 429 with a Retry-After says when it will take
// requests again; an overload (a 529), or either reported in a stream
// once its answer has begun, says it for provider.OverloadPause unless it
// names a time. Until then its platform model's scope is paused: what
// runs there runs on, nothing more is admitted, and the requests waiting
// for it wait or are admitted on their other candidates, instead of being
// sent to fail. A later 429 with a later Retry-After extends the pause;
// the pause ends by itself. A request whose candidates are all paused past
// its own deadline is answered 429 rate_limited with the Retry-After.
//
// The pause is kept in the store with the other overrides (operator.go):
// every replica of a fleet holds it — they learn of it when they next read
// the overrides — and so none undoes it by setting the scope again (a
// reload, a drain lifted). Each replica that holds it ends it by its own
// timer; one that cannot reach the store holds it here only.

// maxPause bounds a pause, whatever an upstream asks for: a broken or
// hostile Retry-After cannot take a platform model away for long.
const maxPause = 5 * time.Minute

// pause is one platform model's pause.
type pause struct {
	until time.Time
	timer clock.Timer
}

// pauseUpstream pauses platform model pm for d from now (bounded by
// maxPause), or extends its pause to then, for every replica.
func (s *Service) pauseUpstream(log *slog.Logger, pm string, d time.Duration) {
	d = min(d, maxPause)
	if d <= 0 {
		return
	}
	now := s.deps.Clock.Now()
	until := stored(now.Add(d))
	if !s.holdPause(pm, until) {
		return
	}
	s.deps.Metrics.UpstreamPaused(pm, true) // the replica that met the 429 counts it
	log.Warn("upstream takes no more calls for a while (a 429 with Retry-After, or an overload): its admissions pause", "platform_model", pm, "for", d)
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	err := s.deps.Overrides.OverrideSet(ctx, weir.Override{Scope: weir.PlatformModelScope(pm), Kind: weir.OverridePause, Until: until, SetAt: now})
	cancel()
	if err != nil {
		s.deps.Metrics.DroppedError("pause")
		log.Warn("could not keep an upstream's pause in the store: it holds on this replica only", "platform_model", pm, "error", err)
	}
	s.setPMScope(pm)
}

// holdPause makes pm paused here until until, or extends its pause to
// then; it reports whether it did (false: it is paused as long already).
// It does not set the scope, nor count the pause.
func (s *Service) holdPause(pm string, until time.Time) bool {
	d := until.Sub(s.deps.Clock.Now())
	if d <= 0 {
		return false
	}
	s.pauseMu.Lock()
	p := s.pauses[pm]
	if p != nil && !until.After(p.until) {
		s.pauseMu.Unlock()
		return false
	}
	if p == nil {
		p = &pause{}
		s.pauses[pm] = p
	} else {
		p.timer.Stop()
	}
	p.until = until
	p.timer = s.deps.Clock.AfterFunc(d, func() { s.resume(pm, until) })
	s.pauseMu.Unlock()
	return true
}

// PauseUpstream implements task.Pauser: a task's submit that its platform
// refused with a Retry-After pauses the platform model as a request's
// does.
func (s *Service) PauseUpstream(pm string, d time.Duration) {
	s.pauseUpstream(s.deps.Logger, pm, d)
}

// resume ends pm's pause that was to end at until (a pause extended
// since has a timer of its own), here and in the store; a pause another
// replica extended meanwhile is read back as the scope is set.
func (s *Service) resume(pm string, until time.Time) {
	s.pauseMu.Lock()
	if p := s.pauses[pm]; p == nil || !p.until.Equal(until) {
		s.pauseMu.Unlock()
		return
	}
	delete(s.pauses, pm)
	s.pauseMu.Unlock()
	s.deps.Metrics.UpstreamPaused(pm, false)
	s.deps.Logger.Info("upstream pause over: admissions resume", "platform_model", pm)
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	_, err := s.deps.Overrides.OverrideDelete(ctx, &weir.OverrideDeleteParams{Kind: weir.OverridePause, Scope: weir.PlatformModelScope(pm), EndedBy: until})
	cancel()
	if err != nil {
		s.deps.Metrics.DroppedError("pause")
		s.deps.Logger.Warn("could not clear an ended pause from the store", "platform_model", pm, "error", err)
	}
	s.setPMScope(pm)
}

// pmScopeConfig is pm's scope configuration, paused while it is.
func (s *Service) pmScopeConfig(pm weir.PlatformModel) admission.ScopeConfig {
	cfg := platformModelScopeConfig(pm)
	s.pauseMu.Lock()
	_, cfg.Paused = s.pauses[pm.Name]
	s.pauseMu.Unlock()
	s.ops.applyTo(weir.PlatformModelScope(pm.Name), pm.Name, &cfg)
	return cfg
}

// pausedUntil is when pm's pause ends; false if it is not paused.
func (s *Service) pausedUntil(pm string) (time.Time, bool) {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	p, ok := s.pauses[pm]
	if !ok {
		return time.Time{}, false
	}
	return p.until, true
}

// Paused lists the platform models paused now, with when each resumes.
func (s *Service) Paused() map[string]time.Time {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	out := make(map[string]time.Time, len(s.pauses))
	for pm, p := range s.pauses {
		out[pm] = p.until
	}
	return out
}

// allPausedPast reports, for targets ts, whether every one is a platform
// model paused past deadline, and when the first of them resumes.
func (s *Service) allPausedPast(ts []target, deadline time.Time) (time.Time, bool) {
	if deadline.IsZero() || len(ts) == 0 {
		return time.Time{}, false
	}
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if len(s.pauses) == 0 {
		return time.Time{}, false // the usual: nothing paused
	}
	var first time.Time
	for _, t := range ts {
		if t.node != nil {
			return time.Time{}, false
		}
		p, ok := s.pauses[t.pm]
		if !ok || !p.until.After(deadline) {
			return time.Time{}, false
		}
		until := p.until
		if first.IsZero() || until.Before(first) {
			first = until
		}
	}
	return first, true
}
