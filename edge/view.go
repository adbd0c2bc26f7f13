package edge

import (
	"context"
	"slices"
	"strings"

	"github.com/weir-gateway/weir"
)

// NodeView is one node as /admin/nodes shows it (weir.NodeView).
type NodeView = weir.NodeView

// ProviderView is one provider of a NodeView (weir.ProviderView).
type ProviderView = weir.ProviderView

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
