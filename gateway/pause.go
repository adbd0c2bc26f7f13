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
// requests again. Until then its platform model's scope is paused: what
// runs there runs on, nothing more is admitted, and the requests waiting
// for it wait or are admitted on their other candidates, instead of being
// sent to fail. A later 429 with a later Retry-After extends the pause;
// the pause ends by itself. A request whose candidates are all paused past
// its own deadline is answered 429 rate_limited with the Retry-After.

// maxPause bounds a pause, whatever an upstream asks for: a broken or
// hostile Retry-After cannot take a platform model away for long.
const maxPause = 5 * time.Minute

// pause is one platform model's pause.
type pause struct {
	until time.Time
	timer clock.Timer
}

// pauseUpstream pauses platform model pm for d from now (bounded by
// maxPause), or extends its pause to then.
func (s *Service) pauseUpstream(log *slog.Logger, pm string, d time.Duration) {
	d = min(d, maxPause)
	if d <= 0 {
		return
	}
	until := s.deps.Clock.Now().Add(d)
	s.pauseMu.Lock()
	p := s.pauses[pm]
	if p != nil && !until.After(p.until) {
		s.pauseMu.Unlock()
		return
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
	s.deps.Metrics.UpstreamPaused(pm, true)
	log.Warn("upstream answered 429 with Retry-After: its admissions pause", "platform_model", pm, "for", d)
	s.setPMScope(pm)
}

// PauseUpstream implements task.Pauser: a task's submit that its platform
// refused with a Retry-After pauses the platform model as a request's
// does.
func (s *Service) PauseUpstream(pm string, d time.Duration) {
	s.pauseUpstream(s.deps.Logger, pm, d)
}

// resume ends pm's pause that was to end at until (a pause extended
// since has a timer of its own).
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
	s.setPMScope(pm)
}

// setPMScope sets pm's scope, and its acceptance copy, from the catalog
// and its pause now, in turn with Apply; a platform model gone from the
// catalog is left alone.
func (s *Service) setPMScope(name string) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	st := s.state.Load()
	if st == nil {
		return
	}
	pm, ok := st.pms[name]
	if !ok {
		return
	}
	if err := s.deps.Engine.SetScope(context.Background(), weir.PlatformModelScope(name), s.pmScopeConfig(pm)); err != nil {
		s.deps.Metrics.DroppedError("pause")
		s.deps.Logger.Warn("could not pause or resume a platform model's admissions", "platform_model", name, "error", err)
	}
	// The acceptance copy calls the same upstream: it pauses and drains
	// with production.
	if err := s.setAcceptanceScopeLocked(context.Background(), pm); err != nil {
		s.deps.Metrics.DroppedError("pause")
		s.deps.Logger.Warn("could not pause or resume a platform model's acceptance admissions", "platform_model", name, "error", err)
	}
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
