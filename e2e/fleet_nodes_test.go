package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestFleetNodeServesEveryReplica: a node that dialed one replica of a
// fleet serves the requests of the other too, relayed to the replica it
// dialed; its slots hold across both (the runtime never sees more than
// them at once); killed mid-stream, the streams relayed through the
// other replica end with an error event and the request waiting there
// for its slots fails at once with no_candidate.
func TestFleetNodeServesEveryReplica(t *testing.T) {
	t.Parallel()
	const slots = 2
	rt := startUpstream(t, mock.Config{Latency: 100 * time.Millisecond})
	f := startFleet(t, 2, nodeCatalog())
	f.ready(t, "r0", "r1")
	r0, r1 := f.rs["r0"], f.rs["r1"]
	_, key := r0.createKey(t, "--name", "edge")
	n := newNode(t, r0, "gpu-fleet", rt.URL, slots)
	r0.serving(t, n.id, 0)
	// r1 learns of the node from the fleet's board, and shows it.
	waitFor(t, 10*time.Second, "r1 to serve the node's model", func() bool {
		return r1.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}).Status == http.StatusOK
	})
	if v := r1.node(t, n.id); !v.Connected || v.Replica != "r0" || len(v.Providers) != 1 {
		t.Errorf("r1's /admin/nodes shows the node as %+v; want it connected to r0", v)
	}
	if v := r0.node(t, n.id); v.Replica != "" {
		t.Errorf("r0 shows its own node as another replica's: %+v", v)
	}

	var wg sync.WaitGroup
	statuses := make([]int, 12)
	for i := range statuses {
		g := []*gateway{r0, r1}[i%2]
		wg.Go(func() {
			statuses[i] = g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}).Status
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d (through r%d): %d", i, i%2, s)
		}
	}
	if st := rt.Mock.Stats(); st.PeakInFlight > slots {
		t.Errorf("the runtime saw %d at once; the node has %d slots", st.PeakInFlight, slots)
	}

	// Slow streams fill both slots through r1, a third request waits.
	if err := rt.Mock.Update(func(c *mock.Config) { c.Latency, c.TokensPerSecond, c.CompletionTokens = 0, 5, 200 }); err != nil {
		t.Fatal(err)
	}
	streams := []<-chan sent{
		r1.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: streamBody("local")}),
		r1.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: streamBody("local")}),
	}
	waitFor(t, 10*time.Second, "both streams on the runtime", func() bool { return rt.Mock.Stats().InFlight == slots })
	waiting := r1.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")})
	waitFor(t, 10*time.Second, "a request queued on the node's slots", func() bool {
		p := r0.node(t, n.id).Providers
		return len(p) == 1 && p[0].Queued == 1
	})
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for i, s := range streams {
		rep := await(t, s)
		if rep.Status != http.StatusOK || !strings.Contains(string(rep.Body), `"error":{`) {
			t.Errorf("stream %d, cut: %d, ending %q; want its events, then an error event", i, rep.Status, tail(rep.Body))
		}
	}
	checkError(t, await(t, waiting), http.StatusServiceUnavailable, "no_candidate")
	if took := time.Since(killed); took > nodeGone+2*time.Second {
		t.Errorf("the answers took %s after the kill; want about at once", took)
	}
	if st := rt.Mock.Stats(); st.PeakInFlight > slots {
		t.Errorf("the runtime saw %d at once; the node has %d slots", st.PeakInFlight, slots)
	}
}

// TestFleetRelayToAFrozenReplica: a stream relayed through r1 to a node
// on r0 ends with an error event once r0 is frozen (SIGSTOP), within the
// relay's probes of r0 (three silent rounds of 2s, after the round that
// still saw the stream's bytes), not its idle bound (130s).
func TestFleetRelayToAFrozenReplica(t *testing.T) {
	t.Parallel()
	rt := startUpstream(t, mock.Config{TokensPerSecond: 5, CompletionTokens: 200})
	f := startFleet(t, 2, nodeCatalog())
	f.ready(t, "r0", "r1")
	r0, r1 := f.rs["r0"], f.rs["r1"]
	_, key := r0.createKey(t, "--name", "edge")
	n := newNode(t, r0, "gpu-frozen", rt.URL, 1)
	r0.serving(t, n.id, 0)
	waitFor(t, 10*time.Second, "r1 to know the node", func() bool { return r1.node(t, n.id).Connected })

	// The stream begins: its first event reaches the client.
	resp := r1.open(t, t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: streamBody("local")})
	defer resp.Body.Close()
	first := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data:" {
		t.Fatalf("the stream's start: %d %q, %v", resp.StatusCode, first, err)
	}
	if err := r0.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r0.cmd.Process.Signal(syscall.SIGCONT) })
	frozen := time.Now()
	rest, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(rest), `"error":{`) {
		t.Errorf("the stream through the frozen replica: %d, ending %q (%v); want its events, then an error event", resp.StatusCode, tail(rest), err)
	}
	took := time.Since(frozen)
	t.Logf("the stream ended %s after its replica froze", took.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("the stream ended %s after its replica froze; want within the probes' rounds (about 10s)", took)
	}
}

// TestFleetNodeJoinsAWaiterOfAnotherReplica: a request waiting at the
// replica that does not lead, for a platform model whose one slot is
// held, is admitted on an edge node that connects (to the leader's
// replica) after it arrived, and served there, long before the slot
// frees (the request holding it ends with the test): the leader resolves
// the waiter anew from what its replica sent.
func TestFleetNodeJoinsAWaiterOfAnotherReplica(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: 25 * time.Second})
	rt := startUpstream(t, mock.Config{})
	catalog := nodeCatalog() + fmt.Sprintf(`    candidates:
      - platform_model: up/local
platforms:
  - name: up
    base_url: %s
platform_models:
  - name: up/local
    platform: up
    upstream: gpt-4o-mini
    concurrency: 1
`, up.URL)
	f := startFleet(t, 2, catalog)
	f.ready(t, "r0", "r1")
	lead := f.leader(t, 10*time.Second)
	follow := map[string]string{"r0": "r1", "r1": "r0"}[lead]
	l, w := f.rs[lead], f.rs[follow]
	_, key := l.createKey(t, "--name", "edge")

	l.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")})
	waitFor(t, 10*time.Second, "the platform model's slot held", func() bool { return up.Mock.Stats().InFlight == 1 })
	start := time.Now()
	waiting := w.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")})
	waitFor(t, 10*time.Second, "the request queued at "+follow, func() bool { return l.scope(t, "pm:up/local").Waiting == 1 })

	n := newNode(t, l, "gpu-late", rt.URL, 1)
	l.serving(t, n.id, 0)
	rep := await(t, waiting)
	if rep.Status != http.StatusOK {
		t.Fatalf("the waiting request: %d %s", rep.Status, rep.Body)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the waiting request was served %s after it arrived; want soon after the node connected, not once the slot freed", took)
	}
	if st := rt.Mock.Stats(); st.Requests != 1 {
		t.Errorf("the node's runtime served %d requests; want the waiting one", st.Requests)
	}
}
