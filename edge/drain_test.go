package edge

import (
	"errors"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

// drain sends Drain for generation gen.
func (s *testSession) drain(gen uint64) {
	s.t.Helper()
	if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Drain{Drain: &edgepb.Drain{Generation: gen}}}); err != nil {
		s.t.Fatal(err)
	}
}

// TestDrainStopsOffers: a node that drains is offered nothing more: it
// leaves Serving, a call for it is refused before any offer as a node
// gone, and its slots are paused, so that the requests waiting for them
// re-resolve (to nothing here: no_candidate at once). What it runs keeps
// its slot until it ends; the session's end fences it as ever.
func TestDrainStopsOffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m"))
	scope := weir.NodeScope("node_a", "p")
	running := b.hold(t, "running", scope, admission.Owner{})
	out := make(chan error, 1)
	// A waiter as the gateway queues one: its resolver asks Serving.
	err := b.engine.Enqueue(t.Context(), admission.Request{ID: "queued",
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}},
		Resolve: func(string) ([]admission.Candidate, error) {
			var cs []admission.Candidate
			for _, nt := range b.hub.Serving("m") {
				cs = append(cs, admission.Candidate{Needs: []admission.Need{{Scope: nt.Name(), Amount: 1}}})
			}
			return cs, nil
		}}, func(_ admission.Lease, err error) { out <- err })
	if err != nil {
		t.Fatal(err)
	}

	s.drain(s.gen - 1)
	if r := s.refusal(); r.Code != "stale_generation" {
		t.Errorf("a drain of an older generation: refusal %q", r.Code)
	}
	if len(b.hub.Serving("m")) != 1 {
		t.Fatal("a refused drain took the node out of Serving")
	}
	s.drain(s.gen)
	s.sync()
	if got := b.hub.Serving("m"); len(got) != 0 {
		t.Errorf("serving while draining: %+v", got)
	}
	if err := outcome(t, out); !errors.Is(err, admission.ErrNoCandidate) {
		t.Errorf("the waiter for the draining node's slot: %v; want no_candidate at once", err)
	}
	st := b.scope(t, scope)
	if !st.Config.Paused || st.Orphaned || st.Used != 1 {
		t.Errorf("the draining node's slots: %+v orphaned=%v used=%d; want paused, the running lease held", st.Config, st.Orphaned, st.Used)
	}
	if n := b.hub.Nodes(t.Context()); len(n) != 1 || !n[0].Draining || !n[0].Providers[0].Paused {
		t.Errorf("/admin/nodes while draining: %+v", n)
	}
	r := <-b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	if !errors.Is(r.err, weir.ErrNodeGone) {
		t.Errorf("a call for the draining node: %v; want ErrNodeGone before any offer", r.err)
	}
	// Its run ends; then the node closes its session.
	if err := b.engine.Release(t.Context(), running.ID, admission.Owner{}); err != nil {
		t.Fatal(err)
	}
	s.cancel()
	b.waitOrphaned(t, scope)
}
