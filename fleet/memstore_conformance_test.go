package fleet_test

import (
	"context"
	"testing"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/fleet/coordtest"
)

// TestMemStoreConformance runs the coordination's suite on the
// in-memory store the package's tests elect their replicas through, so
// that what they show holds on PostgreSQL's too.
func TestMemStoreConformance(t *testing.T) {
	t.Parallel()
	coordtest.Exercise(t, func(t *testing.T) coordtest.Backend {
		s := fleet.NewMemStore(clock.Real)
		return coordtest.Backend{Store: s,
			Fence: func(_ context.Context, leader string, epoch uint64) (coordtest.FencedWrite, error) {
				held, end := fleet.MemFenceWrite(s, leader, epoch)
				return memWrite{s: s, held: held, end: end}, nil
			}}
	})
}

type memWrite struct {
	s    *fleet.MemStore
	held bool
	end  func()
}

func (w memWrite) Held() bool                           { return w.held }
func (w memWrite) Waiting(context.Context) (int, error) { return fleet.MemWaiting(w.s), nil }
func (w memWrite) End(context.Context) error            { w.end(); return nil }
