package fleet

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// guard bounds every wait in these tests; it is a failure guard, never
// the thing waited for.
const guard = 10 * time.Second

// bundle is one test's store: the fleet's coordination in memory
// (memStore), on the real clock unless the test gives it another. The
// coordination's contract is tested against it and against PostgreSQL
// by package coordtest; these tests are the fleet's own.
type bundle struct {
	store *memStore
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{store: newMemStore(clock.Real)}
}

// coord returns a Coordinator for replica id on the bundle's store, with
// cfg's durations (zero: the defaults).
func (b *bundle) coord(t *testing.T, id string, cfg CoordConfig) *Coordinator {
	t.Helper()
	cfg.Replica, cfg.Addr = id, id+".fleet:7000"
	c, err := NewCoordinator(b.store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds, failing the test after guard. It is
// for conditions on the store's clock, which no local event announces.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, guard)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	store := setup(t).store
	for _, cfg := range []CoordConfig{
		{Addr: "a:1"},
		{Replica: "a"},
		{Replica: "a\x00b", Addr: "a:1"},
		{Replica: "a", Addr: "\xff"},
		{Replica: string(make([]byte, 201)), Addr: "a:1"},
		{Replica: "a", Addr: "a:1", TermTTL: time.Millisecond},
		{Replica: "a", Addr: "a:1", HeartbeatTimeout: -time.Second},
		{Replica: "c", Addr: "c:1", Workers: -1},
	} {
		if _, err := NewCoordinator(store, cfg); err == nil {
			t.Errorf("NewCoordinator(%+v) accepted", cfg)
		}
	}
	if _, err := NewCoordinator(nil, CoordConfig{Replica: "a", Addr: "a:1"}); err == nil {
		t.Error("NewCoordinator(nil store) accepted")
	}
	c, err := NewCoordinator(store, CoordConfig{Replica: "a", Addr: "a:1", TermTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Renew(ctx, math.MaxUint64); err == nil {
		t.Error("Renew of an epoch past bigint accepted")
	}
	if _, _, err := c.TakeOver(ctx, math.MaxUint64); err == nil {
		t.Error("TakeOver of an epoch past bigint accepted")
	}
	if _, err := c.Forget(ctx, 1, "b", math.MaxUint64); err == nil {
		t.Error("Forget of a generation past bigint accepted")
	}
	if _, err := c.Forget(ctx, 1, "", 1); err == nil {
		t.Error("Forget of an empty id accepted")
	}
	if err := c.Heartbeat(ctx); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("Heartbeat before Register = %v, want ErrNotRegistered", err)
	}
	if err := c.HoldLife(ctx); !errors.Is(err, ErrNotRegistered) {
		t.Errorf("HoldLife before Register = %v, want ErrNotRegistered", err)
	}
	for _, cfg := range []ElectorConfig{{Margin: 500 * time.Millisecond}, {Margin: -1}, {Poll: time.Millisecond}} {
		if _, err := NewElector(c, cfg); err == nil {
			t.Errorf("NewElector(%+v) accepted with a 1s TTL", cfg)
		}
	}
	if _, err := NewElector(nil, ElectorConfig{}); err == nil {
		t.Error("NewElector(nil) accepted")
	}
	if _, err := NewBoard(nil, BoardConfig{Replica: "a"}); err == nil {
		t.Error("NewBoard(nil store) accepted")
	}
}
