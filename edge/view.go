package edge

import (
	"context"
	"slices"
	"strings"

	"github.com/weir-gateway/weir"
)

// NodeView is one node as /admin/nodes shows it.
type NodeView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Connected: the node has a live session, of Generation, whose
	// providers are configured and take requests.
	Connected  bool   `json:"connected"`
	Generation uint64 `json:"generation"`
	// Draining: the node is shutting down; it is offered nothing more
	// and its session ends once its runs have.
	Draining bool `json:"draining,omitempty"`
	// LastSeenMs is how long ago the node last registered or heartbeat,
	// by the gateway's clock.
	LastSeenMs int64 `json:"last_seen_ms"`
	// ReadyStreams is how many Run streams the node keeps open ahead and
	// waiting for a run: a request offered on one crosses the network
	// once each way; with none waiting, its offer goes on the Control
	// stream and the node opens a Run stream for it.
	ReadyStreams int            `json:"ready_streams"`
	Providers    []ProviderView `json:"providers"`
	// Replica is, in a fleet, the replica the node dialed when it is not
	// this one; its view is that replica's, as it last published it
	// (AgeMs ago).
	Replica string `json:"replica,omitempty"`
	AgeMs   int64  `json:"age_ms,omitempty"`
}

// FleetViews is the fleet's nodes as one replica shows them: its own
// (local) and the other replicas' views of theirs (remote, each marked
// with its Replica and AgeMs). A node seen by two (it moved) is shown
// once: the view of its live session, else the one of its newest
// generation.
func FleetViews(local, remote []NodeView) []NodeView {
	out := slices.Clone(local)
	at := make(map[string]int, len(out))
	for i, v := range out {
		at[v.ID] = i
	}
	for _, v := range remote {
		i, seen := at[v.ID]
		switch {
		case !seen:
			at[v.ID] = len(out)
			out = append(out, v)
		case newerView(v, out[i]):
			out[i] = v
		}
	}
	slices.SortFunc(out, func(a, b NodeView) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// newerView reports whether a is the better view of a node than b: a
// live session over a gone one, then the newer generation.
func newerView(a, b NodeView) bool {
	if a.Connected != b.Connected {
		return a.Connected
	}
	return a.Generation > b.Generation
}

// ProviderView is one provider of a node, with its slots as the engine
// holds them.
type ProviderView struct {
	ID        string   `json:"id"`
	Adapter   string   `json:"adapter"`
	Target    string   `json:"target"`
	Models    []string `json:"models"`
	Slots     int64    `json:"slots"`
	Used      int64    `json:"used"`
	Queued    int      `json:"queued"`
	LongSlots int64    `json:"long_slots,omitempty"`
	LongUsed  int64    `json:"long_used,omitempty"`
	// Orphaned: the node's session ended; the slots admit nothing until
	// it is back.
	Orphaned bool `json:"orphaned"`
	// Paused: the slots admit nothing for now (the provider is
	// unavailable, or the node drains); what they hold runs on.
	Paused bool `json:"paused,omitempty"`
	// Health is "available", or "unavailable" once evidence said so (no
	// request is sent to it until a probe finds it available again).
	Health string `json:"health"`
}

// Nodes lists the nodes the Hub has seen since it started, by name.
func (h *Hub) Nodes(ctx context.Context) []NodeView {
	h.mu.Lock()
	now := h.cfg.Clock.Now()
	var out []NodeView
	var sessions []*session
	for _, n := range h.nodes {
		if n.providers == nil {
			continue // never registered
		}
		v := NodeView{ID: n.id, Name: n.name, Connected: n.sess != nil && n.sess.serving, Draining: n.sess != nil && n.sess.draining, Generation: n.gen,
			LastSeenMs: now.Sub(n.lastSeen).Milliseconds(), Providers: []ProviderView{}}
		for _, p := range sortedProviders(n.providers) {
			pv := ProviderView{ID: p.Id, Adapter: p.Adapter, Target: p.Target, Slots: int64(p.Slots), LongSlots: int64(p.LongSlots),
				Health: "available"}
			if n.sess != nil && n.sess.unavailableLocked(p.Id) {
				pv.Health = "unavailable"
			}
			for _, m := range p.Models {
				pv.Models = append(pv.Models, m.Name)
			}
			v.Providers = append(v.Providers, pv)
		}
		out = append(out, v)
		sessions = append(sessions, n.sess)
	}
	h.mu.Unlock()
	for i := range out {
		if s := sessions[i]; s != nil {
			s.mu.Lock()
			out[i].ReadyStreams = len(s.ready)
			s.mu.Unlock()
		}
		for j := range out[i].Providers {
			p := &out[i].Providers[j]
			if st, err := h.deps.Engine.Scope(ctx, weir.NodeScope(out[i].ID, p.ID)); err == nil {
				p.Used, p.Queued, p.Orphaned, p.Paused = st.Used, st.Queued, st.Orphaned, st.Config.Paused
			}
			if p.LongSlots > 0 {
				if st, err := h.deps.Engine.Scope(ctx, weir.NodeLongScope(out[i].ID, p.ID)); err == nil {
					p.LongUsed = st.Used
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b NodeView) int { return strings.Compare(a.Name, b.Name) })
	return out
}
