package gateway

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// arrivedWithEngine resolves every waiter to the candidates it arrived
// with, as a fleet's leader does for a waiter of another replica
// (fleet/wire.go): its own Resolve never runs.
type arrivedWithEngine struct{ admission.Engine }

func arrivedWith(req admission.Request) admission.Request {
	if req.Resolve != nil {
		cands := slices.Clone(req.Candidates)
		req.Resolve = func(string) ([]admission.Candidate, error) { return slices.Clone(cands), nil }
	}
	return req
}

func (e arrivedWithEngine) TryAcquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	return e.Engine.TryAcquire(ctx, arrivedWith(req))
}

func (e arrivedWithEngine) Enqueue(ctx context.Context, req admission.Request, notify func(admission.Lease, error)) error {
	return e.Engine.Enqueue(ctx, arrivedWith(req), notify)
}

// TestNodeBackAtAnotherReplica: a request queued through another
// replica's leader, whose node's session ended and came back as a newer
// generation, is admitted on the node again and runs on its new session.
func TestNodeBackAtAnotherReplica(t *testing.T) {
	t.Parallel()
	// A run on the old session fails, as the relay's does; the request
	// is then ended, not sent on to the full platform models to wait.
	ctx, stale := context.WithCancel(t.Context())
	defer stale()
	nodes := &fakeNodes{answer: func(nt weir.NodeTarget, c provider.Call) (*http.Response, error) {
		if nt.Gen != 2 {
			stale()
			return nil, &provider.Error{Err: weir.ErrNodeGone}
		}
		return okAnswer(nt, c)
	}}
	b := setup(t, setupOpts{nodes: nodes, engine: func(e admission.Engine) admission.Engine { return arrivedWithEngine{e} }})
	gen1 := b.nodeTarget(t, "node_a", 1)
	nodes.set(gen1)
	owner := weir.NodeOwner("node_a")
	if _, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "busy", Owner: admission.Owner{ID: owner, Gen: 1},
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: weir.NodeScope("node_a", "p"), Amount: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	b.fill(t, "up/m", 1)
	b.fill(t, "up2/m", 1)
	c := b.chat(t)
	done := make(chan error, 1)
	go func() { done <- b.svc.Serve(ctx, c, &recordedAnswer{}) }()
	b.waitEvent(t, admission.OutcomeQueued)
	// The node's session ends; it comes back as generation 2.
	if err := b.engine.Fence(t.Context(), owner, 1); err != nil {
		t.Fatal(err)
	}
	gen2 := gen1
	gen2.Gen = 2
	nodes.set(gen2)
	cfg := admission.ScopeConfig{Limit: 1, Owner: owner, OwnerGen: 2}
	if err := b.engine.SetScope(t.Context(), weir.NodeScope("node_a", "p"), cfg); err != nil {
		t.Fatal(err)
	}
	if err := b.engine.Activate(t.Context(), owner, 2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if c.Usage.PlatformModel != "node:node_a/p" {
		t.Errorf("served by %q; want node_a's provider, on its new session", c.Usage.PlatformModel)
	}
}

// specEngine resolves every waiter as a fleet's leader resolves a
// waiter of another replica whose Spec its own replica's gateway
// resolves (fleet/wire.go, arrivedWith): the candidates it arrived with,
// then those its Spec resolves to that it did not arrive with.
type specEngine struct {
	admission.Engine
	svc **Service
}

func (e specEngine) request(req admission.Request) admission.Request {
	if req.Resolve != nil {
		cands, spec, svc := slices.Clone(req.Candidates), req.Spec, *e.svc
		req.Resolve = func(string) ([]admission.Candidate, error) {
			out := slices.Clone(cands)
			resolve, err := svc.ResolveSpec(spec)
			if err != nil {
				return out, nil
			}
			for _, c := range resolve() {
				if !slices.ContainsFunc(out, func(o admission.Candidate) bool { return slices.Equal(o.Needs, c.Needs) }) {
					out = append(out, c)
				}
			}
			return out, nil
		}
	}
	return req
}

func (e specEngine) TryAcquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	return e.Engine.TryAcquire(ctx, e.request(req))
}

func (e specEngine) Enqueue(ctx context.Context, req admission.Request, notify func(admission.Lease, error)) error {
	return e.Engine.Enqueue(ctx, e.request(req), notify)
}

// TestNodeAddedAtAnotherReplica: a request queued through another
// replica's leader, with every candidate full, is admitted on a node that
// connected after it arrived, which the leader found from its Spec, and
// runs there.
func TestNodeAddedAtAnotherReplica(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	svc := new(*Service)
	b := setup(t, setupOpts{nodes: nodes, engine: func(e admission.Engine) admission.Engine { return specEngine{e, svc} }})
	*svc = b.svc
	b.fill(t, "up/m", 1)
	b.fill(t, "up2/m", 1)
	c := b.chat(t)
	done := make(chan error, 1)
	go func() { done <- b.svc.Serve(t.Context(), c, &recordedAnswer{}) }()
	b.waitEvent(t, admission.OutcomeQueued)
	// A node serving the model connects.
	nodes.set(b.nodeTarget(t, "node_b", 1))
	if err := b.engine.Activate(t.Context(), weir.NodeOwner("node_b"), 1); err != nil {
		t.Fatal(err)
	}
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-bound.C:
		t.Fatal("the request was never admitted on the node that connected after it arrived")
	}
	if c.Usage.PlatformModel != "node:node_b/p" {
		t.Errorf("served by %q; want node_b's provider, which connected after the request arrived", c.Usage.PlatformModel)
	}
}

// TestLeaseKnownByItsScope: a lease's candidate index is into the list
// its engine held, which differs from this replica's last resolution
// when a fleet's new leader queued the waiter with the list it arrived
// with after this replica, leading, had resolved it in process. The
// lease goes to the target whose scope it holds, whatever its index.
func TestLeaseKnownByItsScope(t *testing.T) {
	t.Parallel()
	nodes := &fakeNodes{answer: okAnswer}
	b := setup(t, setupOpts{nodes: nodes})
	c := b.chat(t)
	node := b.nodeTarget(t, "node_b", 1)
	nodes.set(node)
	r := &routing{s: b.svc, c: c, targets: []target{{pm: "up/m"}, {node: &node}, {pm: "up2/m"}}}
	cands := r.candidates(r.targets)
	for _, tc := range []struct {
		index int
		held  int // the candidate whose needs the lease holds
		want  string
	}{
		{0, 0, "up/m"},
		{0, 2, "up2/m"},         // the leader's list had up2/m first
		{2, 1, "node:node_b/p"}, // and the node last
		{5, 0, "up/m"},          // past this replica's list, on one of it
	} {
		l := admission.Lease{Candidate: tc.index, Needs: cands[tc.held].Needs}
		got, ok := r.admitted(l)
		if !ok || got.name() != tc.want {
			t.Errorf("lease on candidate %d holding %s's scopes: target %q (%v); want %s", tc.index, r.targets[tc.held].name(), got.name(), ok, tc.want)
		}
	}
}
