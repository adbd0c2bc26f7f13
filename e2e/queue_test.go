package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// oneModel is a catalog of one chat model, "chat", on one platform model,
// "up/chat", with the given extra lines for the platform model's limits.
func oneModel(url, limits string) string {
	return fmt.Sprintf(`platforms:
  - name: up
    base_url: %s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
%s
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
`, url, limits)
}

// TestBurstQueuesInArrivalOrder sends a burst at a platform model that
// allows 2 at a time, one request after another, each sent once the one
// before it is in flight or queued. All succeed, the upstream sees them in
// the order they were sent, and never more than 2 at once: the mock itself
// allows only 2, so a third would have been answered 429.
func TestBurstQueuesInArrivalOrder(t *testing.T) {
	t.Parallel()
	const n = 6
	up := startUpstream(t, mock.Config{MaxConcurrent: 2})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 2\n    queue_limit: 10"))
	_, key := g.createKey(t, "--name", "burst")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answers := make([]<-chan sent, n)
	for i := range n {
		answers[i] = g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("burst-%d", i)})
		if i < 2 {
			waitFor(t, 5*time.Second, fmt.Sprintf("request %d to reach the upstream", i), func() bool { return len(up.Arrivals()) == i+1 })
		} else {
			waitFor(t, 5*time.Second, fmt.Sprintf("request %d to queue", i), func() bool { return g.scope(t, "pm:up/chat").Waiting == i-1 })
		}
	}
	if s := g.scope(t, "pm:up/chat"); s.InFlight != 2 || s.Waiting != n-2 {
		t.Fatalf("after the burst: in flight %d, waiting %d; want 2 and %d", s.InFlight, s.Waiting, n-2)
	}
	// Free one slot at a time: each must go to the next in arrival order.
	for done := 1; done <= n; done++ {
		up.release(t)
		want := min(done+2, n)
		waitFor(t, 5*time.Second, fmt.Sprintf("%d requests to reach the upstream", want), func() bool { return len(up.Arrivals()) >= want })
		if s := g.scope(t, "pm:up/chat"); s.InFlight > 2 {
			t.Fatalf("in flight %d on a capacity-2 platform model", s.InFlight)
		}
	}
	for i, ch := range answers {
		rep := await(t, ch)
		if rep.Status != http.StatusOK {
			t.Errorf("request %d: status %d: %s", i, rep.Status, rep.Body)
		}
		ms, err := strconv.ParseInt(rep.Header.Get("X-Weir-Queue-Wait-Ms"), 10, 64)
		switch {
		case err != nil:
			t.Errorf("request %d: X-Weir-Queue-Wait-Ms %q", i, rep.Header.Get("X-Weir-Queue-Wait-Ms"))
		case i >= 2 && ms <= 0:
			t.Errorf("request %d queued but says it waited %dms", i, ms)
		}
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("burst-%d", i))
	}
	if got := up.Arrivals(); !slices.Equal(got, want) {
		t.Errorf("upstream arrival order %v, want %v", got, want)
	}
	st := up.Mock.Stats()
	if st.PeakInFlight > 2 || st.Rejected != 0 {
		t.Errorf("mock peak in flight %d, rejected %d; want at most 2 and none", st.PeakInFlight, st.Rejected)
	}
	if st.PeakInFlight != 2 {
		t.Errorf("mock peak in flight %d, want 2 (the burst should fill the capacity)", st.PeakInFlight)
	}
}

// TestQueueTimeout: a request that cannot be admitted within its max wait
// gets 503 queue_timeout after about that long; X-Weir-Max-Wait shortens
// server.default_max_wait but never lengthens it.
func TestQueueTimeout(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "  default_max_wait: 1s", oneModel(up.URL, "    concurrency: 1"))
	_, key := g.createKey(t)

	first := g.sendAsync(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })

	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"300ms", 300 * time.Millisecond}, // shortens the 1s default
		{"0.3", 300 * time.Millisecond},   // in seconds
		{"30s", time.Second},              // never lengthens it
	} {
		start := time.Now()
		rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Header: map[string]string{"X-Weir-Max-Wait": tc.header}})
		took := time.Since(start)
		checkError(t, rep, http.StatusServiceUnavailable, "queue_timeout")
		if took < tc.want || took > tc.want+time.Second {
			t.Errorf("X-Weir-Max-Wait %s: queue_timeout after %s, want about %s", tc.header, took, tc.want)
		}
	}
	if s := g.scope(t, "pm:up/chat"); s.Waiting != 0 || s.InFlight != 1 {
		t.Errorf("after the timeout: waiting %d, in flight %d; want 0 and 1", s.Waiting, s.InFlight)
	}
	up.release(t)
	if rep := await(t, first); rep.Status != http.StatusOK {
		t.Errorf("the first request: status %d: %s", rep.Status, rep.Body)
	}
	if n := len(up.Arrivals()); n != 1 {
		t.Errorf("the upstream saw %d requests, want 1 (the timed-out one must never be sent)", n)
	}
}

// TestQueueFull: past a platform model's queue_limit a request gets 429
// queue_full with Retry-After, and the queue it found full is untouched.
func TestQueueFull(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 1\n    queue_limit: 1"))
	_, key := g.createKey(t)

	ctx := context.Background()
	first := g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: "first"})
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })
	second := g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: "second"})
	waitFor(t, 5*time.Second, "the second request to queue", func() bool { return g.scope(t, "pm:up/chat").Waiting == 1 })

	rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: "third"})
	checkError(t, rep, http.StatusTooManyRequests, "queue_full")
	if s := g.scope(t, "pm:up/chat"); s.Waiting != 1 {
		t.Errorf("after queue_full: waiting %d, want 1", s.Waiting)
	}
	up.release(t)
	up.release(t)
	for _, ch := range []<-chan sent{first, second} {
		if rep := await(t, ch); rep.Status != http.StatusOK {
			t.Errorf("status %d: %s", rep.Status, rep.Body)
		}
	}
	if got := up.Arrivals(); !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("upstream saw %v, want [first second]", got)
	}
}

// TestDisconnectWhileQueuedLeavesQueue: a client that goes away while
// queued leaves the queue at once and is never sent upstream.
func TestDisconnectWhileQueuedLeavesQueue(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 1"))
	_, key := g.createKey(t)

	first := g.sendAsync(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: "first"})
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: "gone"})
	waitFor(t, 5*time.Second, "the second request to queue", func() bool { return g.scope(t, "pm:up/chat").Waiting == 1 })
	if row := queuesRow(t, g, "pm:up/chat"); row.waiting != 1 || row.inFlight != 1 {
		t.Errorf("weir queues: in flight %d, waiting %d; want 1 and 1", row.inFlight, row.waiting)
	}

	cancel()
	took := waitFor(t, 2*time.Second, "the cancelled request to leave the queue", func() bool {
		s := g.scopes(t)
		return s["pm:up/chat"].Waiting == 0 && s["group:default"].Waiting == 0
	})
	t.Logf("the queue emptied %s after the client left", took)
	if s := <-gone; s.err == nil {
		t.Errorf("the cancelled request got an answer: %d", s.rep.Status)
	}

	up.release(t)
	if rep := await(t, first); rep.Status != http.StatusOK {
		t.Errorf("the first request: status %d: %s", rep.Status, rep.Body)
	}
	// The next request goes straight in: nothing of the cancelled one is
	// left holding capacity, and it never reached the upstream.
	up.hold.Store(false)
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: "next"}); rep.Status != http.StatusOK {
		t.Errorf("the next request: status %d: %s", rep.Status, rep.Body)
	}
	if got := up.Arrivals(); !slices.Equal(got, []string{"first", "next"}) {
		t.Errorf("upstream saw %v, want [first next]", got)
	}
	waitFor(t, 2*time.Second, "in flight to drop to 0", func() bool { return g.scope(t, "pm:up/chat").InFlight == 0 })
}

// TestDisconnectMidStreamReleasesLease: a client that goes away in the
// middle of a stream gives its lease back at once, and the upstream call
// is cancelled with it — whether the upstream is sending at the time or
// has stalled and sends nothing the gateway could fail to write.
func TestDisconnectMidStreamReleasesLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  mock.Config
	}{
		// 1,000 tokens at 20 a second: a stream that would run for 50s.
		{"sending", mock.Config{TokensPerSecond: 20, CompletionTokens: 1000}},
		// 10 tokens, then a stall of a minute after the fifth.
		{"stalled", mock.Config{TokensPerSecond: 100, CompletionTokens: 10, StallRate: 1, StallFor: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := startUpstream(t, tc.cfg)
			g := startGateway(t, "", oneModel(up.URL, "    concurrency: 1"))
			_, key := g.createKey(t)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := g.open(t, ctx, request{Path: "/v1/chat/completions", Key: key, Body: streamBody("chat")})
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			// Read until a few chunks have come through.
			buf := make([]byte, 4096)
			var got strings.Builder
			for strings.Count(got.String(), "data:") < 3 {
				n, err := resp.Body.Read(buf)
				got.Write(buf[:n])
				if err != nil {
					t.Fatalf("stream ended early: %v", err)
				}
			}
			if tc.cfg.StallRate > 0 {
				waitFor(t, 5*time.Second, "the upstream to stall", func() bool { return up.Mock.Stats().Stalled == 1 })
			}
			if s := g.scope(t, "pm:up/chat"); s.InFlight != 1 {
				t.Fatalf("mid-stream: in flight %d, want 1", s.InFlight)
			}

			cancel()
			took := waitFor(t, 2*time.Second, "the lease to come back after the client left", func() bool {
				for _, s := range g.scopes(t) {
					if s.InFlight != 0 {
						return false
					}
				}
				return true
			})
			t.Logf("the lease came back %s after the client left", took)
			if row := queuesRow(t, g, "pm:up/chat"); row.inFlight != 0 {
				t.Errorf("weir queues: in flight %d, want 0", row.inFlight)
			}
			waitFor(t, 2*time.Second, "the upstream call to be cancelled (the mock counts it as 499)", func() bool { return up.Mock.Stats().ByStatus[499] == 1 })
			if st := up.Mock.Stats(); st.InFlight != 0 || st.Requests != 1 {
				t.Errorf("the mock: in flight %d, requests %d; want 0 and 1", st.InFlight, st.Requests)
			}
		})
	}
}

// queueRow is one line of `weir queues`.
type queueRow struct {
	inFlight, waiting int
}

// queuesRow runs `weir queues` against g and reads the row of scope.
func queuesRow(t *testing.T, g *gateway, scope string) queueRow {
	t.Helper()
	out := runWeir(t, "queues", "--addr", g.URL, "--all")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == scope {
			inFlight, err1 := strconv.Atoi(f[1])
			waiting, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil {
				t.Fatalf("weir queues: cannot read the row %q", line)
			}
			return queueRow{inFlight: inFlight, waiting: waiting}
		}
	}
	t.Fatalf("weir queues shows no %s:\n%s", scope, out)
	return queueRow{}
}

// TestGroupRoundRobin: in a group with round_robin whose own limit is what
// its requests wait for, keys take turns: a key that queued three requests
// does not make a key that queued one after them wait for all three.
func TestGroupRoundRobin(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "")+`groups:
  - name: default
    concurrency: 1
    round_robin: true
`)
	_, busy := g.createKey(t, "--name", "busy")
	_, quiet := g.createKey(t, "--name", "quiet")

	var answers []<-chan sent
	send := func(key, agent string) {
		answers = append(answers, g.sendAsync(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: agent}))
	}
	send(busy, "busy-0")
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })
	for i, agent := range []string{"busy-1", "busy-2", "busy-3", "quiet-1"} {
		key := busy
		if strings.HasPrefix(agent, "quiet") {
			key = quiet
		}
		send(key, agent)
		waitFor(t, 5*time.Second, agent+" to queue", func() bool { return g.scope(t, "group:default").Waiting == i+1 })
	}
	for i := range 5 {
		up.release(t)
		if i < 4 {
			waitFor(t, 5*time.Second, "the next admission", func() bool { return len(up.Arrivals()) == i+2 })
		}
	}
	for _, ch := range answers {
		if rep := await(t, ch); rep.Status != http.StatusOK {
			t.Errorf("status %d: %s", rep.Status, rep.Body)
		}
	}
	if got, want := up.Arrivals(), []string{"busy-0", "busy-1", "quiet-1", "busy-2", "busy-3"}; !slices.Equal(got, want) {
		t.Errorf("admitted in the order %v, want %v (keys taking turns)", got, want)
	}
}
