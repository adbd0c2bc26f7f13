package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// waitScope polls the leader's view of scope until cond holds.
func waitScope(t *testing.T, e *Engine, scope string, cond func(admission.ScopeStats) bool) admission.ScopeStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.Scope(t.Context(), scope)
		if err == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("scope %s: %+v (%v)", scope, st, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLazyRelease: with LazyRelease, a follower's Reconcile and Release
// of an ownerless lease return at once and reach the leader as one
// release that settles its tokens first: the capacity comes back, the
// TPM window is charged what was used, not what was reserved, and a
// waiter queued at the leader is admitted. A lease with an owner is
// released as ever, with its errors.
func TestLazyRelease(t *testing.T) {
	t.Parallel()
	es := replicasWith(t, 2, admission.Options{}, func(c *Config) { c.LazyRelease = true })
	leader, follower := es[0], es[1]
	ctx := t.Context()
	if err := leader.SetScope(ctx, "s", admission.ScopeConfig{Limit: 1, TPM: 1000}); err != nil {
		t.Fatal(err)
	}
	req := func(id string) admission.Request {
		return admission.Request{ID: id, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}, Tokens: 600}}}
	}
	l, err := follower.TryAcquire(ctx, req("first"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	if err := leader.Enqueue(ctx, req("next"), func(_ admission.Lease, err error) { got <- err }); err != nil {
		t.Fatal(err)
	}
	if err := follower.Reconcile(ctx, l.ID, l.Owner, admission.Settlement{Tokens: 100}); err != nil {
		t.Fatalf("lazy Reconcile: %v", err)
	}
	if err := follower.Release(ctx, l.ID, l.Owner); err != nil {
		t.Fatalf("lazy Release: %v", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter at the leader: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lazy release never reached the leader")
	}
	// 100 settled plus the waiter's 600 reserved: 300 of 1000 left.
	st := waitScope(t, leader, "s", func(st admission.ScopeStats) bool { return st.Used == 1 })
	if st.TPMAvailable > 301 || st.TPMAvailable < 299 {
		t.Errorf("TPM left %.0f; want 300 (the first lease settled at 100 tokens)", st.TPMAvailable)
	}
	if err := follower.Release(ctx, l.ID, l.Owner); err != nil {
		t.Errorf("releasing the lazy-released lease again: %v", err)
	}

	// An owner's lease: released at the leader before Release returns.
	o := admission.Owner{ID: "w", Gen: 1}
	if err := leader.SetScope(ctx, "o", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	r := admission.Request{ID: "owned", Owner: o, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "o", Amount: 1}}}}}
	lo, err := follower.TryAcquire(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.Release(context.WithoutCancel(ctx), lo.ID, lo.Owner); err != nil {
		t.Fatal(err)
	}
	if st, _ := leader.Scope(ctx, "o"); st.Used != 0 {
		t.Errorf("an owner's lease is still held after its Release returned: %+v", st)
	}
}
