package edge

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// forgetBundle is a Hub whose gone nodes are forgotten after an hour,
// and whose live ones may go days without a heartbeat, so that the fake
// clock can pass that hour.
func forgetBundle(t *testing.T, forgetAfter time.Duration) *testBundle {
	t.Helper()
	return setupWith(t, func(c *Config) {
		c.HeartbeatInterval, c.HeartbeatTimeout, c.TokenRecheck = 24*time.Hour, 72*time.Hour, 72*time.Hour
		c.ForgetAfter = forgetAfter
	}, false)
}

// goneNode registers node_a with provider p (one slot and one long
// one) and ends its session: its scopes are orphaned.
func (b *testBundle) goneNode(t *testing.T) (gen uint64, scopes []string) {
	t.Helper()
	s := b.open(t, "wn-a")
	p := testProvider("p", 1, "m")
	p.LongSlots, p.LongPromptTokens = 1, 1000
	s.welcome(p)
	s.cancel()
	b.waitOrphaned(t, weir.NodeScope("node_a", "p"))
	return s.gen, []string{weir.NodeScope("node_a", "p"), weir.NodeLongScope("node_a", "p")}
}

func (b *testBundle) hasScope(t *testing.T, name string) bool {
	t.Helper()
	_, err := b.engine.Scope(t.Context(), name)
	if err != nil && !errors.Is(err, admission.ErrUnknownScope) {
		t.Fatal(err)
	}
	return err == nil
}

// TestGoneNodeForgottenAfterBound: a node gone for ForgetAfter, by the
// Hub's clock, is forgotten: its scopes are retired, so that a waiter
// naming them has no candidate, and /admin/nodes no longer lists it. It
// may come back later, at a newer generation.
func TestGoneNodeForgottenAfterBound(t *testing.T) {
	t.Parallel()
	b := forgetBundle(t, time.Hour)
	gen, scopes := b.goneNode(t)
	b.clock.Advance(time.Hour - time.Second)
	for _, sc := range scopes {
		if st := b.scope(t, sc); !st.Orphaned {
			t.Errorf("%s before the bound: not orphaned", sc)
		}
	}
	if n := b.hub.Nodes(t.Context()); len(n) != 1 || n[0].Connected {
		t.Fatalf("nodes before the bound: %+v", n)
	}
	b.clock.Advance(time.Second)
	for _, sc := range scopes {
		if b.hasScope(t, sc) {
			t.Errorf("%s is still configured after the bound", sc)
		}
	}
	if n := b.hub.Nodes(t.Context()); len(n) != 0 {
		t.Errorf("nodes after the bound: %+v, want none", n)
	}
	_, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "late",
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scopes[0], Amount: 1}}}}})
	if !errors.Is(err, admission.ErrNoCandidate) && !errors.Is(err, admission.ErrUnknownScope) {
		t.Errorf("a request naming a retired scope: %v, want no candidate", err)
	}

	s := b.open(t, "wn-a")
	w := s.welcome(testProvider("p", 1, "m"))
	if w.Generation <= gen {
		t.Fatalf("the node came back at generation %d after %d", w.Generation, gen)
	}
	if st := b.scope(t, scopes[0]); st.Orphaned || st.Config.OwnerGen != w.Generation {
		t.Errorf("the returning node's scope: %+v orphaned=%v", st.Config, st.Orphaned)
	}
	b.hold(t, "back", scopes[0], admission.Owner{})
}

// TestReconnectKeepsNode: a node that reconnects within ForgetAfter is
// not forgotten when the bound of its old session passes, nor while its
// new session lives.
func TestReconnectKeepsNode(t *testing.T) {
	t.Parallel()
	b := forgetBundle(t, time.Hour)
	_, scopes := b.goneNode(t)
	b.clock.Advance(30 * time.Minute)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m"))
	b.clock.Advance(2 * time.Hour)
	if st := b.scope(t, scopes[0]); st.Orphaned || st.Config.OwnerGen != s.gen {
		t.Fatalf("the reconnected node's scope after the old bound: %+v orphaned=%v", st.Config, st.Orphaned)
	}
	if n := b.hub.Nodes(t.Context()); len(n) != 1 || !n[0].Connected {
		t.Fatalf("nodes: %+v", n)
	}
	// Gone again: the bound counts from this session's end.
	s.cancel()
	b.waitOrphaned(t, scopes[0])
	b.clock.Advance(59 * time.Minute)
	if !b.hasScope(t, scopes[0]) {
		t.Fatal("forgotten before the bound of its last session")
	}
	b.clock.Advance(time.Minute)
	if b.hasScope(t, scopes[0]) {
		t.Fatal("not forgotten at the bound of its last session")
	}
}

// TestForgetNeverWhenNegative: ForgetAfter < 0 keeps gone nodes.
func TestForgetNeverWhenNegative(t *testing.T) {
	t.Parallel()
	b := forgetBundle(t, -1)
	_, scopes := b.goneNode(t)
	b.clock.Advance(365 * 24 * time.Hour)
	if !b.hasScope(t, scopes[0]) {
		t.Fatal("a gone node was forgotten with ForgetAfter < 0")
	}
}

// TestForget: an operator forgets a gone node, by id or name, at once; a
// connected node and an unknown one are refused, changing nothing.
func TestForget(t *testing.T) {
	t.Parallel()
	b := forgetBundle(t, time.Hour)
	live := b.open(t, "wn-b")
	live.welcome(testProvider("q", 1, "m"))
	if _, err := b.hub.Forget(t.Context(), "gpu-b"); !errors.Is(err, ErrNodeConnected) {
		t.Errorf("forget a connected node: %v, want ErrNodeConnected", err)
	}
	if _, err := b.hub.Forget(t.Context(), "node_zzz"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("forget an unknown node: %v, want ErrUnknownNode", err)
	}
	if st := b.scope(t, weir.NodeScope("node_b", "q")); st.Orphaned {
		t.Fatal("a refused forget orphaned the live node's scope")
	}

	_, scopes := b.goneNode(t)
	f, err := b.hub.Forget(t.Context(), "gpu-a")
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "node_a" || f.Name != "gpu-a" || !slices.Equal(f.Scopes, scopes) {
		t.Errorf("forgotten %+v, want node_a's scopes %v", f, scopes)
	}
	for _, sc := range scopes {
		if b.hasScope(t, sc) {
			t.Errorf("%s is still configured", sc)
		}
	}
	if n := b.hub.Nodes(t.Context()); len(n) != 1 || n[0].ID != "node_b" {
		t.Errorf("nodes after the forget: %+v", n)
	}
	if _, err := b.hub.Forget(t.Context(), "node_a"); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("forget twice: %v, want ErrUnknownNode", err)
	}
	// The bound passing after changes nothing more.
	b.clock.Advance(2 * time.Hour)
	if n := b.hub.Nodes(t.Context()); len(n) != 1 {
		t.Errorf("nodes after the bound: %+v", n)
	}
}

// TestForgetLeavesMovedNode: in a fleet a gone node may have moved to
// another replica, whose session owns its scopes at a newer generation:
// forgetting it here retires none of them.
func TestForgetLeavesMovedNode(t *testing.T) {
	t.Parallel()
	b := forgetBundle(t, time.Hour)
	gen, scopes := b.goneNode(t)
	owner := weir.NodeOwner("node_a")
	// Another replica's Hub registers the node at a newer generation.
	for _, sc := range scopes {
		if err := b.engine.SetScope(t.Context(), sc, admission.ScopeConfig{Limit: 1, Owner: owner, OwnerGen: gen + 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.engine.Activate(t.Context(), owner, gen+10); err != nil {
		t.Fatal(err)
	}
	f, err := b.hub.Forget(t.Context(), "node_a")
	if err != nil || len(f.Scopes) != 0 {
		t.Fatalf("forget a node that moved: %+v, %v; want it forgotten here, no scope retired", f, err)
	}
	for _, sc := range scopes {
		if st := b.scope(t, sc); st.Orphaned || st.Config.OwnerGen != gen+10 {
			t.Errorf("%s of the moved node's session: %+v orphaned=%v", sc, st.Config, st.Orphaned)
		}
	}
}
