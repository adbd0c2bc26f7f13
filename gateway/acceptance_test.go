package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// copyOfUp is the acceptance copy of platform model up/m's scope, by the
// name docs/api.md gives it.
const copyOfUp = "acceptance:pm:up/m"

// gatedUpstream is an executor whose calls wait for gate to close,
// counting the calls in flight and their peak; arrived gets one value per
// call.
type gatedUpstream struct {
	gate     chan struct{}
	arrived  chan string // each call's User-Agent
	inFlight atomic.Int32
	peak     atomic.Int32
}

func newGatedUpstream() *gatedUpstream {
	return &gatedUpstream{gate: make(chan struct{}), arrived: make(chan string, 1024)}
}

func (u *gatedUpstream) Do(ctx context.Context, c provider.Call) (*http.Response, error) {
	n := u.inFlight.Add(1)
	for p := u.peak.Load(); n > p && !u.peak.CompareAndSwap(p, n); p = u.peak.Load() {
	}
	u.arrived <- c.Header.Get("User-Agent")
	select {
	case <-u.gate:
	case <-ctx.Done():
	}
	u.inFlight.Add(-1)
	resp, _ := answerWith("application/json", strings.NewReader(okBody))
	return resp, nil
}

// served collects the ends of requests served in the background.
type served chan error

// serve serves c in the background; its end goes to ends.
func (b *testBundle) serve(t *testing.T, ends served, c *Call) {
	go func() { ends <- b.svc.Serve(t.Context(), c, &recordedAnswer{}) }()
}

// wait waits for n requests' ends and fails the test for each error.
func (ends served) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := <-ends; err != nil {
			t.Errorf("a request failed: %v", err)
		}
	}
}

// settle waits until each of n requests sent is either at u or queued
// in the engine, and returns those at u, in order of arrival. A request
// that ends meanwhile fails the test.
func (b *testBundle) settle(t *testing.T, u *gatedUpstream, ends served, n int) []string {
	t.Helper()
	var at []string
	queued := 0
	for len(at)+queued < n {
		select {
		case who := <-u.arrived:
			at = append(at, who)
		case e := <-b.events:
			if e.Outcome == admission.OutcomeQueued {
				queued++
			}
		case err := <-ends:
			t.Fatalf("a request ended before the upstream let any go: %v", err)
		case <-t.Context().Done():
			t.Fatalf("%d of %d requests upstream or queued", len(at)+queued, n)
		}
	}
	return at
}

// runCall is a chat Call of key keyID in the acceptance run run (or in
// production if run is ""), named name (its request id and User-Agent).
func (b *testBundle) runCall(t *testing.T, keyID, run, name string) *Call {
	t.Helper()
	c := b.chat(t)
	if err := b.svc.EnsureKeyScope(t.Context(), weir.APIKey{ID: keyID}); err != nil {
		t.Fatal(err)
	}
	c.KeyID, c.RequestID = keyID, name
	c.Header = http.Header{"User-Agent": {name}}
	if run != "" {
		c.RunMode, c.RunID = weir.RunAcceptance, run
	}
	return c
}

// TestAcceptanceRunsKeepTheKeysLimit: requests of as many runs as a key
// may have, the key of concurrency 1, count against the key's own scope,
// as production's do: one of them is upstream at a time, the others wait
// for it.
func TestAcceptanceRunsKeepTheKeysLimit(t *testing.T) {
	t.Parallel()
	const runs = maxRunsPerKey
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { onlyUp(c); c.PlatformModels[0].Limits.Concurrency = 4 }})
	if err := b.svc.EnsureKeyScope(t.Context(), weir.APIKey{ID: "key_1", Limits: weir.Limits{Concurrency: 1, RPM: 1000}}); err != nil {
		t.Fatal(err)
	}
	up := newGatedUpstream()
	b.setExec("up", up.Do)
	ends := make(served, runs)
	for i := range runs {
		b.serve(t, ends, b.runCall(t, "key_1", fmt.Sprintf("run-%d", i), fmt.Sprintf("req-%d", i)))
	}
	if at := b.settle(t, up, ends, runs); len(at) != 1 {
		t.Errorf("%d requests of %d runs upstream at once; the key allows 1", len(at), runs)
	}
	if st := b.scope(t, weir.KeyScope("key_1")); st.Used != 1 || st.Queued != runs-1 {
		t.Errorf("the key's scope: %d used, %d queued; want 1 and %d", st.Used, st.Queued, runs-1)
	}
	close(up.gate)
	ends.wait(t, runs)
	if p := up.peak.Load(); p != 1 {
		t.Errorf("the upstream's peak: %d at once; the key allows 1", p)
	}
}

// TestAcceptanceRunsShareOneCopy: at a platform model of concurrency 4,
// production and twenty runs together hold at most 4 + 4: production
// its scope, every run together the one acceptance copy.
func TestAcceptanceRunsShareOneCopy(t *testing.T) {
	t.Parallel()
	const prod, runs = 10, 20
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { onlyUp(c); c.PlatformModels[0].Limits.Concurrency = 4 }})
	up := newGatedUpstream()
	b.setExec("up", up.Do)
	ends := make(served, prod+runs)
	for i := range prod {
		b.serve(t, ends, b.runCall(t, "key_1", "", fmt.Sprintf("prod-%d", i)))
	}
	for i := range runs {
		b.serve(t, ends, b.runCall(t, fmt.Sprintf("key_%d", i%3), fmt.Sprintf("run-%d", i), fmt.Sprintf("run-%d", i)))
	}
	at := b.settle(t, up, ends, prod+runs)
	var ofProd, ofRuns int
	for _, who := range at {
		if strings.HasPrefix(who, "prod-") {
			ofProd++
		} else {
			ofRuns++
		}
	}
	if ofProd != 4 || ofRuns != 4 {
		t.Errorf("upstream at once: %d of production, %d of the runs; want 4 and 4", ofProd, ofRuns)
	}
	if st := b.scope(t, weir.PlatformModelScope("up/m")); st.Used != 4 || st.Queued != prod-4 {
		t.Errorf("production's scope: %d used, %d queued; want 4 and %d", st.Used, st.Queued, prod-4)
	}
	if st := b.scope(t, copyOfUp); st.Used != 4 || st.Queued != runs-4 || st.Config.Limit != 4 {
		t.Errorf("the acceptance copy: %d of %d used, %d queued; want 4 of 4 and %d", st.Used, st.Config.Limit, st.Queued, runs-4)
	}
	close(up.gate)
	ends.wait(t, prod+runs)
	if p := up.peak.Load(); p > 8 {
		t.Errorf("the upstream's peak: %d at once; want at most 4 + 4", p)
	}
}

// TestAcceptanceRunIDsBuyNoTurns: in the acceptance copy keys take
// turns, whatever runs they name: a key whose requests queued first in
// four runs goes ahead of another key's request once, not four times.
func TestAcceptanceRunIDsBuyNoTurns(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { onlyUp(c); c.PlatformModels[0].Limits.Concurrency = 1 }})
	up := newGatedUpstream()
	b.setExec("up", up.Do)
	ends := make(served, 6)
	send := func(key, run string) { b.serve(t, ends, b.runCall(t, key, run, run)) }
	send("key_a", "a-0")
	if at := b.settle(t, up, ends, 1); len(at) != 1 {
		t.Fatalf("the first request did not reach the upstream: %v", at)
	}
	for _, r := range []struct{ key, run string }{{"key_a", "a-1"}, {"key_a", "a-2"}, {"key_a", "a-3"}, {"key_a", "a-4"}, {"key_b", "b-0"}} {
		send(r.key, r.run)
		if at := b.settle(t, up, ends, 1); len(at) != 0 {
			t.Fatalf("%s reached the upstream beside a-0; the platform model allows 1", r.run)
		}
	}
	// One at a time: each call, let go, makes room for the next.
	var order []string
	for range 5 {
		up.gate <- struct{}{}
		order = append(order, <-up.arrived)
	}
	close(up.gate)
	ends.wait(t, 6)
	// Turns by key: a-1, then key_b's; by run, b-0 would come last.
	if order[1] != "b-0" {
		t.Errorf("admitted after the first, in order: %v; want key_b's b-0 second, its key's turn", order)
	}
}

// TestAcceptanceRunCapPerKey: a key may have maxRunsPerKey runs alive;
// one more gets 429 with a Retry-After of when its earliest run ends,
// while another key starts runs as before. Entering a run again keeps it
// alive; once the earliest has ended, a new run starts.
func TestAcceptanceRunCapPerKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	b.setExec("up", okJSON(okBody))
	serve := func(key, run string) error {
		return b.svc.Serve(t.Context(), b.runCall(t, key, run, key+"-"+run), &recordedAnswer{})
	}
	t0 := b.clock.Now()
	if err := serve("key_1", "run-0"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	for i := 1; i < maxRunsPerKey; i++ {
		if err := serve("key_1", fmt.Sprintf("run-%d", i)); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	b.clock.Advance(time.Minute)
	err := serve("key_1", "one-more")
	var e *Error
	if !errors.As(err, &e) || e.Category != ErrRateLimited {
		t.Fatalf("a run past the key's cap: %v; want rate_limited", err)
	}
	if want := t0.Add(runIdle).Sub(b.clock.Now()); e.RetryAfter != want {
		t.Errorf("Retry-After %s; want %s, when the key's earliest run ends", e.RetryAfter, want)
	}
	if err := serve("key_2", "run-0"); err != nil {
		t.Errorf("another key's run: %v", err)
	}
	// run-0 entered again lives on; the earliest now is run-1.
	if err := serve("key_1", "run-0"); err != nil {
		t.Fatalf("a run alive, entered again: %v", err)
	}
	b.clock.Set(t0.Add(time.Minute + runIdle - time.Second))
	if err := serve("key_1", "one-more"); !errors.As(err, &e) || e.RetryAfter != time.Second {
		t.Fatalf("a second before run-1 ends: %v; want rate_limited, Retry-After 1s", err)
	}
	b.clock.Advance(time.Second)
	if err := serve("key_1", "one-more"); err != nil {
		t.Errorf("a run once the earliest has ended: %v", err)
	}
}

// TestAcceptanceRunCapOverall: the gateway has at most maxRuns runs
// alive; past them, a key with none gets 429 with a Retry-After of when
// the earliest run ends.
func TestAcceptanceRunCapOverall(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: onlyUp})
	t0 := b.clock.Now()
	for i := range maxRuns {
		if err := b.svc.EnterRun(fmt.Sprintf("key_%d", i/maxRunsPerKey), "run"+fmt.Sprint(i%maxRunsPerKey)); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if i == 0 {
			b.clock.Advance(time.Second)
		}
	}
	var e *Error
	if err := b.svc.EnterRun("key_new", "run"); !errors.As(err, &e) || e.Category != ErrRateLimited || e.RetryAfter != t0.Add(runIdle).Sub(b.clock.Now()) {
		t.Fatalf("a run past the gateway's cap: %v; want rate_limited until the earliest run ends", err)
	}
	b.clock.Set(t0.Add(runIdle))
	if err := b.svc.EnterRun("key_new", "run"); err != nil {
		t.Errorf("a run once the earliest has ended: %v", err)
	}
}

// TestAcceptanceCopyFollowsPlatformModel: a platform model's acceptance
// copy takes its limits with the runs' queue and wait, follows a reload,
// a pause and an operator's limit, may have an operator's limit of its
// own, and leaves the catalog with its platform model.
func TestAcceptanceCopyFollowsPlatformModel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { c.PlatformModels[0].Limits.Concurrency = 2 }})
	ctx := t.Context()
	if err := b.svc.SetScopeLimit(ctx, copyOfUp, 1); err == nil {
		t.Error("the limit of a copy no run has made was set")
	}
	if err := b.svc.ensureAcceptanceScopes(ctx, []string{"up/m", "up2/m"}); err != nil {
		t.Fatal(err)
	}
	copy2 := weir.AcceptanceScope(weir.PlatformModelScope("up2/m"))
	if st := b.scope(t, copyOfUp); st.Config.Limit != 2 || st.Config.QueueLimit != weir.AcceptanceQueueLimit || st.Config.MaxWait != weir.AcceptanceMaxWait || !st.Config.RoundRobin {
		t.Fatalf("the copy of up/m: %+v", st.Config)
	}

	cat := b.catalog()
	onlyUp(&cat)
	cat.PlatformModels[0].Limits.Concurrency = 5
	if err := b.svc.Apply(ctx, cat, ""); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, copyOfUp); st.Config.Limit != 5 {
		t.Errorf("after a reload raising up/m to 5, the copy's limit is %d", st.Config.Limit)
	}
	if _, err := b.engine.Scope(ctx, copy2); err == nil {
		t.Errorf("the copy of up2/m outlived it")
	}

	b.svc.pauseUpstream(b.svc.deps.Logger, "up/m", time.Minute)
	if st := b.scope(t, copyOfUp); !st.Config.Paused {
		t.Error("the copy admits while its upstream asked for a pause")
	}
	b.clock.Advance(time.Minute)
	if st := b.scope(t, copyOfUp); st.Config.Paused {
		t.Error("the copy stays paused after its upstream's pause")
	}

	if err := b.svc.SetScopeLimit(ctx, weir.PlatformModelScope("up/m"), 3); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, copyOfUp); st.Config.Limit != 3 {
		t.Errorf("after an operator set up/m to 3, the copy's limit is %d", st.Config.Limit)
	}
	if err := b.svc.SetScopeLimit(ctx, copyOfUp, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.SetScopeLimit(ctx, weir.PlatformModelScope("up/m"), 4); err != nil {
		t.Fatal(err)
	}
	if cp, prod := b.scope(t, copyOfUp), b.scope(t, weir.PlatformModelScope("up/m")); cp.Config.Limit != 1 || prod.Config.Limit != 4 || cp.Config.QueueLimit != weir.AcceptanceQueueLimit {
		t.Errorf("the copy set to 1 and up/m to 4: copy %+v, up/m limit %d", cp.Config, prod.Config.Limit)
	}
}
