package webhook_test

import (
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/weir-gateway/weir/webhook"
)

func TestLimiterBoundsEachTenant(t *testing.T) {
	t.Parallel()
	l := webhook.NewLimiter(webhook.LimiterConfig{PerTenant: 3, Shared: 100})
	for i := range 3 {
		if !l.TryAcquire("a") {
			t.Fatalf("acquire %d of a's 3 refused", i+1)
		}
	}
	if l.TryAcquire("a") {
		t.Fatal("a took a fourth slot")
	}
	if !l.TryAcquire("b") {
		t.Fatal("b was refused while a is at its bound")
	}
	l.Release("a")
	if !l.TryAcquire("a") {
		t.Fatal("a was refused after releasing a slot")
	}
	if got := l.InFlight("a"); got != 3 {
		t.Errorf("a has %d in flight, want 3", got)
	}
	for range 3 {
		l.Release("a")
	}
	l.Release("b")
	if l.InFlight("a") != 0 || l.InFlight("b") != 0 {
		t.Errorf("in flight after every release: a %d, b %d", l.InFlight("a"), l.InFlight("b"))
	}
	if webhook.NewLimiter(webhook.LimiterConfig{}).PerTenant() != 1 {
		t.Error("a bound below 1 is not 1")
	}
}

// TestLimiterSharedBound: once the deliveries beyond each tenant's first
// reach Shared, tenants with one in flight are refused and a tenant with
// none is not, however many tenants are busy.
func TestLimiterSharedBound(t *testing.T) {
	t.Parallel()
	l := webhook.NewLimiter(webhook.LimiterConfig{PerTenant: 8, Shared: 10})
	took := 0
	for _, tenant := range []string{"a", "b", "c"} {
		for l.TryAcquire(tenant) {
			took++
		}
	}
	// a: 8 (7 beyond its first), b: 4 (3 beyond), c: 1.
	if took != 13 || l.InFlight("a") != 8 || l.InFlight("b") != 4 || l.InFlight("c") != 1 {
		t.Fatalf("took %d: a %d, b %d, c %d; want 13: 8, 4, 1", took, l.InFlight("a"), l.InFlight("b"), l.InFlight("c"))
	}
	for i := range 50 {
		if tenant := "fresh" + strconv.Itoa(i); !l.TryAcquire(tenant) {
			t.Fatalf("%s, with nothing in flight, was refused", tenant)
		}
	}
	l.Release("a")
	if !l.TryAcquire("c") {
		t.Error("c was refused a slot beyond its first after a released one")
	}
	if l.TryAcquire("b") {
		t.Error("b took a slot beyond the shared bound")
	}
}

// TestLimiterConcurrent: however many goroutines try at once, no tenant
// is ever over its bound, nor the tenants together over theirs.
func TestLimiterConcurrent(t *testing.T) {
	t.Parallel()
	const perTenant, shared, tenants = 4, 5, 3
	l := webhook.NewLimiter(webhook.LimiterConfig{PerTenant: perTenant, Shared: shared})
	var (
		mu        sync.Mutex
		held      = map[string]int{}
		peak      = map[string]int{}
		total     int
		peakTotal int
		wg        sync.WaitGroup
	)
	for i := range 64 {
		tenant := strconv.Itoa(i % tenants)
		wg.Go(func() {
			for range 200 {
				if !l.TryAcquire(tenant) {
					continue
				}
				mu.Lock()
				held[tenant]++
				total++
				peak[tenant] = max(peak[tenant], held[tenant])
				peakTotal = max(peakTotal, total)
				mu.Unlock()
				runtime.Gosched() // hold the slot while others try
				mu.Lock()
				held[tenant]--
				total--
				mu.Unlock()
				l.Release(tenant)
			}
		})
	}
	wg.Wait()
	for tenant, p := range peak {
		if p > perTenant {
			t.Errorf("tenant %s had %d in flight, bound %d", tenant, p, perTenant)
		}
	}
	if peakTotal > tenants+shared {
		t.Errorf("%d in flight together, bound %d", peakTotal, tenants+shared)
	}
	if peakTotal < 2 {
		t.Errorf("at most %d in flight at once: the test did not overlap deliveries", peakTotal)
	}
}
