package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// A fleet's leader cannot call a waiter's Resolve for a replica other
// than its own, so a request that may gain node candidates while it
// waits describes them (admission.Request.Spec) and the leader's replica
// resolves that description with ResolveSpec: a node that connected
// after the request arrived, anywhere in the fleet, becomes one of its
// candidates, as it does for a request of the leader's own replica.

// nodeSpec is what every node candidate of one request shares, and what
// tells them apart: each needs Before, its node provider's slots (and a
// long-context slot if Prompt passes the node's threshold), then After,
// and reserves Tokens and Cost. Tried are the targets it already failed
// on, never offered again.
type nodeSpec struct {
	Model  string           `json:"model"`
	Before []admission.Need `json:"before,omitempty"`
	After  []admission.Need `json:"after,omitempty"`
	Tokens int64            `json:"tokens,omitempty"`
	Cost   int64            `json:"cost,omitempty"`
	Prompt int64            `json:"prompt,omitempty"`
	Tried  []string         `json:"tried,omitempty"`
}

// maxSpec bounds a spec ResolveSpec reads: a few scopes and names.
const maxSpec = 64 << 10

// spec is r's nodeSpec, encoded; nil if r may take no node (see
// nodesAllowed) or waits for one target alone (strict affinity).
func (r *routing) spec() []byte {
	if r.s.deps.Nodes == nil || !r.nodesAllowed() || r.only != "" {
		return nil
	}
	c := r.c
	tok := weir.NodeTokenizer(c.Model)
	sp := nodeSpec{Model: c.Model.Name, Before: tenantNeeds(c.KeyID, c.Group), After: r.budgets.needs(""),
		Tokens: c.tokensIn(tok), Cost: int64(r.estimate(target{node: &weir.NodeTarget{}})),
		Prompt: max(c.tokensIn(tok)-c.MaxTokens, 0)}
	r.mu.Lock()
	for name := range r.tried {
		sp.Tried = append(sp.Tried, name)
	}
	r.mu.Unlock()
	slices.Sort(sp.Tried)
	b, err := json.Marshal(sp)
	if err != nil {
		return nil
	}
	return b
}

// ResolveSpec reads a request's Spec, made by this gateway on another
// replica of the fleet, and returns what resolves it to the node
// candidates serving its model now, less those it tried and those
// cooling down. A fleet's leader reads a waiter's Spec once and resolves
// it under its engine's lock at each re-resolution
// (fleet.Engine.OnResolve): neither calls the engine.
func (s *Service) ResolveSpec(spec []byte) (func() []admission.Candidate, error) {
	if s.deps.Nodes == nil {
		return func() []admission.Candidate { return nil }, nil
	}
	if len(spec) > maxSpec {
		return nil, fmt.Errorf("a request spec of %d bytes", len(spec))
	}
	var sp nodeSpec
	if err := json.Unmarshal(spec, &sp); err != nil {
		return nil, fmt.Errorf("a request spec: %w", err)
	}
	return func() []admission.Candidate { return s.specCandidates(sp) }, nil
}

// specCandidates are the node candidates of sp's model now.
func (s *Service) specCandidates(sp nodeSpec) []admission.Candidate {
	now := s.deps.Clock.Now()
	var out []admission.Candidate
	for _, n := range s.deps.Nodes.Serving(sp.Model) {
		if slices.Contains(sp.Tried, n.Name()) || s.deps.Router.CoolingUntil(nodeHealth(n)).After(now) {
			continue
		}
		long := n.LongPromptTokens > 0 && sp.Prompt > n.LongPromptTokens
		out = append(out, admission.Candidate{Needs: nodeNeeds(sp.Before, n, long, sp.After), Tokens: sp.Tokens, Cost: sp.Cost})
	}
	return out
}

// nodeNeeds is what a candidate on n's provider needs: before, its slots
// (and a long-context slot if long), then after.
func nodeNeeds(before []admission.Need, n weir.NodeTarget, long bool, after []admission.Need) []admission.Need {
	needs := append(slices.Clip(before), admission.Need{Scope: weir.NodeScope(n.Node, n.Provider), Amount: 1})
	if long {
		needs = append(needs, admission.Need{Scope: weir.NodeLongScope(n.Node, n.Provider), Amount: 1})
	}
	return append(needs, after...)
}

// addedNode is the node target of a lease a fleet's leader granted on a
// candidate it added to r (ResolveSpec): the node serving r's model
// whose slots the lease holds. False: none serves it now.
func (r *routing) addedNode(l admission.Lease) (target, bool) {
	if r.s.deps.Nodes == nil {
		return target{}, false
	}
	for _, n := range r.s.deps.Nodes.Serving(r.c.Model.Name) {
		if t := (target{node: &n}); r.holds(l, t) {
			return r.newestGen(t), true
		}
	}
	return target{}, false
}

// A lease on a node a fleet's leader added may come before this replica
// has read of the node on the fleet's board (another replica's node; the
// board is read every second): it waits for it, checking every
// addedNodeEvery, for at most addedNodeWait.
const (
	addedNodeWait  = 3 * time.Second
	addedNodeEvery = 100 * time.Millisecond
)

// admittedTarget is the target of lease (routing.admitted); false, with
// the lease given back, if it is on a node a fleet's leader added that
// this replica does not learn of within addedNodeWait (gone meanwhile),
// or ctx ends first.
func (s *Service) admittedTarget(ctx context.Context, c *Call, r *routing, lease admission.Lease) (target, bool) {
	t, ok := r.admitted(lease)
	for until := s.deps.Clock.Now().Add(addedNodeWait); !ok && s.deps.Clock.Now().Before(until); {
		wait, timer := clock.After(s.deps.Clock, addedNodeEvery)
		select {
		case <-ctx.Done():
			timer.Stop()
			s.hold(ctx, c, lease).release()
			return target{}, false
		case <-wait:
		}
		t, ok = r.addedNode(lease)
	}
	if !ok {
		s.hold(ctx, c, lease).release()
	}
	return t, ok
}
