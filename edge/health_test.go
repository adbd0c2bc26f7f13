package edge

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

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
	if r := <-res; !errors.Is(r.err, weir.ErrNodeStalled) {
		t.Fatalf("a stalled run's error: %v, want weir.ErrNodeStalled, for the gateway's handoff", r.err)
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

// TestEvidenceSequenceFence: evidence older than (or as old as) the
// newest applied for its provider is refused as stale and changes
// nothing, whichever source sent either: a probe's late "available"
// does not bring back a provider a newer stall took down, and a stall's
// late "unavailable" does not take down one a newer probe found well.
func TestEvidenceSequenceFence(t *testing.T) {
	t.Parallel()
	t.Run("a probe's older answer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.open(t, "wn-a")
		s.welcome(testProvider("p", 2, "m"))
		b.stallWith(t, s, evidence(s.gen, "p", 5, edgepb.Health_HEALTH_UNAVAILABLE))
		pr := s.probe()
		late := evidence(s.gen, "p", 4, edgepb.Health_HEALTH_AVAILABLE)
		late.ProbeId = pr.ProbeId
		if got := s.decided(late); got != decisionStale {
			t.Errorf("a probe's answer older than the stall: refusal %q, want %q", got, decisionStale)
		}
		if b.health(t, "p") != "unavailable" || len(b.hub.Serving("m")) != 0 {
			t.Fatalf("an older probe answer changed health: %s, serving %+v", b.health(t, "p"), b.hub.Serving("m"))
		}
	})
	t.Run("a stall's older evidence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.open(t, "wn-a")
		s.welcome(testProvider("p", 2, "m"))
		b.stallWith(t, s, evidence(s.gen, "p", 5, edgepb.Health_HEALTH_UNAVAILABLE))
		pr := s.probe()
		well := evidence(s.gen, "p", 10, edgepb.Health_HEALTH_AVAILABLE)
		well.ProbeId = pr.ProbeId
		s.sendEvidence(well)
		s.sync()
		if b.health(t, "p") != "available" {
			t.Fatalf("a probe's newer available: health %s", b.health(t, "p"))
		}
		for _, seq := range []uint64{7, 10} {
			b.stallWith(t, s, evidence(s.gen, "p", seq, edgepb.Health_HEALTH_UNAVAILABLE))
			if b.health(t, "p") != "available" || len(b.hub.Serving("m")) != 1 {
				t.Fatalf("a stall's unavailable of seq %d after the probe's 10: health %s, serving %+v", seq, b.health(t, "p"), b.hub.Serving("m"))
			}
		}
		b.stallWith(t, s, evidence(s.gen, "p", 11, edgepb.Health_HEALTH_UNAVAILABLE))
		if b.health(t, "p") != "unavailable" {
			t.Fatal("a stall's newer unavailable was not applied")
		}
		b.wantEvidence(t, `
			weir_edge_evidence_total{decision="applied",source="probe"} 1
			weir_edge_evidence_total{decision="applied",source="stall"} 2
			weir_edge_evidence_total{decision="rejected_stale",source="stall"} 2
		`)
	})
}

// wantEvidence compares weir_edge_evidence_total with want's samples.
func (b *testBundle) wantEvidence(t *testing.T, want string) {
	t.Helper()
	const head = "# HELP weir_edge_evidence_total Edge nodes' provider health evidence, by source (stall, probe) and decision (applied, rejected_stale, rejected_binding, rejected_ambiguous, rejected_invalid).\n# TYPE weir_edge_evidence_total counter\n"
	var body strings.Builder
	for line := range strings.Lines(want) {
		if l := strings.TrimSpace(line); l != "" {
			body.WriteString(l + "\n")
		}
	}
	if err := testutil.GatherAndCompare(b.metrics.Registry, strings.NewReader(head+body.String()), "weir_edge_evidence_total"); err != nil {
		t.Error(err)
	}
}

// TestEvidenceMetric: weir_edge_evidence_total counts every piece of
// evidence once, by its source and the decision on it.
func TestEvidenceMetric(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"), testProvider("q", 2, "m"))
	b.stallWith(t, s, evidence(s.gen, "p", 5, edgepb.Health_HEALTH_UNAVAILABLE)) // stall, applied
	pr := s.probe()
	b.stallWith(t, s, evidence(s.gen, "p", 6, edgepb.Health_HEALTH_AVAILABLE)) // stall, applied
	b.stallWith(t, s, evidence(s.gen, "p", 6, edgepb.Health_HEALTH_AVAILABLE)) // stall, rejected_stale
	wrong := evidence(s.gen, "p", 7, edgepb.Health_HEALTH_UNAVAILABLE)
	wrong.Target = "http://elsewhere:8000/v1"
	b.stallWith(t, s, wrong) // stall, rejected_binding: not the run's provider
	for _, ev := range []*edgepb.Evidence{
		withProbe(evidence(s.gen, "p", 6, edgepb.Health_HEALTH_AVAILABLE), pr.ProbeId),    // ambiguous: p and q share a runtime
		withProbe(evidence(s.gen, "p", 9, edgepb.Health_HEALTH_AVAILABLE), "probe_never"), // binding
		withProbe(evidence(s.gen, "p", 0, edgepb.Health_HEALTH_AVAILABLE), pr.ProbeId),    // invalid: no seq
		withProbe(evidence(s.gen+1, "p", 10, edgepb.Health_HEALTH_AVAILABLE), pr.ProbeId), // invalid: another generation
	} {
		if s.decided(ev) == "" {
			t.Errorf("evidence %+v was applied", ev)
		}
	}
	b.wantEvidence(t, `
		weir_edge_evidence_total{decision="applied",source="stall"} 2
		weir_edge_evidence_total{decision="rejected_ambiguous",source="probe"} 1
		weir_edge_evidence_total{decision="rejected_binding",source="probe"} 1
		weir_edge_evidence_total{decision="rejected_binding",source="stall"} 1
		weir_edge_evidence_total{decision="rejected_invalid",source="probe"} 2
		weir_edge_evidence_total{decision="rejected_stale",source="stall"} 1
	`)
}

// decided sends ev and returns the code of its refusal, or "" if it was
// applied: a stale heartbeat sent after it is refused at once, so the
// wait ends either way.
func (s *testSession) decided(ev *edgepb.Evidence) string {
	s.t.Helper()
	s.sendEvidence(ev)
	if err := s.stream.Send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: &edgepb.Heartbeat{Generation: s.gen, Seq: 0}}}); err != nil {
		s.t.Fatalf("heartbeat: %v", err)
	}
	r := s.refusal()
	if r.Code == "stale_sequence" {
		return ""
	}
	if hb := s.refusal(); hb.Code != "stale_sequence" {
		s.t.Fatalf("the stale heartbeat's refusal: %q", hb.Code)
	}
	return r.Code
}

func withProbe(ev *edgepb.Evidence, probe string) *edgepb.Evidence {
	ev.ProbeId = probe
	return ev
}

// TestHealthResetsWithSession: a provider's health is its session's. A
// node that reconnects starts with every provider available, serving
// and its slots unpaused, though its last session had found one
// unavailable; evidence of the old session counts for nothing.
func TestHealthResetsWithSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	b.stallWith(t, s, evidence(s.gen, "p", 5, edgepb.Health_HEALTH_UNAVAILABLE))
	pr := s.probe()
	if b.health(t, "p") != "unavailable" {
		t.Fatal("the stall did not take the provider down")
	}
	old := s.gen
	s2 := b.open(t, "wn-a")
	s2.welcome(testProvider("p", 2, "m"))
	if s.ended() != codes.Aborted {
		t.Fatal("the old session was not superseded")
	}
	scope := weir.NodeScope("node_a", "p")
	if h, serving, st := b.health(t, "p"), b.hub.Serving("m"), b.scope(t, scope); h != "available" || len(serving) != 1 ||
		serving[0].Gen != s2.gen || st.Config.Paused || st.Orphaned {
		t.Fatalf("after a reconnect: health %s, serving %+v, slots paused %v orphaned %v; want a fresh, serving provider",
			h, serving, st.Config.Paused, st.Orphaned)
	}
	// The old session's probe, answered on the new one, is another
	// generation's: refused, and health stays the new session's.
	late := withProbe(evidence(old, "p", 6, edgepb.Health_HEALTH_UNAVAILABLE), pr.ProbeId)
	if got := s2.decided(late); got != decisionInvalid {
		t.Errorf("the old generation's evidence: refusal %q, want %q", got, decisionInvalid)
	}
	// The new session's own evidence starts its sequence afresh: a seq
	// below the old session's is new here.
	b.stallWith(t, s2, evidence(s2.gen, "p", 1, edgepb.Health_HEALTH_UNAVAILABLE))
	if b.health(t, "p") != "unavailable" {
		t.Fatal("the new session's first evidence was not applied")
	}
}
