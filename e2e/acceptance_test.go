package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestAcceptanceRunIDBurst: run ids multiply no limit. A key of
// concurrency 1 sends forty requests at once, each naming a run of its
// own, beside another key's production burst and a third key's runs, at
// a platform model of concurrency 4. The key starts its 10 runs and is
// told when to come back for more; the provider sees at most 4 of
// production and 4 of all the runs together, the key's at most 1.
func TestAcceptanceRunIDBurst(t *testing.T) {
	t.Parallel()
	const burst, prod, other = 40, 10, 6
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 4")+`groups:
  - name: default
    run_modes: [acceptance]
`)
	_, tight := g.createKey(t, "--name", "tight", "--concurrency", "1")
	_, prodKey := g.createKey(t, "--name", "production")
	_, otherKey := g.createKey(t, "--name", "other")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	replies := map[string]*reply{}
	var wg sync.WaitGroup
	send := func(key, agent, run string) {
		r := request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: agent}
		if run != "" {
			r.Header = map[string]string{"X-Weir-Run-Mode": "acceptance", "X-Weir-Run-Id": run}
		}
		ch := g.sendAsync(ctx, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := <-ch
			if s.err != nil {
				t.Errorf("%s: %v", agent, s.err)
				return
			}
			mu.Lock()
			replies[agent] = s.rep
			mu.Unlock()
		}()
	}
	answered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(replies)
	}
	for i := range burst {
		send(tight, fmt.Sprintf("tight-%d", i), fmt.Sprintf("tight-run-%d", i))
	}
	for i := range prod {
		send(prodKey, fmt.Sprintf("prod-%d", i), "")
	}
	for i := range other {
		send(otherKey, fmt.Sprintf("other-%d", i), fmt.Sprintf("other-run-%d", i))
	}
	// Settled: each request answered, upstream, or queued (every queued
	// request counts in the default group's scope).
	waitFor(t, 20*time.Second, "the burst to settle", func() bool {
		return answered()+len(up.Arrivals())+g.scope(t, "group:default").Waiting == burst+prod+other
	})
	count := func(prefix string) (n int) {
		for _, a := range up.Arrivals() {
			if strings.HasPrefix(a, prefix) {
				n++
			}
		}
		return n
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 8 {
		t.Errorf("the mock's peak: %d at once; want at most 4 of production and 4 of the runs", st.PeakInFlight)
	}
	if n := count("tight-"); n > 1 {
		t.Errorf("%d of the tight key's requests upstream at once; its concurrency is 1", n)
	}
	if p, r := count("prod-"), count("tight-")+count("other-"); p != 4 || r != 4 {
		t.Errorf("upstream at once: %d of production, %d of the runs; want 4 and 4", p, r)
	}
	mu.Lock()
	refused := 0
	for agent, rep := range replies {
		ra, _ := strconv.Atoi(rep.Header.Get("Retry-After"))
		switch {
		case !strings.HasPrefix(agent, "tight-") || rep.Status != http.StatusTooManyRequests:
			t.Errorf("%s answered %d before any upstream answer: %s", agent, rep.Status, rep.Body)
		case ra < 15*60 || ra > 16*60:
			t.Errorf("%s: Retry-After %q; want when the key's earliest run ends, about 16 minutes", agent, rep.Header.Get("Retry-After"))
		default:
			refused++
		}
	}
	mu.Unlock()
	if refused != burst-10 {
		t.Errorf("%d of the tight key's %d runs refused; want all but the 10 it may have", refused, burst)
	}

	// Let everything through: what waited is served.
	up.hold.Store(false)
	for range len(up.Arrivals()) {
		up.release(t)
	}
	wg.Wait()
	for agent, rep := range replies {
		if rep.Status != http.StatusOK && rep.Status != http.StatusTooManyRequests {
			t.Errorf("%s: %d %s", agent, rep.Status, rep.Body)
		}
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 8 {
		t.Errorf("the mock's peak: %d at once; want at most 8", st.PeakInFlight)
	}
}
