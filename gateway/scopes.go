package gateway

import (
	"context"
	"time"

	"github.com/weir-gateway/weir"
)

// ScopeView is one scope's state, as the admin API shows it.
type ScopeView struct {
	Name     string `json:"name"`
	Limit    int64  `json:"limit"`
	InFlight int64  `json:"in_flight"`
	Leases   int    `json:"leases"`
	Waiting  int    `json:"waiting"`
	Held     int64  `json:"held,omitempty"`
	Orphaned bool   `json:"orphaned,omitempty"`
	// Paused: the scope admits nothing for now; PausedUntil, when its
	// upstream's Retry-After ends the pause (RFC 3339).
	Paused bool `json:"paused,omitempty"`
	// Drained: an operator paused it (Service.Drain), until lifted.
	Drained bool `json:"drained,omitempty"`
	// LimitSet: an operator set Limit at run time; the next reload or
	// restart of any replica applies the config's again.
	LimitSet    bool    `json:"limit_set,omitempty"`
	PausedUntil string  `json:"paused_until,omitempty"`
	RPM         int64   `json:"rpm,omitempty"`
	RPMLeft     float64 `json:"rpm_left,omitempty"`
	TPM         int64   `json:"tpm,omitempty"`
	TPMLeft     float64 `json:"tpm_left,omitempty"`
	MeanHold    string  `json:"mean_hold,omitempty"`
	// Shadow: the scope's limits are judged but not enforced
	// (weir.Limits.Shadow).
	Shadow bool `json:"shadow,omitempty"`
	// Would is what its limits would have done while in shadow: set for
	// a shadow scope, and for one that has been.
	Would *ShadowView `json:"would,omitempty"`
}

// ShadowView is what a scope's limits would have done while in shadow
// (admission.ScopeStats' Shadow counters).
type ShadowView struct {
	// Waits: admissions they would have made wait, for capacity or a
	// rate limit.
	Waits int64 `json:"waits"`
	// Refusals: admissions they would have refused (a full queue, more
	// tokens than the tpm).
	Refusals int64 `json:"refusals"`
	// Timeouts: would-be waits their max_wait would have ended.
	Timeouts int64 `json:"timeouts"`
	// Queued: the requests running now that would still be waiting.
	Queued int `json:"queued"`
}

// Scopes is every scope's state now. The overrides it reports (drained,
// limit_set, paused_until) are read from the store first, so that every
// replica reports the same.
func (s *Service) Scopes(ctx context.Context) []ScopeView {
	s.applyMu.Lock()
	s.syncOverridesLocked(ctx)
	s.applyMu.Unlock()
	var out []ScopeView
	until := make(map[string]time.Time)
	for pm, t := range s.Paused() {
		until[weir.PlatformModelScope(pm)] = t
	}
	for _, st := range s.deps.Engine.Scopes(ctx) {
		v := ScopeView{
			Name: st.Name, Limit: st.Config.Limit, InFlight: st.Used, Leases: st.Leases, Waiting: st.Queued,
			Held: st.Held, Orphaned: st.Orphaned, RPM: st.Config.RPM, RPMLeft: st.RPMAvailable,
			TPM: st.Config.TPM, TPMLeft: st.TPMAvailable,
		}
		if pm, ok := weir.PlatformModelOfScope(st.Name); ok {
			v.Drained = s.ops.drainedNow(pm)
		}
		v.LimitSet = s.ops.limitSet(st.Name)
		if st.Config.Paused {
			v.Paused = true
			if t, ok := until[st.Name]; ok {
				v.PausedUntil = t.UTC().Format(time.RFC3339Nano)
			}
		}
		if st.MeanHold > 0 {
			v.MeanHold = st.MeanHold.Round(time.Millisecond).String()
		}
		v.Shadow = st.Config.Shadow
		if st.Config.Shadow || st.ShadowWaits > 0 || st.ShadowRefusals > 0 || st.ShadowTimeouts > 0 {
			v.Would = &ShadowView{Waits: st.ShadowWaits, Refusals: st.ShadowRefusals, Timeouts: st.ShadowTimeouts, Queued: st.ShadowQueued}
		}
		out = append(out, v)
	}
	return out
}

// Requests counts requests, each once, where a scope's Waiting and
// InFlight count one under every scope it needs or may be admitted by.
type Requests struct {
	// Waiting: requests (and tasks) waiting for admission.
	Waiting int `json:"waiting"`
	// InFlight: the leases held for them.
	InFlight int `json:"in_flight"`
}

// CountRequests counts the requests behind scopes once each: from the key
// scopes alone, since each of a request's candidates needs its key's
// scope and no other key's (weir.KeyOfScope). Scopes must be all of them,
// not a trimmed list.
func CountRequests(scopes []ScopeView) Requests {
	var n Requests
	for _, s := range scopes {
		if _, ok := weir.KeyOfScope(s.Name); ok {
			n.Waiting += s.Waiting
			n.InFlight += s.Leases
		}
	}
	return n
}
