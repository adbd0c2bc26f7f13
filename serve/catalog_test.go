package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/metrics"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/postgres"
)

// catalogFile is a config file whose one platform model has limit
// concurrency, with a server section of its own.
func catalogFile(listen string, concurrency int) []byte {
	return fmt.Appendf(nil, `server:
  listen: %s
platforms:
  - name: up
    base_url: http://127.0.0.1:9/v1
    api_key_env: CATALOG_TEST_KEY
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
    concurrency: %d
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
`, listen, concurrency)
}

// applied is one call of a replica's apply.
type applied struct {
	limit  int64
	forget bool
}

// catalogReplica is a fleetCatalog on db, whose applies are sent on the
// returned channel; its poll never comes (a fake clock), so only the
// NOTIFY can bring it a version.
func catalogReplica(t *testing.T, db *postgres.DB, id string) (*fleetCatalog, <-chan applied) {
	t.Helper()
	ch := make(chan applied, 16)
	c := newFleetCatalog(catalogDeps{store: db, by: id, clock: clock.NewFake(time.Unix(0, 0)), poll: time.Hour,
		logger: slog.New(slog.DiscardHandler), base: config.Default(),
		apply: func(_ context.Context, cfg *config.Config, forget bool) error {
			ch <- applied{limit: cfg.PlatformModels[0].Concurrency, forget: forget}
			return nil
		}})
	return c, ch
}

func nextApplied(t *testing.T, ch <-chan applied, what string) applied {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("no apply: %s", what)
		return applied{}
	}
}

// taken waits until c's take under way, whose apply was seen, is done:
// takeLocked holds mu from the apply until the state is stored.
func taken(c *fleetCatalog) {
	c.mu.Lock()
	defer c.mu.Unlock()
}

// TestFleetCatalogOneVersion: the first replica's file becomes the
// fleet's catalog; a second started with another file serves the fleet's
// (keeping the run-time limits) and reports drift; its reload publishes
// its file, which the first takes on the NOTIFY alone, and the drift
// changes sides. A file that is not a valid catalog publishes nothing.
func TestFleetCatalogOneVersion(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	dsn := pgtest.Schema(t)
	dbA, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbA.Close() })
	dbB, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbB.Close() })
	a, appliedA := catalogReplica(t, dbA, "a")
	b, appliedB := catalogReplica(t, dbB, "b")
	ctx := t.Context()

	if err := a.Begin(ctx, catalogFile("127.0.0.1:1", 2)); err != nil {
		t.Fatal(err)
	}
	if got := nextApplied(t, appliedA, "a's start"); got != (applied{limit: 2, forget: true}) {
		t.Errorf("a's start applied %+v; want its file's limit 2, published", got)
	}
	if st := a.State(); st.Version != 1 || st.Drift {
		t.Errorf("a: %+v; want version 1, no drift", st)
	}
	if err := b.Begin(ctx, catalogFile("127.0.0.1:2", 6)); err != nil {
		t.Fatal(err)
	}
	if got := nextApplied(t, appliedB, "b's start"); got != (applied{limit: 2}) {
		t.Errorf("b's start applied %+v; want the fleet's limit 2, the run-time limits kept", got)
	}
	if st := b.State(); st.Version != 1 || !st.Drift {
		t.Errorf("b: %+v; want version 1 and drift", st)
	}

	for _, c := range []*fleetCatalog{a, b} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	start := time.Now()
	v, published, err := b.Publish(ctx, catalogFile("127.0.0.1:2", 6))
	if err != nil || !published || v.Version != 2 {
		t.Fatalf("b's reload: %+v, %v, %v; want version 2 published", v, published, err)
	}
	if got := nextApplied(t, appliedB, "b's reload"); got != (applied{limit: 6, forget: true}) {
		t.Errorf("b's reload applied %+v; want limit 6, forgetting the run-time limits", got)
	}
	if got := nextApplied(t, appliedA, "a taking version 2"); got != (applied{limit: 6}) {
		t.Errorf("a took %+v; want limit 6, the run-time limits kept", got)
	}
	taken(a)
	t.Logf("a took version 2 %v after b published it", time.Since(start))
	if st := a.State(); st.Version != 2 || !st.Drift {
		t.Errorf("a: %+v; want version 2, and drift: its file has limit 2", st)
	}
	if st := b.State(); st.Version != 2 || st.Drift {
		t.Errorf("b: %+v; want version 2, no drift", st)
	}

	bad := []byte("platform_models: [{name: x/y, platform: nowhere, upstream: m}]\n")
	if _, _, err := b.Publish(ctx, bad); err == nil {
		t.Error("a catalog naming an unknown platform was published")
	}
	if cur, err := dbA.CatalogCurrent(ctx); err != nil || cur.Version != 2 {
		t.Errorf("after a bad reload: current %+v, %v; want version 2", cur.Version, err)
	}
	if _, _, err := b.Publish(ctx, []byte(": not yaml [")); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("a file that is not YAML: %v; want an error", err)
	}
}

// deafStore is a catalog store whose notices never come.
type deafStore struct{ *postgres.DB }

func (deafStore) ListenCatalog(ctx context.Context, _ func(int64)) error {
	<-ctx.Done()
	return nil
}

// TestFleetCatalogPollIsTheSafetyNet: a replica that hears no notice
// takes a new version at its next poll, and not before.
func TestFleetCatalogPollIsTheSafetyNet(t *testing.T) {
	t.Parallel()
	db := catalogDB(t)
	ctx := t.Context()
	clk := clock.NewFake(time.Unix(0, 0))
	ch := make(chan applied, 4)
	c := newFleetCatalog(catalogDeps{store: deafStore{db}, by: "deaf", clock: clk, poll: time.Second,
		logger: slog.New(slog.DiscardHandler), base: config.Default(),
		apply: func(_ context.Context, cfg *config.Config, forget bool) error {
			ch <- applied{limit: cfg.PlatformModels[0].Concurrency, forget: forget}
			return nil
		}})
	if err := c.Begin(ctx, catalogFile("127.0.0.1:1", 2)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, ch, "the start")
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	if _, _, err := PublishCatalog(ctx, &CatalogPublication{Store: db, Base: config.Default(),
		File: catalogFile("127.0.0.1:2", 5), By: "weir apply"}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-ch:
		t.Fatalf("took %+v before its poll, with no notice", a)
	default:
	}
	took := make(chan struct{})
	var got applied
	go func() {
		got = <-ch
		close(took)
	}()
	if !clk.AdvanceUntil(took, time.Second, time.Hour, 10*time.Second) {
		t.Fatal("no poll took the new version")
	}
	if got != (applied{limit: 5}) {
		t.Errorf("the poll took %+v; want limit 5", got)
	}
	// The take holds mu from before apply until it has stored its state:
	// once mu is free again, the state is the version applied.
	c.mu.Lock()
	c.mu.Unlock() //nolint:staticcheck // an empty critical section: waits for the take
	if st := c.State(); st.Version != 2 || !st.Drift {
		t.Errorf("after the poll: %+v; want version 2, drifted from its file", st)
	}
}

// TestFleetCatalogReportsItsVersion: a replica records the version it
// serves as its own, so that a publication keeps it: at once when it is
// registered, else at its next poll once it is.
func TestFleetCatalogReportsItsVersion(t *testing.T) {
	t.Parallel()
	db := catalogDB(t)
	ctx := t.Context()
	c, ch := catalogReplica(t, db, "a")
	if err := c.Begin(ctx, catalogFile("127.0.0.1:1", 2)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, ch, "a's start")
	// Not registered yet: nothing recorded, and no error.
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "a", Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	served := func() int64 {
		var v int64
		if err := db.Pool().QueryRow(ctx, `SELECT catalog_version FROM weir_fleet_replicas WHERE id = 'a'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := served(); v != 0 {
		t.Fatalf("a recorded version %d before it was registered", v)
	}
	c.catchUp(ctx) // its next poll
	if v := served(); v != 1 {
		t.Errorf("a recorded version %d after its poll; want 1, the one it serves", v)
	}
}

// TestFleetCatalogPublishFile: an operator's publication through the
// admin API validates as weir apply does — a catalog that is not valid
// is ErrInvalid and changes nothing — and one that is becomes the
// fleet's version, taken here at once, its run-time limits forgotten,
// while drift is still told against this replica's own file.
func TestFleetCatalogPublishFile(t *testing.T) {
	t.Parallel()
	db := catalogDB(t)
	ctx := t.Context()
	c, ch := catalogReplica(t, db, "a")
	if err := c.Begin(ctx, catalogFile("127.0.0.1:1", 2)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, ch, "a's start")
	bad := []byte("platform_models: [{name: x/y, platform: nowhere, upstream: m}]\n")
	if _, _, err := c.PublishFile(ctx, bad, "admin api (a)"); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("a catalog naming an unknown platform: %v; want ErrInvalid", err)
	}
	if cur, err := db.CatalogCurrent(ctx); err != nil || cur.Version != 1 {
		t.Fatalf("after a refused publication: %+v, %v; want version 1 still", cur, err)
	}
	v, published, err := c.PublishFile(ctx, catalogFile("127.0.0.1:9", 7), "admin api (a)")
	if err != nil || !published || v.Version != 2 || v.PublishedBy != "admin api (a)" {
		t.Fatalf("a valid catalog: %+v, %v, %v; want version 2 published by the admin api", v, published, err)
	}
	if got := nextApplied(t, ch, "the publication"); got != (applied{limit: 7, forget: true}) {
		t.Errorf("applied %+v; want limit 7, the run-time limits forgotten", got)
	}
	if st := c.State(); st.Version != 2 || !st.Drift {
		t.Errorf("state %+v; want version 2, drifting from this replica's file", st)
	}
}

// leftCounter is a replica's scopes left by its catalogs: one platform
// model left until RetireLeft, which it counts.
type leftCounter struct {
	mu      sync.Mutex
	leaving bool
	retired int
}

func (l *leftCounter) Leaving() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaving
}

func (l *leftCounter) RetireLeft(context.Context) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leaving {
		return 0
	}
	l.leaving = false
	l.retired++
	return 1
}

// leave says a catalog applied left a platform model.
func (l *leftCounter) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leaving = true
}

func (l *leftCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retired
}

// TestFleetCatalogRetiresOnceEveryReplicaServes: the scopes a version
// left are retired once every registered replica records that version,
// not while one records an older one; a replica that records none yet
// holds nothing up, and one that left the fleet holds nothing up any
// more.
func TestFleetCatalogRetiresOnceEveryReplicaServes(t *testing.T) {
	t.Parallel()
	db := catalogDB(t)
	ctx := t.Context()
	c, ch := catalogReplica(t, db, "a")
	left := &leftCounter{}
	c.left = left
	if err := c.Begin(ctx, catalogFile("127.0.0.1:1", 2)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, ch, "a's start")
	gens := map[string]uint64{}
	for _, id := range []string{"a", "b", "c"} {
		gen, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: id, Addr: "127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		gens[id] = gen
	}
	if err := db.CatalogServing(ctx, "b", 1); err != nil {
		t.Fatal(err)
	}
	// a's reload publishes version 2, which leaves a platform model.
	left.leave()
	if _, _, err := c.Publish(ctx, catalogFile("127.0.0.1:1", 3)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, ch, "a's reload")
	if n := left.count(); n != 0 {
		t.Fatalf("retired %d times while b serves version 1; want none", n)
	}
	if err := db.CatalogServing(ctx, "b", 2); err != nil {
		t.Fatal(err)
	}
	c.catchUp(ctx) // a's next poll: b, and a itself, serve version 2; c records none
	if n := left.count(); n != 1 {
		t.Fatalf("retired %d times once every replica serves version 2; want once", n)
	}

	// Version 3 leaves another; b is gone before it takes it.
	left.leave()
	if _, _, err := c.Publish(ctx, catalogFile("127.0.0.1:1", 4)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, ch, "a's second reload")
	c.catchUp(ctx)
	if n := left.count(); n != 1 {
		t.Fatalf("retired %d times while b serves version 2; want still once", n)
	}
	if err := db.ReplicaLeave(ctx, "b", gens["b"]); err != nil {
		t.Fatal(err)
	}
	c.catchUp(ctx)
	if n := left.count(); n != 2 {
		t.Errorf("retired %d times once b left the fleet; want twice", n)
	}
}

// TestFleetCatalogJoinedReplicaHoldsUp: a replica that has just joined
// the fleet (its membership as serve makes it, joinFleet) is registered
// with the catalog version it serves, before its catalog records one at
// a poll: a version another replica publishes then, which leaves a
// platform model, is not retired until the joined replica takes it too.
func TestFleetCatalogJoinedReplicaHoldsUp(t *testing.T) {
	t.Parallel()
	db := catalogDB(t)
	ctx := t.Context()
	a, appliedA := catalogReplica(t, db, "a")
	left := &leftCounter{}
	a.left = left
	if err := a.Begin(ctx, catalogFile("127.0.0.1:1", 2)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, appliedA, "a's start")
	if _, err := db.ReplicaRegister(ctx, &fleet.ReplicaRegisterParams{ID: "a", Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}

	// b starts as Main does: its catalog first (not registered yet, it
	// records nothing), then its membership, which registers it.
	b, appliedB := catalogReplica(t, db, "b")
	if err := b.Begin(ctx, catalogFile("127.0.0.1:2", 2)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, appliedB, "b's start")
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Fleet.Replica = "b"
	cfg.Fleet.HeartbeatTimeout = time.Hour // a, registered by hand, never lapses
	m := &Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Metrics: metrics.New(nil), catalog: b}
	member, err := m.joinFleet(ctx, db, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := member.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Stop(context.Background()) })
	readyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := member.Ready(readyCtx); err != nil { // registered, and synced with a leader
		t.Fatal(err)
	}

	// a's reload publishes version 2, which leaves a platform model,
	// while b serves version 1.
	left.leave()
	if _, _, err := a.Publish(ctx, catalogFile("127.0.0.1:1", 3)); err != nil {
		t.Fatal(err)
	}
	nextApplied(t, appliedA, "a's reload")
	if n := left.count(); n != 0 {
		t.Fatalf("retired %d times while b, registered, serves version 1; want none", n)
	}
	b.catchUp(ctx) // b takes version 2
	nextApplied(t, appliedB, "b's take")
	a.catchUp(ctx)
	if n := left.count(); n != 1 {
		t.Errorf("retired %d times once b serves version 2; want once", n)
	}
}

// catalogDB is a fresh PostgreSQL store for a fleet catalog test,
// closed when the test ends.
func catalogDB(t *testing.T) *postgres.DB {
	t.Helper()
	pgtest.Require(t)
	db, err := postgres.Open(t.Context(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
