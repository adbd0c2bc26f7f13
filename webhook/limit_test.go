package webhook_test

import (
	"sync"
	"testing"

	"github.com/weir-gateway/weir/webhook"
)

func TestLimiterBoundsEachTenant(t *testing.T) {
	t.Parallel()
	l := webhook.NewLimiter(3)
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
	if webhook.NewLimiter(0).PerTenant() != 1 {
		t.Error("a bound below 1 is not 1")
	}
}

// TestLimiterConcurrent: however many goroutines try at once, no tenant
// is ever over its bound.
func TestLimiterConcurrent(t *testing.T) {
	t.Parallel()
	const bound = 4
	l := webhook.NewLimiter(bound)
	var (
		mu   sync.Mutex
		held = map[string]int{}
		peak = map[string]int{}
		wg   sync.WaitGroup
	)
	for i := range 64 {
		tenant := []string{"a", "b"}[i%2]
		wg.Go(func() {
			for range 200 {
				if !l.TryAcquire(tenant) {
					continue
				}
				mu.Lock()
				held[tenant]++
				peak[tenant] = max(peak[tenant], held[tenant])
				mu.Unlock()
				mu.Lock()
				held[tenant]--
				mu.Unlock()
				l.Release(tenant)
			}
		})
	}
	wg.Wait()
	for tenant, p := range peak {
		if p > bound {
			t.Errorf("tenant %s had %d in flight, bound %d", tenant, p, bound)
		}
	}
}
