package fleet_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/postgres"
)

// The fleet on PostgreSQL's store: the engine's conformance suite and
// reference model, and the benchmarks (bench_test.go), on Members elected
// through the real database. The coordination's own contract is tested
// on PostgreSQL by package postgres (coordtest).

// startMembers starts n Members on a schema of tb's own, each with a
// store (a pool) of its own, elected through PostgreSQL and talking to
// the leader over loopback TCP; it waits until every one has synced
// with the leader and returns them, the leader first. They stop when tb
// ends.
func startMembers(tb testing.TB, n int, opts admission.Options) []*fleet.Member {
	tb.Helper()
	dsn := pgtest.Schema(tb)
	var ms []*fleet.Member
	for i := range n {
		db, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
		m, err := fleet.NewMember(context.Background(), db, fleet.MemberConfig{Replica: "r" + strconv.Itoa(i),
			Listen: "127.0.0.1:0", Secret: "members", Options: opts})
		if err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		tb.Cleanup(func() {
			cancel()
			<-done
		})
		ms = append(ms, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range ms {
		if err := m.Engine().Ready(ctx); err != nil {
			tb.Fatalf("replica not synced with a leader: %v", err)
		}
	}
	for i, m := range ms {
		if _, leading := m.Term(); leading {
			ms[0], ms[i] = ms[i], ms[0]
			return ms
		}
	}
	tb.Fatal("every replica synced, and none leads")
	return nil
}

// spreadMembers is an engine of n Members over one PostgreSQL schema,
// each call on the next replica in turn, the leader first.
func spreadMembers(t *testing.T, n int, opts admission.Options) admission.Engine {
	var es []*fleet.Engine
	for _, m := range startMembers(t, n, opts) {
		es = append(es, m.Engine())
	}
	return fleet.Spread(es)
}

// TestConformanceOnPostgres runs the engine's conformance suite against
// two Members elected through the real PostgreSQL, each call on the next.
func TestConformanceOnPostgres(t *testing.T) {
	t.Parallel()
	admissiontest.Exercise(t, func(t *testing.T, opts admission.Options) admission.Engine {
		return spreadMembers(t, 2, opts)
	})
}

// TestModelOnPostgres runs the reference model as TestModel does, its
// fleet elected through the real PostgreSQL (the -fleet flags apply).
func TestModelOnPostgres(t *testing.T) {
	t.Parallel()
	admissiontest.Model(t, func(t *testing.T, opts admission.Options) admission.Engine {
		return spreadMembers(t, 2, opts)
	}, fleet.ModelFlags("go test -race -run TestModelOnPostgres ./fleet/"))
}
