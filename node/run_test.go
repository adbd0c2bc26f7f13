package node

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// holdingRuntime makes provider rt's runtime take a POST and hold it,
// answering nothing, until its request ends: arrived gets each request,
// ended is signalled when one's context ends. GET /models answers 200.
func (b *testBundle) holdingRuntime() (arrived, ended chan struct{}) {
	arrived, ended = make(chan struct{}, 4), make(chan struct{}, 4)
	b.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			w.Write([]byte(`{"object":"list","data":[]}`))
			return
		}
		// The server sees the client go (and ends the request's context)
		// only once the body is read.
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-r.Context().Done()
		ended <- struct{}{}
	})
	return arrived, ended
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s did not happen", what)
	}
}

// startHeld offers a run to provider rt, held by holdingRuntime, and
// returns its stream once the runtime has the request.
func (b *testBundle) startHeld(t *testing.T, fs *fakeSession, arrived chan struct{}) *fakeRun {
	t.Helper()
	return b.startOffer(t, fs, arrived, &edgepb.Offer{RunId: "run-1", Provider: "rt", Path: "/chat/completions"})
}

// startOffer is startHeld with the offer o.
func (b *testBundle) startOffer(t *testing.T, fs *fakeSession, arrived chan struct{}, o *edgepb.Offer) *fakeRun {
	t.Helper()
	fs.offer(o)
	fr := b.gw.run(t)
	fr.sendBody(chatBody(false), 1<<10)
	wait(t, arrived, "the runtime's request")
	return fr
}

func TestCancelOnControl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	fr := b.startHeld(t, fs, arrived)

	// While it runs, heartbeats count it busy.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if hb := fs.next(isHeartbeat).GetHeartbeat(); hb.Slots[1].Busy == 1 {
				return
			}
		}
	}()
	b.advanceUntil(t, done, time.Second, stall/2)

	fs.send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Cancel{Cancel: &edgepb.Cancel{RunId: "run-1", Reason: "client gone"}}})
	wait(t, ended, "the runtime request's end")
	a := fr.result()
	if a.head != nil || a.end.Kind != edgepb.RunEnd_CANCELLED || !strings.Contains(a.end.Message, "client gone") {
		t.Errorf("head %v end %v; want CANCELLED with the reason", a.head, a.end)
	}
}

func TestCancelOnRunStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	fr := b.startHeld(t, fs, arrived)
	if err := fr.stream.Send(&edgepb.RunDown{Msg: &edgepb.RunDown_Cancel{Cancel: &edgepb.Cancel{RunId: "run-1", Reason: "gave up"}}}); err != nil {
		t.Fatal(err)
	}
	wait(t, ended, "the runtime request's end")
	if a := fr.result(); a.end.Kind != edgepb.RunEnd_CANCELLED {
		t.Errorf("end %v", a.end)
	}
}

func TestRunStreamEndCancelsRuntime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	fr := b.startHeld(t, fs, arrived)
	fr.done() // the gateway ends the Run stream
	wait(t, ended, "the runtime request's end")
}

func TestSessionEndCancelsRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	b.startHeld(t, fs, arrived)
	fs.drop <- status.Error(codes.Unavailable, "gateway restarting")
	wait(t, ended, "the runtime request's end")
}

func TestStalledRuntimeIsAvailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	fr := b.startHeld(t, fs, arrived)
	// The watchdog was armed before the request went out.
	b.clock.Advance(stall)
	wait(t, ended, "the stalled request's end")
	a := fr.result()
	want := &edgepb.Evidence{Generation: fs.welcome.Generation, Provider: "rt", Adapter: "openai", Target: b.rt.URL + "/v1",
		Seq: 1, Health: edgepb.Health_HEALTH_AVAILABLE, Classification: "request_stalled"}
	if a.end.Kind != edgepb.RunEnd_STALLED || a.head != nil || !evidenceEqual(a.end.Evidence, want) {
		t.Errorf("end %v; want STALLED with %v", a.end, want)
	}
}

func TestStalledStreamMidway(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ended := make(chan struct{}, 1)
	b.setHandler(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(200)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		ended <- struct{}{}
	})
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "rt", Path: "/chat/completions", Stream: true})
	fr := b.gw.run(t)
	fr.sendBody(chatBody(true), 1<<10)
	// Steps well under closeWait: the clock may move a step or two
	// after the run has sent its end, and one past closeWait would cut
	// the stream before the gateway read it.
	b.advanceUntil(t, ended, time.Second, 2*stall)
	a := fr.result()
	if a.end.Kind != edgepb.RunEnd_STALLED || string(a.body) != "data: {}\n\n" || a.end.Evidence.GetHealth() != edgepb.Health_HEALTH_AVAILABLE {
		t.Errorf("body %q end %v", a.body, a.end)
	}
}

func TestStalledDeadRuntimeIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "dead", Path: "/chat/completions"})
	fr := b.gw.run(t)
	fr.sendBody(chatBody(false), 1<<10)
	select {
	case <-b.deadConn: // the runtime has the connection and says nothing
	case <-time.After(within):
		t.Fatal("no connection to the runtime")
	}
	b.closeDead()
	ended := make(chan struct{})
	var a answer
	go func() { defer close(ended); a = fr.result() }()
	// Steps well under closeWait: the clock may move a step or two
	// after the run has sent its end, and one past closeWait would cut
	// the stream before the gateway read it.
	b.advanceUntil(t, ended, time.Second, 2*stall)
	ev := a.end.Evidence
	if a.end.Kind != edgepb.RunEnd_STALLED || ev.GetHealth() != edgepb.Health_HEALTH_UNAVAILABLE ||
		ev.Classification != "provider_unhealthy" || ev.Provider != "dead" || ev.Seq != 1 {
		t.Errorf("end %v; want STALLED, unavailable", a.end)
	}
}

func evidenceEqual(a, b *edgepb.Evidence) bool {
	return a != nil && a.Generation == b.Generation && a.Provider == b.Provider && a.Adapter == b.Adapter &&
		a.Target == b.Target && a.Seq == b.Seq && a.Health == b.Health && a.Classification == b.Classification &&
		a.ProbeId == b.ProbeId
}

func TestProbeAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fs := b.gw.session(t)
	b.closeDead()
	probe := func(id, provider string) *edgepb.Evidence {
		fs.send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Probe{Probe: &edgepb.Probe{ProbeId: id, Provider: provider}}})
		return fs.next(isEvidence).GetEvidence()
	}
	gen := fs.welcome.Generation
	mockURL := b.agent.cfg.Providers[0].URL
	deadURL := "http://" + b.dead.Addr().String() + "/v1"
	for _, want := range []*edgepb.Evidence{
		{ProbeId: "p1", Generation: gen, Provider: "mock", Adapter: "openai", Target: mockURL, Seq: 1,
			Health: edgepb.Health_HEALTH_AVAILABLE, Classification: "request_stalled"},
		{ProbeId: "p2", Generation: gen, Provider: "mock", Adapter: "openai", Target: mockURL, Seq: 2,
			Health: edgepb.Health_HEALTH_AVAILABLE, Classification: "request_stalled"},
		{ProbeId: "p3", Generation: gen, Provider: "dead", Adapter: "openai", Target: deadURL, Seq: 1,
			Health: edgepb.Health_HEALTH_UNAVAILABLE, Classification: "provider_unhealthy"},
		// rt answers /models 404: the runtime is up, but that says nothing.
		{ProbeId: "p4", Generation: gen, Provider: "rt", Adapter: "openai", Target: b.rt.URL + "/v1", Seq: 1,
			Health: edgepb.Health_HEALTH_UNKNOWN, Classification: "health_unknown"},
	} {
		if got := probe(want.ProbeId, want.Provider); !evidenceEqual(got, want) {
			t.Errorf("probe %s: %v; want %v", want.ProbeId, got, want)
		}
	}
}

func TestOfferForUnknownProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-x", Provider: "nope", Path: "/chat/completions"})
	fr := b.gw.run(t)
	a := fr.result()
	if fr.open.RunId != "run-x" || a.head != nil || a.end.Kind != edgepb.RunEnd_ERROR || !strings.Contains(a.end.Message, `"nope"`) {
		t.Errorf("open %v end %v", fr.open, a.end)
	}
}

func TestRuntimeUnreachable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.closeDead()
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "dead", Path: "/chat/completions"})
	fr := b.gw.run(t)
	fr.sendBody(chatBody(false), 1<<10)
	if a := fr.result(); a.head != nil || a.end.Kind != edgepb.RunEnd_ERROR || a.end.Message == "" {
		t.Errorf("head %v end %v; want ERROR before any head", a.head, a.end)
	}
}

func TestBodyOverBound(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxBodyBytes = 100 })
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "mock", Path: "/chat/completions"})
	fr := b.gw.run(t)
	fr.sendBody(make([]byte, 101), 50)
	if a := fr.result(); a.head != nil || a.end.Kind != edgepb.RunEnd_ERROR || !strings.Contains(a.end.Message, "100 bytes") {
		t.Errorf("end %v", a.end)
	}
	if st := b.mock.Stats(); st.Requests != 0 {
		t.Errorf("the runtime got %d requests", st.Requests)
	}
}

func TestReconnectRegistersAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.gw.session(t)
	first.drop <- status.Error(codes.Unavailable, "gateway restarting")
	_, attrs := b.logs.wait(t, "node: session ended")
	if !strings.Contains(attrs["cause"], "gateway restarting") {
		t.Errorf("session end logged %v", attrs)
	}

	got := make(chan *fakeSession, 1)
	done := make(chan struct{})
	go func() {
		fs := <-b.gw.sessions
		got <- fs
		close(done)
	}()
	b.advanceUntil(t, done, 50*time.Millisecond, time.Minute) // the backoff
	second := <-got
	second.t = t
	if second.reg == nil || len(second.reg.Providers) != 3 || second.welcome.Generation <= first.welcome.Generation {
		t.Fatalf("second session: register %v generation %d after %d", second.reg, second.welcome.Generation, first.welcome.Generation)
	}
	beat := make(chan struct{})
	var hb *edgepb.Heartbeat
	go func() { defer close(beat); hb = second.next(isHeartbeat).GetHeartbeat() }()
	b.advanceUntil(t, beat, time.Second, time.Minute)
	if hb.Generation != second.welcome.Generation || hb.Seq != 1 {
		t.Errorf("heartbeat %v; want the new generation, seq from 1", hb)
	}
}

func TestRefusalsLogged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fs := b.gw.session(t)
	fs.send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Refusal{Refusal: &edgepb.Refusal{Code: "stale_sequence", Message: "heartbeat 1 after 2"}}})
	level, attrs := b.logs.wait(t, "node: the gateway refused a message")
	if level != slog.LevelWarn || attrs["code"] != "stale_sequence" {
		t.Errorf("%v %v", level, attrs)
	}
}

func TestRegisterRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) {})
	b.gw.refuse.Store(&edgepb.Refusal{Code: "invalid_register", Message: "no"})
	// The first session may have been welcomed before the refusal was set.
	if fs := b.gw.session(t); fs.welcome != nil {
		fs.drop <- status.Error(codes.Unavailable, "again")
		done := make(chan struct{})
		go func() { b.gw.session(t); close(done) }()
		b.advanceUntil(t, done, 50*time.Millisecond, time.Minute)
	}
	level, attrs := b.logs.wait(t, "node: the gateway refused the registration")
	if level != slog.LevelError || attrs["code"] != "invalid_register" {
		t.Errorf("%v %v", level, attrs)
	}
	_, attrs = b.logs.wait(t, "node: could not open a session with the gateway; retrying")
	if attrs["backoff"] == "" || !strings.Contains(attrs["error"], "invalid_register") {
		t.Errorf("retry logged %v", attrs)
	}
}

func TestDrainOnShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DrainTimeout = time.Hour })
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	fr := b.startHeld(t, fs, arrived)
	b.stop()
	b.logs.wait(t, "node: shutting down: taking no more offers")
	if d := fs.next(func(m *edgepb.NodeMessage) bool { return m.GetDrain() != nil }).GetDrain(); d.Generation != fs.welcome.Generation {
		t.Errorf("the node's Drain names generation %d; want its session's %d", d.Generation, fs.welcome.Generation)
	}

	// No new run while draining; the session stays for the one in flight.
	fs.offer(&edgepb.Offer{RunId: "run-2", Provider: "mock", Path: "/chat/completions"})
	if a := b.gw.run(t).result(); a.end.Kind != edgepb.RunEnd_ERROR || !strings.Contains(a.end.Message, "shutting down") {
		t.Errorf("offer while draining: %v", a.end)
	}
	select {
	case <-b.stopped:
		t.Fatal("the agent stopped with a run in flight")
	default:
	}
	fs.send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Cancel{Cancel: &edgepb.Cancel{RunId: "run-1", Reason: "done"}}})
	wait(t, ended, "the runtime request's end")
	fr.result()
	wait(t, b.stopped, "the agent's stop once its runs ended")
}

// TestHeartbeatCountsLongRuns: a run offered as holding a long-context
// slot counts in its provider's long_busy as well as its busy, until it
// ends.
func TestHeartbeatCountsLongRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	arrived, ended := b.holdingRuntime()
	fs := b.gw.session(t)
	b.startOffer(t, fs, arrived, &edgepb.Offer{RunId: "run-long", Provider: "rt", Path: "/chat/completions", Long: true})
	slots := func() *edgepb.SlotSnapshot {
		t.Helper()
		var hb *edgepb.Heartbeat
		done := make(chan struct{})
		go func() {
			defer close(done)
			hb = fs.next(isHeartbeat).GetHeartbeat()
		}()
		b.advanceUntil(t, done, time.Second, time.Minute)
		for _, s := range hb.Slots {
			if s.Provider == "rt" {
				return s
			}
		}
		t.Fatalf("no slots of rt in %v", hb)
		return nil
	}
	if s := slots(); s.Busy != 1 || s.LongBusy != 1 {
		t.Errorf("with a long run in flight: busy %d, long_busy %d; want 1, 1", s.Busy, s.LongBusy)
	}
	fs.send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Cancel{Cancel: &edgepb.Cancel{RunId: "run-long", Reason: "done"}}})
	wait(t, ended, "the runtime request's end")
	deadline := time.Now().Add(within)
	for s := slots(); s.Busy != 0 || s.LongBusy != 0; s = slots() {
		if time.Now().After(deadline) {
			t.Fatalf("after the run ended: busy %d, long_busy %d; want 0, 0", s.Busy, s.LongBusy)
		}
	}
}

// TestInlineBody: a body the gateway sent in its Offer is run without a
// body on the Run stream; one over the node's bound is refused.
func TestInlineBody(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.MaxBodyBytes = 1 << 10 })
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "mock", Path: "/chat/completions", BodyInline: true, Body: chatBody(false)})
	fr := b.gw.run(t)
	if a := fr.result(); a.end.Kind != edgepb.RunEnd_COMPLETE || a.head.Status != 200 || !strings.Contains(string(a.body), "chat.completion") {
		t.Fatalf("inline body: head %v end %v body %q", a.head, a.end, a.body)
	}
	fs.offer(&edgepb.Offer{RunId: "run-2", Provider: "mock", Path: "/chat/completions", BodyInline: true, Body: make([]byte, 2<<10)})
	fr = b.gw.run(t)
	if a := fr.result(); a.head != nil || a.end.Kind != edgepb.RunEnd_ERROR || !strings.Contains(a.end.Message, "1024 bytes") {
		t.Errorf("an inline body over the bound: end %v", a.end)
	}
	if st := b.mock.Stats(); st.Requests != 1 {
		t.Errorf("the runtime got %d requests, want the one within the bound", st.Requests)
	}
}
