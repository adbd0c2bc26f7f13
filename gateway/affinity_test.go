package gateway

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// withAffinity sets model m's affinity.
func withAffinity(a weir.Affinity) func(*weir.Catalog) {
	return func(c *weir.Catalog) { c.Models[0].Affinity = a }
}

// chatAff is b.chat with affinity key key and request id id.
func (b *testBundle) chatAff(t *testing.T, id, key string) *Call {
	c := b.chat(t)
	c.RequestID, c.Affinity = id, key
	return c
}

// fill takes every unit of platform model pm's scope, limited to limit.
func (b *testBundle) fill(t *testing.T, pm string, limit int64) admission.Lease {
	t.Helper()
	if err := b.engine.SetScope(t.Context(), weir.PlatformModelScope(pm), admission.ScopeConfig{Limit: limit}); err != nil {
		t.Fatal(err)
	}
	l, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "fill-" + pm, Candidates: []admission.Candidate{
		{Needs: []admission.Need{{Scope: weir.PlatformModelScope(pm), Amount: limit}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAffinityPrefers: a request that shares its affinity key with an
// earlier one goes first to the candidate that served it, over the
// model's own order; another key keeps the model's order; a full
// preferred candidate is passed for one with room (prefer only orders).
func TestAffinityPrefers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: withAffinity(weir.AffinityPrefer)})
	b.setExec("up", okExec)
	b.setExec("up2", okExec)
	busy := b.fill(t, "up/m", 1)
	first := b.chatAff(t, "req_a1", "p:shared")
	if err := b.svc.Serve(t.Context(), first, &recordedAnswer{}); err != nil || first.Usage.PlatformModel != "up2/m" {
		t.Fatalf("with up/m full: %v, served by %q; want up2/m", err, first.Usage.PlatformModel)
	}
	if err := b.engine.Release(t.Context(), busy.ID, admission.Owner{}); err != nil {
		t.Fatal(err)
	}
	again := b.chatAff(t, "req_a2", "p:shared")
	if err := b.svc.Serve(t.Context(), again, &recordedAnswer{}); err != nil || again.Usage.PlatformModel != "up2/m" {
		t.Fatalf("the same prefix again: %v, served by %q; want up2/m, where it went last", err, again.Usage.PlatformModel)
	}
	other := b.chatAff(t, "req_b1", "p:other")
	if err := b.svc.Serve(t.Context(), other, &recordedAnswer{}); err != nil || other.Usage.PlatformModel != "up/m" {
		t.Fatalf("another prefix: %v, served by %q; want the model's first, up/m", err, other.Usage.PlatformModel)
	}
	b.fill(t, "up2/m", 1)
	passed := b.chatAff(t, "req_a3", "p:shared")
	if err := b.svc.Serve(t.Context(), passed, &recordedAnswer{}); err != nil || passed.Usage.PlatformModel != "up/m" {
		t.Fatalf("its candidate full: %v, served by %q; want up/m, which has room", err, passed.Usage.PlatformModel)
	}
	b.metrics.mu.Lock()
	defer b.metrics.mu.Unlock()
	if got := b.metrics.affinity; got["new"] != 2 || got["hit"] != 1 || got["miss"] != 1 {
		t.Errorf("affinity results %v; want 2 new, 1 hit, 1 miss", got)
	}
}

// TestAffinityStrict: a strict affinity waits for its candidate alone
// (not served by the one with room), and takes any once it has waited
// the model's AffinityWait.
func TestAffinityStrict(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.Models[0].Affinity, c.Models[0].AffinityWait = weir.AffinityStrict, 3*time.Second
	}})
	b.setExec("up", okExec)
	b.setExec("up2", okExec)
	busy := b.fill(t, "up/m", 1)
	first := b.chatAff(t, "req_1", "k:conv")
	if err := b.svc.Serve(t.Context(), first, &recordedAnswer{}); err != nil || first.Usage.PlatformModel != "up2/m" {
		t.Fatalf("first: %v, served by %q", err, first.Usage.PlatformModel)
	}
	if err := b.engine.Release(t.Context(), busy.ID, admission.Owner{}); err != nil {
		t.Fatal(err)
	}
	full := b.fill(t, "up2/m", 1)
	waits := b.chatAff(t, "req_2", "k:conv")
	done := b.serveAsync(t.Context(), waits, &recordedAnswer{})
	b.waitEvent(t, admission.OutcomeQueued)
	if err := b.engine.Release(t.Context(), full.ID, admission.Owner{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || waits.Usage.PlatformModel != "up2/m" {
		t.Fatalf("strict, its candidate freed: %v, served by %q; want up2/m", err, waits.Usage.PlatformModel)
	}

	b.fill(t, "up2/m", 1)
	gives := b.chatAff(t, "req_3", "k:conv")
	done = b.serveAsync(t.Context(), gives, &recordedAnswer{})
	b.waitEvent(t, admission.OutcomeQueued)
	b.clock.Advance(3 * time.Second)
	if err := <-done; err != nil || gives.Usage.PlatformModel != "up/m" {
		t.Fatalf("strict, past affinity_wait: %v, served by %q; want up/m", err, gives.Usage.PlatformModel)
	}
}

// TestAffinityHitRate: under concurrent load on two candidates of equal
// priority (which the router spreads), requests sharing a prefix land on
// the candidate that served it last at least 90% of the time.
func TestAffinityHitRate(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		c.Models[0].Affinity = weir.AffinityPrefer
		c.Models[0].Candidates[0].Priority = c.Models[0].Candidates[1].Priority
	}})
	b.setExec("up", okExec)
	b.setExec("up2", okExec)
	const prefixes, each = 20, 30
	var wg sync.WaitGroup
	for p := range prefixes {
		wg.Go(func() {
			for i := range each {
				c := b.chatAff(t, fmt.Sprintf("req_%d_%d", p, i), fmt.Sprintf("p:%d", p))
				if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil {
					t.Errorf("serve: %v", err)
				}
			}
		})
	}
	wg.Wait()
	b.metrics.mu.Lock()
	defer b.metrics.mu.Unlock()
	hit, miss := b.metrics.affinity["hit"], b.metrics.affinity["miss"]
	if rate := float64(hit) / float64(hit+miss); hit+miss == 0 || rate < 0.9 {
		t.Errorf("affinity hits %d, misses %d (%.0f%%); want at least 90%%", hit, miss, 100*rate)
	}
}

// TestAffinityTableBounded: however many keys clients make up, the
// table stays within its bound, and forgets what is past its TTL.
func TestAffinityTableBounded(t *testing.T) {
	var a affinityTable
	now := time.Now()
	for i := range affinityMaxKeys + 10 {
		a.put(fmt.Sprint(i), "up/m", now, false)
	}
	if n := len(a.m); n > affinityMaxKeys {
		t.Errorf("%d keys; want at most %d", n, affinityMaxKeys)
	}
	a.put("k", "up2/m", now, false)
	if got, ok := a.get("k", now.Add(affinityTTL-time.Second)); !ok || got != "up2/m" {
		t.Errorf("within the TTL: %q %v", got, ok)
	}
	if _, ok := a.get("k", now.Add(affinityTTL)); ok {
		t.Error("remembered past the TTL")
	}
}

// TestAffinityKeepsArrivalOrder: affinity orders a request's candidates
// but never its place: with both candidates full, waiters that prefer
// either are admitted in arrival order as capacity frees, each on the
// candidate that has room.
func TestAffinityKeepsArrivalOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: withAffinity(weir.AffinityPrefer)})
	var mu sync.Mutex
	var order []string
	b.setExec("up", func(_ context.Context, c provider.Call) (*http.Response, error) {
		mu.Lock()
		order = append(order, string(c.Body))
		mu.Unlock()
		return okExec(context.Background(), c)
	})
	b.setExec("up2", okExec)
	// Teach the table: p:a went to up/m, p:b to up2/m.
	for _, x := range []struct{ key, pm, full string }{{"p:a", "up/m", "up2/m"}, {"p:b", "up2/m", "up/m"}} {
		l := b.fill(t, x.full, 1)
		c := b.chatAff(t, "teach-"+x.key, x.key)
		if err := b.svc.Serve(t.Context(), c, &recordedAnswer{}); err != nil || c.Usage.PlatformModel != x.pm {
			t.Fatalf("teach %s: %v, %q", x.key, err, c.Usage.PlatformModel)
		}
		if err := b.engine.Release(t.Context(), l.ID, admission.Owner{}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	order = nil
	mu.Unlock()
	upFull := b.fill(t, "up/m", 1)
	b.fill(t, "up2/m", 1) // stays full: everything runs on up/m, one at a time
	var want []string
	var done []<-chan error
	for i := range 6 {
		key := []string{"p:a", "p:b"}[i%2]
		c := b.chatAff(t, fmt.Sprintf("req_%d", i), key)
		c.Body = rawBody(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"%d"}]}`, i))
		want = append(want, fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"%d"}]}`, i))
		done = append(done, b.serveAsync(t.Context(), c, &recordedAnswer{}))
		b.waitEvent(t, admission.OutcomeQueued)
	}
	if err := b.engine.Release(t.Context(), upFull.ID, admission.Owner{}); err != nil {
		t.Fatal(err)
	}
	for i, ch := range done {
		if err := <-ch; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) {
		t.Errorf("served in the order\n%v\nwant arrival order\n%v", order, want)
	}
}
