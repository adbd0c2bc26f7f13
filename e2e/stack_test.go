package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestWaitingRequestStack guards what a request waiting in the queue
// holds in goroutine stacks: its handler's goroutine, parked in the
// engine on an 8 KiB stack, and the connection's background reader, on a
// smaller one (about 11 KiB in all). A change that deepens the calls on
// the way to the queue past the handler's stack grows it to 16 KiB, and
// by Go's adaptive starting stack size new goroutines' with it: about 20
// KiB a waiter (docs/benchmarks.md, "sync-waiters: the waiting
// goroutine's stack"). The weir binary is built without the race
// detector, whose frames are larger, so this holds under go test -race.
func TestWaitingRequestStack(t *testing.T) {
	t.Parallel()
	const n = 200
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 1\n    queue_limit: 1000"))
	_, key := g.createKey(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })
	before := stackInUse(t, g)
	waiting := make([]<-chan sent, n)
	for i := range waiting {
		waiting[i] = g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	}
	waitFor(t, 20*time.Second, fmt.Sprintf("%d requests to queue", n), func() bool { return g.scope(t, "pm:up/chat").Waiting == n })
	per := (stackInUse(t, g) - before) / n
	t.Logf("goroutine stacks a waiting request: %.1f KiB", per/1024)
	if per > 15<<10 {
		t.Errorf("a waiting request holds %.1f KiB of goroutine stacks, want at most 15 KiB: "+
			"has the way to the queue outgrown the handler's 8 KiB stack?", per/1024)
	}

	// Every waiter is served once the upstream answers.
	up.hold.Store(false)
	up.release(t)
	for i, ch := range append(waiting, first) {
		if rep := await(t, ch); rep.Status != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", i, rep.Status, rep.Body)
		}
	}
}

// stackInUse is the bytes of goroutine stacks g's process holds, from
// its /metrics.
func stackInUse(t *testing.T, g *gateway) float64 {
	t.Helper()
	v, ok := gaugeOf(t, g, "go_memstats_stack_inuse_bytes")
	if !ok {
		t.Fatal("no go_memstats_stack_inuse_bytes in /metrics")
	}
	return v
}
