package node

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge"
)

// TestAgainstTheHub registers the agent with the gateway's own side of the
// Control stream, edge.Hub: the registration the agent makes from its
// config is one the gateway takes, and its heartbeats keep the session.
func TestAgainstTheHub(t *testing.T) {
	t.Parallel()
	hub, logs, fc := hubAndAgent(t, nil, Provider{ID: "vllm", URL: "http://127.0.0.1:8000/v1", Slots: 4, LongSlots: 1, LongPromptTokens: 8000,
		Models: []Model{{Name: "llama", Runtime: "meta/llama"}}})
	ctx := t.Context()
	nodes := hub.Nodes(ctx)
	if len(nodes) != 1 || !nodes[0].Connected || len(nodes[0].Providers) != 1 {
		t.Fatalf("nodes = %+v", nodes)
	}
	p := nodes[0].Providers[0]
	if p.ID != "vllm" || p.Target != "http://127.0.0.1:8000/v1" || p.Slots != 4 || p.LongSlots != 1 || p.Orphaned {
		t.Errorf("provider = %+v", p)
	}
	// Ten heartbeat intervals, more than three heartbeat timeouts: the
	// session lives on the agent's heartbeats alone. Each step is one
	// interval, so the hub's watchdog (three) is reset in between.
	for range 10 {
		fc.Advance(time.Second)
		waitBeat(t, hub)
	}
	if nodes := hub.Nodes(ctx); !nodes[0].Connected || nodes[0].Generation != generationOf(t, logs) {
		t.Errorf("after heartbeats: %+v", nodes)
	}
}

// hubAndAgent starts an edge.Hub on a fake clock, with listen applied to
// its listener if set, and an agent serving p that dials it; it returns
// once the agent's session has started.
func hubAndAgent(t *testing.T, listen func(net.Listener) net.Listener, p Provider) (*edge.Hub, *logRecorder, *clock.Fake) {
	t.Helper()
	hub, addr, fc := startHub(t, listen)
	logs, _ := startAgent(t, addr, fc, p)
	logs.wait(t, "node: session started")
	return hub, logs, fc
}

// startHub starts an edge.Hub on a fake clock, with listen applied to
// its listener if set; it returns the Hub, its address and its clock.
func startHub(t *testing.T, listen func(net.Listener) net.Listener) (*edge.Hub, string, *clock.Fake) {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	eng := admission.NewMemory(admission.Options{Clock: fc})
	t.Cleanup(eng.Close)
	hub := edge.New(edge.Config{HeartbeatInterval: time.Second, HeartbeatTimeout: 3 * time.Second, Clock: fc}, edge.Deps{
		Engine: eng,
		Authenticate: func(_ context.Context, token string) (edge.Identity, error) {
			if token != testToken {
				return edge.Identity{}, edge.ErrUnauthenticated
			}
			return edge.Identity{ID: "node_a", Name: "gpu-a"}, nil
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if listen != nil {
		ln = listen(ln)
	}
	srv := hub.Server()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return hub, addr, fc
}

// startAgent runs an agent (a `weir node` process) with the test's token
// serving p against the Hub at addr, on the Hub's clock fc. It is
// stopped when the test ends, or by stop, which returns once it has.
func startAgent(t *testing.T, addr string, fc *clock.Fake, p Provider) (logs *logRecorder, stop func()) {
	t.Helper()
	logs = newLogRecorder()
	a, err := New(Config{Gateway: addr, Token: testToken, Version: "weir test", DrainTimeout: -1, Providers: []Provider{p}},
		Deps{Clock: fc, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = a.Run(ctx) }()
	stop = sync.OnceFunc(func() { cancel(); <-stopped })
	t.Cleanup(stop)
	return logs, stop
}

// waitBeat waits until the hub has heard from its node at the clock's
// time: the heartbeat of the step just made has been taken.
func waitBeat(t *testing.T, hub *edge.Hub) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if n := hub.Nodes(context.Background()); len(n) == 1 && n[0].LastSeenMs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub took no heartbeat")
		}
		// The hub says nothing when it takes a heartbeat: look again
		// shortly, until the deadline.
		<-time.After(time.Millisecond)
	}
}

func generationOf(t *testing.T, logs *logRecorder) uint64 {
	t.Helper()
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, r := range logs.records {
		if r.Message == "node: session started" {
			var gen uint64
			r.Attrs(func(a slog.Attr) bool {
				if a.Key == "generation" {
					gen = a.Value.Uint64()
				}
				return true
			})
			return gen
		}
	}
	t.Fatal("no session start logged")
	return 0
}
