package edge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
)

// A gone node's scopes stay in the engine, orphaned, so that the node
// takes them back when it reconnects. A node that never does is
// forgotten Config.ForgetAfter after its session ended, or at once by
// Forget (an operator's `weir nodes forget`): its scopes are retired
// (admission.Engine.RemoveScope, which leaves the waiters that still
// name them to re-resolve or, with no candidate left, to fail with
// admission.ErrNoCandidate), and it leaves Nodes. The Hub keeps its
// generation, so that a session it opens later still supersedes every
// one it had.

// ErrUnknownNode is Forget's answer for a node the Hub has not seen
// since it started, or has forgotten; it matches weir.ErrNotFound.
var ErrUnknownNode = fmt.Errorf("edge: no such node (%w)", weir.ErrNotFound)

// ErrNodeConnected is Forget's answer for a node whose session is live:
// it would register its scopes again at its next session. Revoke its
// token first (weir nodes revoke), which ends its session. It matches
// weir.ErrConflict.
var ErrNodeConnected = fmt.Errorf("edge: the node is connected (%w)", weir.ErrConflict)

// Forgotten is a node Forget retired: its id and name, and the scopes
// it retired.
type Forgotten = weir.ForgottenNode

// Forget retires the scopes of the gone node named by id or name (its
// id, or its name as it last registered) at once, and forgets the node:
// ErrUnknownNode if the Hub has no such node, ErrNodeConnected if its
// session is live.
func (h *Hub) Forget(ctx context.Context, idOrName string) (Forgotten, error) {
	n := h.find(idOrName)
	if n == nil {
		return Forgotten{}, fmt.Errorf("%w: %q", ErrUnknownNode, idOrName)
	}
	f, err := h.forget(ctx, n, 0)
	if err != nil {
		return Forgotten{}, err
	}
	h.deps.Logger.Warn("edge: a gone node forgotten by an operator; its scopes are retired", "node", f.ID, "name", f.Name, "scopes", f.Scopes)
	return f, nil
}

// find is the registered node of that id or name, or nil.
func (h *Hub) find(idOrName string) *node {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.nodes[idOrName]; n != nil && n.providers != nil {
		return n
	}
	for _, n := range h.nodes {
		if n.name == idOrName && n.providers != nil {
			return n
		}
	}
	return nil
}

// live reports whether the node of that id or name has a live session.
func (h *Hub) live(idOrName string) bool {
	n := h.find(idOrName)
	if n == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return n.sess != nil
}

// forgetLaterLocked forgets n after d, unless it has a session, or a
// generation other than gen, by then; d < 0: never.
func (h *Hub) forgetLaterLocked(n *node, gen uint64, d time.Duration) {
	stopTimer(&n.forgetTimer)
	if d < 0 {
		return
	}
	n.forgetTimer = h.cfg.Clock.AfterFunc(d, func() {
		f, err := h.forget(context.Background(), n, gen)
		switch {
		case errors.Is(err, ErrNodeConnected), errors.Is(err, ErrUnknownNode):
		case err != nil:
			h.deps.Logger.Error("edge: could not forget a gone node; trying again in a minute", "node", n.id, "error", err)
			h.mu.Lock()
			if n.sess == nil && n.gen == gen {
				h.forgetLaterLocked(n, gen, forgetRetry)
			}
			h.mu.Unlock()
		default:
			h.deps.Logger.Warn("edge: a node gone for edge.forget_after forgotten; its scopes are retired", "node", f.ID, "name", f.Name,
				"forget_after", h.cfg.ForgetAfter, "scopes", f.Scopes)
		}
	})
}

// forget retires gone node n's scopes and leaves it out of Nodes: if gen
// is not 0, only while its newest generation is gen. The node's
// attaching lock orders it with its sessions' registrations.
func (h *Hub) forget(ctx context.Context, n *node, gen uint64) (Forgotten, error) {
	n.attaching.Lock()
	defer n.attaching.Unlock()
	h.mu.Lock()
	switch {
	case n.sess != nil:
		h.mu.Unlock()
		return Forgotten{}, fmt.Errorf("%w: node %s (%s) has a live session; revoke its token (weir nodes revoke) to end it, then forget it",
			ErrNodeConnected, n.name, n.id)
	case n.providers == nil || (gen != 0 && n.gen != gen):
		h.mu.Unlock()
		return Forgotten{}, fmt.Errorf("%w: %s", ErrUnknownNode, n.id)
	}
	var scopes []string
	for _, p := range sortedProviders(n.providers) {
		scopes = append(scopes, weir.NodeScope(n.id, p.Id))
		if p.LongSlots > 0 {
			scopes = append(scopes, weir.NodeLongScope(n.id, p.Id))
		}
	}
	f := Forgotten{ID: n.id, Name: n.name, Scopes: []string{}}
	providers, last := n.providers, n.gen
	n.providers = nil
	stopTimer(&n.forgetTimer)
	h.mu.Unlock()
	var failed error
	for _, scope := range scopes {
		retired, err := h.retire(ctx, scope, last)
		if err != nil {
			failed = errors.Join(failed, fmt.Errorf("retire %s: %w", scope, err))
		}
		if retired {
			f.Scopes = append(f.Scopes, scope)
		}
	}
	if failed != nil {
		// Kept, to be forgotten again: what was retired is retired.
		h.keepProviders(n, providers)
		return Forgotten{}, failed
	}
	h.changed()
	return f, nil
}

// retire removes scope, of a node whose newest session here was of
// generation gen, from the engine if it is still that node's, orphaned
// at gen or before. In a fleet the node may have moved: a session of
// another replica's then owns it, at a newer generation, and it stays.
func (h *Hub) retire(ctx context.Context, scope string, gen uint64) (bool, error) {
	st, err := h.deps.Engine.Scope(ctx, scope)
	switch {
	case errors.Is(err, admission.ErrUnknownScope):
		return false, nil
	case err != nil:
		return false, err
	case !st.Orphaned || st.Config.OwnerGen > gen:
		return false, nil
	}
	if err := h.deps.Engine.RemoveScope(ctx, scope); err != nil && !errors.Is(err, admission.ErrUnknownScope) {
		return false, err
	}
	return true, nil
}

// keepProviders gives gone node n its providers back after a forget
// that failed, unless a session has registered since.
func (h *Hub) keepProviders(n *node, providers map[string]*edgepb.Provider) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n.sess == nil && n.providers == nil {
		n.providers = providers
	}
}

// forgetRetry is how long after a failed forget the Hub tries again.
const forgetRetry = time.Minute

func stopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}
