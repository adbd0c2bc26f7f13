package webhook

import "sync"

// Limiter bounds the deliveries in flight, per tenant and together, so
// that tenants whose receivers are slow hold a bounded share of the
// sending workers: their other deliveries wait for their own to end, and
// other tenants' are not delayed behind them. It is safe for concurrent
// use.
//
// Two bounds apply. A tenant has at most PerTenant deliveries in flight.
// And the deliveries beyond each tenant's first number at most Shared
// together: past it, only a tenant with nothing in flight may start one.
// A worker pool of more than Shared workers so always has some left for
// a tenant's first delivery, unless (pool − Shared) tenants each have one
// in flight.
type Limiter struct {
	perTenant, shared int
	mu                sync.Mutex
	n                 map[string]int // tenant → deliveries in flight, if any
	extra             int            // deliveries in flight beyond each tenant's first
}

// LimiterConfig sets a Limiter's bounds.
type LimiterConfig struct {
	// PerTenant is how many deliveries one tenant has in flight at most.
	// Default 1.
	PerTenant int
	// Shared is how many deliveries beyond each tenant's first are in
	// flight at most, all tenants together. Default 0: none, each tenant
	// has at most one in flight.
	Shared int
}

// NewLimiter returns a Limiter with the bounds of cfg.
func NewLimiter(cfg LimiterConfig) *Limiter {
	return &Limiter{perTenant: max(cfg.PerTenant, 1), shared: max(cfg.Shared, 0), n: make(map[string]int)}
}

// TryAcquire takes a slot for one of tenant's deliveries if the bounds
// allow, and reports whether it did; it never blocks. Release gives the
// slot back.
func (l *Limiter) TryAcquire(tenant string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.n[tenant]
	if n >= l.perTenant || (n > 0 && l.extra >= l.shared) {
		return false
	}
	if n > 0 {
		l.extra++
	}
	l.n[tenant] = n + 1
	return true
}

// Release gives back a slot that TryAcquire took for tenant.
func (l *Limiter) Release(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch n := l.n[tenant]; {
	case n > 1:
		l.n[tenant] = n - 1
		l.extra--
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

// PerTenant is the bound of one tenant's deliveries in flight.
func (l *Limiter) PerTenant() int { return l.perTenant }
