package edge

import (
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

// stallWith runs a call on node_a's provider p of session s and ends it
// STALLED with ev.
func (b *testBundle) stallWith(t *testing.T, s *testSession, ev *edgepb.Evidence) {
	t.Helper()
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	rs, err := b.openRun(t, "wn-a", s.offer().RunId, s.gen)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, rs)
	if err := rs.Send(up(&edgepb.RunEnd{Kind: edgepb.RunEnd_STALLED, Message: "no progress", Evidence: ev})); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err == nil {
		t.Fatal("a stalled run succeeded")
	}
}

// probe waits for the gateway's next Probe on s.
func (s *testSession) probe() *edgepb.Probe {
	s.t.Helper()
	for {
		m, err := s.stream.Recv()
		if err != nil {
			s.t.Fatalf("want a probe: %v", err)
		}
		if p := m.GetProbe(); p != nil {
			return p
		}
	}
}

func evidence(gen uint64, provider string, seq uint64, health edgepb.Health) *edgepb.Evidence {
	ev := &edgepb.Evidence{Generation: gen, Provider: provider, Adapter: "openai", Target: "http://127.0.0.1:8000/v1", Seq: seq, Health: health}
	switch health {
	case edgepb.Health_HEALTH_UNAVAILABLE:
		ev.Classification = "provider_unhealthy"
	case edgepb.Health_HEALTH_AVAILABLE:
		ev.Classification = "request_stalled"
	default:
		ev.Classification = "health_unknown"
	}
	return ev
}

func (s *testSession) sendEvidence(ev *edgepb.Evidence) {
	s.t.Helper()
	if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Evidence{Evidence: ev}}); err != nil {
		s.t.Fatal(err)
	}
}

func (b *testBundle) health(t *testing.T, provider string) string {
	t.Helper()
	for _, n := range b.hub.Nodes(t.Context()) {
		for _, p := range n.Providers {
			if n.ID == "node_a" && p.ID == provider {
				return p.Health
			}
		}
	}
	t.Fatalf("no provider %s of node_a", provider)
	return ""
}

// TestStallEvidenceLowersHealth: a stall with "unavailable" evidence
// takes the provider out of Serving; the gateway probes it; a stall's
// newer "available" does not bring it back, a probe's does.
func TestStallEvidenceLowersHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	if got := b.hub.Serving("m"); len(got) != 1 {
		t.Fatalf("serving before: %+v", got)
	}
	b.stallWith(t, s, evidence(s.gen, "p", 1, edgepb.Health_HEALTH_UNAVAILABLE))
	pr := s.probe()
	if pr.Provider != "p" || b.health(t, "p") != "unavailable" || len(b.hub.Serving("m")) != 0 {
		t.Fatalf("after an unavailable stall: probe %+v, health %s, serving %+v", pr, b.health(t, "p"), b.hub.Serving("m"))
	}
	scope := weir.NodeScope("node_a", "p")
	if st := b.scope(t, scope); !st.Config.Paused || st.Orphaned {
		t.Errorf("the unavailable provider's slots: paused %v, orphaned %v; want paused, not orphaned", st.Config.Paused, st.Orphaned)
	}
	b.stallWith(t, s, evidence(s.gen, "p", 2, edgepb.Health_HEALTH_AVAILABLE))
	if b.health(t, "p") != "unavailable" {
		t.Fatal("a stall's available evidence recovered the provider")
	}
	ev := evidence(s.gen, "p", 3, edgepb.Health_HEALTH_AVAILABLE)
	ev.ProbeId = pr.ProbeId
	s.sendEvidence(ev)
	s.sync()
	if b.health(t, "p") != "available" || len(b.hub.Serving("m")) != 1 {
		t.Fatalf("after a probe found it available: health %s, serving %+v", b.health(t, "p"), b.hub.Serving("m"))
	}
	if st := b.scope(t, scope); st.Config.Paused {
		t.Error("the recovered provider's slots are still paused")
	}
}

// TestEvidenceRefusals: evidence that is stale, that binds to no current
// provider, that answers no probe, that is inconsistent, or whose probe
// matches two providers is refused and changes nothing.
func TestEvidenceRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	// p and q share a runtime: a probe's answer cannot tell them apart.
	s.welcome(testProvider("p", 2, "m"), testProvider("q", 2, "m"))
	b.stallWith(t, s, evidence(s.gen, "p", 5, edgepb.Health_HEALTH_UNAVAILABLE))
	pr := s.probe()

	refused := func(name string, ev *edgepb.Evidence, code string) {
		t.Helper()
		s.sendEvidence(ev)
		if r := s.refusal(); r.Code != code {
			t.Errorf("%s: refusal %q, want %q", name, r.Code, code)
		}
	}
	ambiguous := evidence(s.gen, "p", 6, edgepb.Health_HEALTH_AVAILABLE)
	ambiguous.ProbeId = pr.ProbeId
	refused("a probe matching two providers", ambiguous, decisionAmbiguous)
	unasked := evidence(s.gen, "p", 7, edgepb.Health_HEALTH_AVAILABLE)
	unasked.ProbeId = "probe_never"
	refused("an answer to no probe", unasked, decisionBinding)
	inconsistent := evidence(s.gen, "p", 8, edgepb.Health_HEALTH_AVAILABLE)
	inconsistent.ProbeId, inconsistent.Classification = pr.ProbeId, "provider_unhealthy"
	refused("inconsistent", inconsistent, decisionInvalid)
	old := evidence(s.gen-1, "p", 9, edgepb.Health_HEALTH_AVAILABLE)
	old.ProbeId = pr.ProbeId
	refused("an older generation's", old, decisionInvalid)
	if b.health(t, "p") != "unavailable" || b.health(t, "q") != "available" {
		t.Fatalf("refused evidence changed health: p %s, q %s", b.health(t, "p"), b.health(t, "q"))
	}

	// A stale stall observation is not applied either, and a run's
	// evidence about another provider than the run's binds to nothing.
	b.stallWith(t, s, evidence(s.gen, "p", 5, edgepb.Health_HEALTH_AVAILABLE))
	wrongTarget := evidence(s.gen, "q", 1, edgepb.Health_HEALTH_UNAVAILABLE)
	wrongTarget.Target = "http://elsewhere:8000/v1"
	b.stallWith(t, s, wrongTarget)
	if b.health(t, "q") != "available" {
		t.Fatal("a run's evidence about another provider took that one down")
	}
}
