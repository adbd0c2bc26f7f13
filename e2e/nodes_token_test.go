package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// nodeConflict is what a `weir node` process logs when the gateway
// refuses it for another process with its token (the gateway's refusal,
// in the same line, says "give this one its own token").
const nodeConflict = "give each process its own token"

// TestNodesOneTokenTwoProcesses: a second `weir node` process started
// with the token of a node that is connected is refused, says so, and
// tries again seldom, refused each time; the first keeps its session
// and generation and serves every request, and the gateway warns and
// counts the conflict.
func TestNodesOneTokenTwoProcesses(t *testing.T) {
	t.Parallel()
	rt := startUpstream(t, mock.Config{Latency: 20 * time.Millisecond})
	g := startGateway(t, "", nodeCatalog())
	_, key := g.createKey(t, "--name", "edge")
	first := newNode(t, g, "gpu-shared", rt.URL, 2)
	gen := g.serving(t, first.id, 0)

	second := &edgeNode{id: first.id, config: first.config}
	second.start(t)
	waitFor(t, 20*time.Second, "the second process to be refused", func() bool {
		return strings.Contains(second.log(), nodeConflict)
	})

	// 100 requests, 10 at a time, while the second tries again (after
	// the first's heartbeat timeout) and is refused again.
	failed := 0
	for range 10 {
		var batch []<-chan sent
		for range 10 {
			batch = append(batch, g.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}))
		}
		for _, ch := range batch {
			if rep := await(t, ch); rep.Status != http.StatusOK {
				failed++
				t.Logf("%d %s", rep.Status, rep.Body)
			}
		}
	}
	waitFor(t, 20*time.Second, "the second process to be refused again", func() bool {
		return strings.Count(second.log(), nodeConflict) >= 2
	})
	if failed > 0 {
		t.Errorf("%d of 100 requests failed; want every one served by the first process", failed)
	}
	if v := g.node(t, first.id); !v.Connected || v.Generation != gen {
		t.Errorf("the node after the second process's attempts: connected %v at generation %d; want the first's session, %d", v.Connected, v.Generation, gen)
	}
	if strings.Contains(first.log(), "session ended") {
		t.Errorf("the first process's session ended:\n%s", first.log())
	}
	select {
	case <-second.exited:
		t.Errorf("the refused process exited; want it waiting to try again:\n%s", second.log())
	default:
	}
	if n := g.logCount("edge: a second process registered with a node's token while the node's session is live; refused (each weir node needs its own token)"); n < 2 {
		t.Errorf("the gateway warned of %d refusals; want one for each attempt", n)
	}
	resp, err := client.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if v, ok := metric(string(b), "weir_edge_token_conflicts_total"); !ok || v < 2 {
		t.Errorf("weir_edge_token_conflicts_total = %v (%v); want the refusals counted", v, ok)
	}

	// The first process stops: the second takes the node over at its
	// next attempt (a minute later: not waited for here), and a third
	// started now registers at once.
	_ = first.cmd.Process.Kill()
	<-first.exited
	waitFor(t, 10*time.Second, "the first process's session to end", func() bool { return !g.node(t, first.id).Connected })
	third := &edgeNode{id: first.id, config: first.config}
	third.start(t)
	gen3 := g.serving(t, first.id, gen)
	if rep, err := g.send(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}); err != nil || rep.Status != http.StatusOK {
		t.Errorf("through the process that took over (generation %d): %v %v", gen3, rep, err)
	}
}
