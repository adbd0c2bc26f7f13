package edge

import (
	"context"
	"fmt"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge/edgepb"
)

// A provider's health is the node's word for it, one observation at a
// time (Evidence): from a run that stalled, or from a probe the gateway
// asked for. Evidence counts only when it binds to one provider of the
// node's current session (generation, provider, adapter and target as
// registered; a probe's also the probe the gateway sent) and its seq is
// newer than any applied for that provider. Only "unavailable" lowers a
// provider's health; a stall's other observations never recover it, a
// probe's newer "available" does. Health dies with its session: a new
// session starts healthy.
//
// An unavailable provider is left out of Serving, so no request resolves
// to it, and the gateway probes it every Config.ProbeInterval until it
// recovers. Every decision is counted (Metrics.Evidence) and logged.

// The decisions on one piece of evidence, as metric labels.
const (
	decisionApplied   = "applied"
	decisionStale     = "rejected_stale"
	decisionBinding   = "rejected_binding"
	decisionAmbiguous = "rejected_ambiguous"
	decisionInvalid   = "rejected_invalid"
)

// The evidence's sources, as metric labels.
const (
	sourceStall = "stall"
	sourceProbe = "probe"
)

// providerHealth is what the session knows of one provider's health.
type providerHealth struct {
	seq         uint64 // the newest observation applied
	unavailable bool
	probing     bool // a probe loop runs for it
}

// consistent reports whether ev's classification says what its health
// does.
func consistent(ev *edgepb.Evidence) bool {
	switch ev.Health {
	case edgepb.Health_HEALTH_UNAVAILABLE:
		return ev.Classification == "provider_unhealthy"
	case edgepb.Health_HEALTH_AVAILABLE:
		return ev.Classification == "request_stalled"
	case edgepb.Health_HEALTH_UNKNOWN:
		return ev.Classification == "health_unknown"
	}
	return false
}

// evidence takes one observation of s's node: from a stalled run of
// provider runProvider (source stall), or answering a probe (source
// probe). It returns the decision.
func (h *Hub) evidence(s *session, ev *edgepb.Evidence, source, runProvider string) string {
	decision, changed, health := h.judge(s, ev, source, runProvider)
	if h.deps.Metrics != nil {
		h.deps.Metrics.Evidence(source, decision)
	}
	log := h.deps.Logger.Info
	if decision != decisionApplied {
		log = h.deps.Logger.Warn
	}
	log("edge: provider health evidence", "node", s.node.id, "generation", s.gen, "provider", ev.Provider,
		"source", source, "seq", ev.Seq, "health", ev.Health.String(), "classification", ev.Classification,
		"decision", decision, "changed", changed, "unavailable", health)
	if changed {
		// Its slots admit nothing while it is unavailable, and the waiters
		// re-resolve: Serving now leaves the provider out, or has it back.
		h.mu.Lock()
		p := s.node.providers[ev.Provider]
		current := s.node.sess == s
		h.mu.Unlock()
		if p != nil && current {
			h.repause(s, p)
		}
		if err := h.deps.Engine.Activate(context.Background(), weir.NodeOwner(s.node.id), s.gen); err != nil {
			h.deps.Logger.Warn("edge: could not re-resolve the waiters of a provider whose health changed", "node", s.node.id, "error", err)
		}
		if health {
			h.probe(s, ev.Provider)
		}
	}
	return decision
}

// judge decides on ev under the Hub's lock: the decision, whether the
// provider's health changed, and whether it is unavailable now.
func (h *Hub) judge(s *session, ev *edgepb.Evidence, source, runProvider string) (string, bool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.Generation != s.gen || ev.Seq == 0 || !consistent(ev) {
		return decisionInvalid, false, false
	}
	if s.node == nil || s.node.sess != s {
		return decisionBinding, false, false
	}
	providers := s.node.providers
	switch source {
	case sourceStall:
		p := providers[ev.Provider]
		if p == nil || ev.Provider != runProvider || p.Adapter != ev.Adapter || p.Target != ev.Target {
			return decisionBinding, false, false
		}
	case sourceProbe:
		want, asked := s.probes[ev.ProbeId]
		if !asked || want != ev.Provider {
			return decisionBinding, false, false
		}
		var matches []string
		for id, p := range providers {
			if p.Adapter == ev.Adapter && p.Target == ev.Target {
				matches = append(matches, id)
			}
		}
		switch {
		case len(matches) > 1:
			return decisionAmbiguous, false, false
		case len(matches) == 0 || matches[0] != ev.Provider:
			return decisionBinding, false, false
		}
		delete(s.probes, ev.ProbeId)
	default:
		return decisionInvalid, false, false
	}
	if s.health == nil {
		s.health = make(map[string]*providerHealth)
	}
	ph := s.health[ev.Provider]
	if ph == nil {
		ph = &providerHealth{}
		s.health[ev.Provider] = ph
	}
	if ev.Seq <= ph.seq {
		return decisionStale, false, ph.unavailable
	}
	ph.seq = ev.Seq
	was := ph.unavailable
	switch {
	case ev.Health == edgepb.Health_HEALTH_UNAVAILABLE:
		ph.unavailable = true
	case ev.Health == edgepb.Health_HEALTH_AVAILABLE && source == sourceProbe:
		ph.unavailable = false
	}
	return decisionApplied, was != ph.unavailable, ph.unavailable
}

// unavailableLocked reports whether s's provider is unavailable.
func (s *session) unavailableLocked(provider string) bool {
	ph := s.health[provider]
	return ph != nil && ph.unavailable
}

// probe asks s's node, every ProbeInterval while the provider stays
// unavailable and the session lives, for fresh evidence of it.
func (h *Hub) probe(s *session, provider string) {
	h.mu.Lock()
	ph := s.health[provider]
	if ph == nil || ph.probing || !ph.unavailable || s.node.sess != s {
		h.mu.Unlock()
		return
	}
	ph.probing = true
	h.mu.Unlock()
	var tick func()
	tick = func() {
		h.mu.Lock()
		live := s.node.sess == s && ph.unavailable
		if !live {
			ph.probing = false
			h.mu.Unlock()
			return
		}
		h.probeSeq++
		id := fmt.Sprintf("probe_%d", h.probeSeq)
		if s.probes == nil {
			s.probes = make(map[string]string)
		}
		if len(s.probes) >= maxProbes {
			clear(s.probes) // answers this late are stale anyway
		}
		s.probes[id] = provider
		h.mu.Unlock()
		s.queue(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Probe{Probe: &edgepb.Probe{ProbeId: id, Provider: provider}}})
		h.cfg.Clock.AfterFunc(h.cfg.ProbeInterval, tick)
	}
	tick()
}

// maxProbes bounds the probes a session has outstanding.
const maxProbes = 64
