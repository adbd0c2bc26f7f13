package fleet

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// TestReresolveAcrossReplicas: a waiter of a replica other than the
// leader's, with a Resolve, that loses a node's candidate when the node
// is fenced gets it back when the node comes back (a new generation,
// activated through the leader's replica), and is admitted there, as a
// waiter of the leader's own replica is.
func TestReresolveAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		on   int // the replica the waiter queues on
	}{{"leader", 0}, {"follower", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			es := replicas(t, 2, admission.Options{})
			hub, ctx := es[0], t.Context()
			node := func(gen uint64) admission.ScopeConfig {
				return admission.ScopeConfig{Limit: 1, Owner: "n1", OwnerGen: gen}
			}
			if err := hub.SetScope(ctx, "node", node(1)); err != nil {
				t.Fatal(err)
			}
			if err := hub.SetScope(ctx, "pm", admission.ScopeConfig{Limit: 1}); err != nil {
				t.Fatal(err)
			}
			one := func(scope string) admission.Candidate {
				return admission.Candidate{Needs: []admission.Need{{Scope: scope, Amount: 1}}}
			}
			for _, s := range []string{"node", "pm"} {
				if _, err := hub.TryAcquire(ctx, admission.Request{ID: "fill-" + s, Candidates: []admission.Candidate{one(s)}}); err != nil {
					t.Fatal(err)
				}
			}
			cands := []admission.Candidate{one("node"), one("pm")}
			got := make(chan admission.Lease, 1)
			failed := make(chan error, 1)
			req := admission.Request{ID: "w", Candidates: cands,
				Resolve: func(string) ([]admission.Candidate, error) { return cands, nil }}
			if err := es[tc.on].Enqueue(ctx, req, func(l admission.Lease, err error) {
				if err != nil {
					failed <- err
					return
				}
				got <- l
			}); err != nil {
				t.Fatal(err)
			}
			// The node's session ends; it comes back as generation 2.
			if err := hub.Fence(ctx, "n1", 1); err != nil {
				t.Fatal(err)
			}
			if err := hub.SetScope(ctx, "node", node(2)); err != nil {
				t.Fatal(err)
			}
			if err := hub.Activate(ctx, "n1", 2); err != nil {
				t.Fatal(err)
			}
			bound := time.NewTimer(10 * time.Second)
			defer bound.Stop()
			select {
			case l := <-got:
				if l.Candidate != 0 {
					t.Errorf("admitted on candidate %d; want 0, the node's", l.Candidate)
				}
			case err := <-failed:
				t.Fatalf("the waiter failed: %v", err)
			case <-bound.C:
				t.Fatal("the waiter was never admitted on the node that came back")
			}
		})
	}
}

// TestResolveAddsNodeAcrossReplicas: a node that connects after a waiter
// arrived becomes one of its candidates, whichever replica it queued on:
// the leader's own through its Resolve, another's through its Spec,
// which the leader resolves with what its replica registered
// (OnResolve). The follower's lease names the added candidate by its
// index in the follower's list and by its needs.
func TestResolveAddsNodeAcrossReplicas(t *testing.T) {
	t.Parallel()
	one := func(scope string) admission.Candidate {
		return admission.Candidate{Needs: []admission.Need{{Scope: scope, Amount: 1}}}
	}
	for _, tc := range []struct {
		name string
		on   int // the replica the waiter queues on
	}{{"leader", 0}, {"follower", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			es := replicas(t, 2, admission.Options{})
			hub, ctx := es[0], t.Context()
			for _, e := range es {
				// Every spec resolves to the node's candidate, which the
				// engine skips until the node's scope is there.
				e.OnResolve(func(spec []byte) (func() []admission.Candidate, error) {
					if string(spec) != "model m" {
						t.Errorf("resolved spec %q; want the waiter's", spec)
					}
					return func() []admission.Candidate { return []admission.Candidate{one("node")} }, nil
				})
			}
			if err := hub.SetScope(ctx, "pm", admission.ScopeConfig{Limit: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := hub.TryAcquire(ctx, admission.Request{ID: "fill", Candidates: []admission.Candidate{one("pm")}}); err != nil {
				t.Fatal(err)
			}
			cands := []admission.Candidate{one("pm")}
			got := make(chan admission.Lease, 1)
			failed := make(chan error, 1)
			req := admission.Request{ID: "w", Candidates: cands, Spec: []byte("model m"),
				Resolve: func(string) ([]admission.Candidate, error) { return append(cands, one("node")), nil }}
			if err := es[tc.on].Enqueue(ctx, req, func(l admission.Lease, err error) {
				if err != nil {
					failed <- err
					return
				}
				got <- l
			}); err != nil {
				t.Fatal(err)
			}
			// The node connects, at the leader's replica, after the waiter
			// arrived.
			if err := hub.SetScope(ctx, "node", admission.ScopeConfig{Limit: 1, Owner: "n1", OwnerGen: 1}); err != nil {
				t.Fatal(err)
			}
			if err := hub.Activate(ctx, "n1", 1); err != nil {
				t.Fatal(err)
			}
			bound := time.NewTimer(10 * time.Second)
			defer bound.Stop()
			select {
			case l := <-got:
				if l.Candidate != 1 || len(l.Needs) != 1 || l.Needs[0].Scope != "node" {
					t.Errorf("admitted on candidate %d with needs %v; want 1, the node's", l.Candidate, l.Needs)
				}
				if err := es[tc.on].Release(ctx, l.ID, l.Owner); err != nil {
					t.Errorf("release of the lease on the added candidate: %v", err)
				}
			case err := <-failed:
				t.Fatalf("the waiter failed: %v", err)
			case <-bound.C:
				t.Fatal("the waiter was never admitted on the node that connected after it arrived")
			}
		})
	}
}
