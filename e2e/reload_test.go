package e2e

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestReloadLowersLimit: SIGHUP with a platform model's concurrency
// lowered from 4 to 2 while 4 requests run and 2 wait. The 4 all finish;
// nothing is admitted until fewer than 2 are in flight, and from then on
// never more than 2 are.
func TestReloadLowersLimit(t *testing.T) {
	t.Parallel()
	const pm = "pm:up/chat"
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 4"))
	_, key := g.createKey(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var answers []<-chan sent
	for i := range 6 {
		answers = append(answers, g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("r%d", i)}))
	}
	waitFor(t, 5*time.Second, "4 requests in flight and 2 waiting", func() bool {
		s := g.scope(t, pm)
		return s.InFlight == 4 && s.Waiting == 2 && len(up.Arrivals()) == 4
	})

	g.reload(t, oneModel(up.URL, "    concurrency: 2"))
	if s := g.scope(t, pm); s.Limit != 2 || s.InFlight != 4 || s.Waiting != 2 {
		t.Fatalf("after the reload: limit %d, in flight %d, waiting %d; want 2, 4 (nothing revoked), 2", s.Limit, s.InFlight, s.Waiting)
	}

	// 4 → 3 → 2 in flight: still not below the new limit, nothing admitted.
	for _, want := range []int64{3, 2} {
		up.release(t)
		waitFor(t, 5*time.Second, fmt.Sprintf("in flight to drop to %d", want), func() bool { return g.scope(t, pm).InFlight == want })
		if s := g.scope(t, pm); s.Waiting != 2 || len(up.Arrivals()) != 4 {
			t.Fatalf("at %d in flight (limit 2): waiting %d, upstream saw %d; want 2 and 4 (no admission at or above the limit)",
				want, s.Waiting, len(up.Arrivals()))
		}
	}
	// Drained to the new limit: from here the mock must never see more than 2.
	up.Mock.ResetStats()

	// 2 → 1: one waiter takes the freed slot, and only one.
	up.release(t)
	waitFor(t, 5*time.Second, "the first waiter to be admitted", func() bool { return len(up.Arrivals()) == 5 })
	if s := g.scope(t, pm); s.InFlight != 2 || s.Waiting != 1 {
		t.Fatalf("after one release below the limit: in flight %d, waiting %d; want 2 and 1", s.InFlight, s.Waiting)
	}
	up.release(t)
	waitFor(t, 5*time.Second, "the second waiter to be admitted", func() bool { return len(up.Arrivals()) == 6 })
	if s := g.scope(t, pm); s.InFlight != 2 || s.Waiting != 0 {
		t.Fatalf("after the second waiter's admission: in flight %d, waiting %d; want 2 and 0", s.InFlight, s.Waiting)
	}
	up.release(t)
	up.release(t)
	for i, ch := range answers {
		if rep := await(t, ch); rep.Status != http.StatusOK {
			t.Errorf("request %d: status %d: %s", i, rep.Status, rep.Body)
		}
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 2 {
		t.Errorf("the mock had %d in flight after usage drained to the new limit of 2", st.PeakInFlight)
	}
	waitFor(t, 2*time.Second, "in flight to drop to 0", func() bool { return g.scope(t, pm).InFlight == 0 })
}

// TestReloadRemovingPlatformModel: a reload that takes a platform model out
// of the catalog moves the requests waiting only for it to the model's new
// candidate, where they are served; the request running on it finishes,
// its scope retired after it, and new requests go to the new candidate
// too.
func TestReloadRemovingPlatformModel(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	catalog := func(pm string) string {
		return fmt.Sprintf(`platforms:
  - name: up
    base_url: %s
platform_models:
  - name: %s
    platform: up
    upstream: gpt-4o-mini
    concurrency: 1
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: %s
`, up.URL, pm, pm)
	}
	g := startGateway(t, "", catalog("up/old"))
	_, key := g.createKey(t)

	ctx := context.Background()
	running := g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	waitFor(t, 5*time.Second, "the first request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })
	waiting := g.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	waitFor(t, 5*time.Second, "the second request to queue", func() bool { return g.scope(t, "pm:up/old").Waiting == 1 })

	g.reload(t, catalog("up/new"))
	waitFor(t, 5*time.Second, "the waiting request to reach the upstream through up/new", func() bool { return len(up.Arrivals()) == 2 })
	// The removed platform model's scope is held while the request
	// running on it holds a lease there (docs/operations.md), and retired
	// once it ends.
	if s, ok := g.scopes(t)["pm:up/old"]; !ok || s.InFlight != 1 || s.Waiting != 0 {
		t.Errorf("while its request runs, the removed scope pm:up/old: shown %v, in flight %d, waiting %d; want shown, 1 and 0", ok, s.InFlight, s.Waiting)
	}

	up.release(t)
	up.release(t)
	if rep := await(t, running); rep.Status != http.StatusOK {
		t.Errorf("the request running across the reload: status %d: %s", rep.Status, rep.Body)
	}
	if rep := await(t, waiting); rep.Status != http.StatusOK {
		t.Errorf("the request waiting across the reload: status %d: %s", rep.Status, rep.Body)
	}
	waitFor(t, 5*time.Second, "the removed scope pm:up/old to retire", func() bool {
		_, ok := g.scopes(t)["pm:up/old"]
		return !ok
	})
	up.hold.Store(false)
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")}); rep.Status != http.StatusOK {
		t.Errorf("after the reload: status %d: %s", rep.Status, rep.Body)
	}
	if n := len(up.Arrivals()); n != 3 {
		t.Errorf("the upstream saw %d requests, want 3", n)
	}
	for name, s := range g.scopes(t) {
		if s.InFlight != 0 || s.Waiting != 0 {
			t.Errorf("at the end %s: in flight %d, waiting %d", name, s.InFlight, s.Waiting)
		}
	}
}

// TestReloadKeepsCatalogOnBadConfig: a SIGHUP with a config that does not
// validate is logged and changes nothing; the gateway keeps serving the
// catalog it had.
func TestReloadKeepsCatalogOnBadConfig(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 3"))
	_, key := g.createKey(t)

	g.writeConfig(t, oneModel(up.URL, "    concurrency: 1\n    no_such_field: 1"))
	failed := g.logCount("reload failed; keeping the running catalog")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the gateway to log the failed reload", func() bool {
		return g.logCount("reload failed; keeping the running catalog") > failed
	})
	if s := g.scope(t, "pm:up/chat"); s.Limit != 3 {
		t.Errorf("after a failed reload the limit is %d, want the old 3", s.Limit)
	}
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")}); rep.Status != http.StatusOK {
		t.Errorf("after a failed reload: status %d: %s", rep.Status, rep.Body)
	}
}
