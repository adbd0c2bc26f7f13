package admission

import (
	"context"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// Options configure a Memory engine.
type Options struct {
	// Clock defaults to clock.Real.
	Clock clock.Clock
	// Observer receives every event; default none.
	Observer Observer
}

// Memory is the in-process home of the engine. STUB: being written.
type Memory struct{}

var _ Engine = (*Memory)(nil)

// NewMemory returns an empty engine.
func NewMemory(opts Options) *Memory { return &Memory{} }

// Close fails every queued waiter with ErrClosed and refuses new work.
func (m *Memory) Close() {}

func (m *Memory) SetScope(ctx context.Context, name string, cfg ScopeConfig) error { return ErrClosed }
func (m *Memory) RemoveScope(ctx context.Context, name string) error               { return ErrClosed }
func (m *Memory) Scope(ctx context.Context, name string) (ScopeStats, error) {
	return ScopeStats{}, ErrClosed
}
func (m *Memory) Acquire(ctx context.Context, req Request) (Lease, error) { return Lease{}, ErrClosed }
func (m *Memory) TryAcquire(ctx context.Context, req Request) (Lease, error) {
	return Lease{}, ErrClosed
}
func (m *Memory) Enqueue(ctx context.Context, req Request, notify func(Lease, error)) error {
	return ErrClosed
}
func (m *Memory) Cancel(ctx context.Context, waiterID string) error { return ErrClosed }
func (m *Memory) Position(ctx context.Context, waiterID string) (Position, error) {
	return Position{}, ErrClosed
}
func (m *Memory) Renew(ctx context.Context, id LeaseID, owner Owner) (time.Time, error) {
	return time.Time{}, ErrClosed
}
func (m *Memory) Release(ctx context.Context, id LeaseID, owner Owner) error { return ErrClosed }
func (m *Memory) Reconcile(ctx context.Context, id LeaseID, owner Owner, tokens int64) error {
	return ErrClosed
}
func (m *Memory) Fence(ctx context.Context, id string, gen uint64) error    { return ErrClosed }
func (m *Memory) Activate(ctx context.Context, id string, gen uint64) error { return ErrClosed }
