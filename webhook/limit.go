package webhook

import "sync"

// Limiter bounds how many deliveries each tenant has in flight at once, so
// that a tenant whose receivers are slow holds at most its bound of the
// sending workers: its other deliveries wait for its own to end, and
// other tenants' are not delayed behind them. It is safe for concurrent
// use.
type Limiter struct {
	max int
	mu  sync.Mutex
	n   map[string]int // tenant → deliveries in flight, if any
}

// NewLimiter returns a Limiter of perTenant deliveries per tenant (at
// least 1).
func NewLimiter(perTenant int) *Limiter {
	return &Limiter{max: max(perTenant, 1), n: make(map[string]int)}
}

// TryAcquire takes one of tenant's slots if it has one free, and reports
// whether it did; never blocks. Release gives the slot back.
func (l *Limiter) TryAcquire(tenant string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[tenant] >= l.max {
		return false
	}
	l.n[tenant]++
	return true
}

// Release gives back a slot that TryAcquire took for tenant.
func (l *Limiter) Release(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch n := l.n[tenant]; {
	case n > 1:
		l.n[tenant] = n - 1
	case n == 1:
		delete(l.n, tenant)
	default:
		panic("webhook: Limiter.Release of a tenant with nothing in flight")
	}
}

// InFlight is how many deliveries tenant has in flight.
func (l *Limiter) InFlight(tenant string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[tenant]
}

// PerTenant is the bound.
func (l *Limiter) PerTenant() int { return l.max }
