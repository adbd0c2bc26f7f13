package fleet

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
	"github.com/weir-gateway/weir/pgtest"
)

// startMembers starts n Members on a schema of tb's own, each with a
// pgxpool of its own, elected through PostgreSQL and talking to the
// leader over loopback TCP; it waits until every one has synced with
// the leader and returns them, the leader first. They stop when tb
// ends.
func startMembers(tb testing.TB, n int, opts admission.Options) []*Member {
	tb.Helper()
	dsn := pgtest.Schema(tb)
	var ms []*Member
	for i := range n {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(pool.Close)
		m, err := NewMember(context.Background(), pool, MemberConfig{Replica: "r" + strconv.Itoa(i),
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
// each call on the next replica in turn (spread), the leader first.
func spreadMembers(t *testing.T, n int, opts admission.Options) admission.Engine {
	var es []*Engine
	for _, m := range startMembers(t, n, opts) {
		es = append(es, m.Engine())
	}
	return &spread{es: es, holders: make(map[admission.LeaseID]*Engine), waiters: make(map[string]*Engine)}
}

// TestModelOnPostgres runs the reference model as TestModel does, its
// fleet elected through the real PostgreSQL (the -fleet flags apply).
func TestModelOnPostgres(t *testing.T) {
	t.Parallel()
	admissiontest.Model(t, func(t *testing.T, opts admission.Options) admission.Engine {
		return spreadMembers(t, 2, opts)
	}, admissiontest.ModelConfig{
		Ops: *flagOps, Seeds: max(*flagSeeds, 1), Seed: *flagSeed, Lenient: *flagLenient,
		Rerun: "go test -race -run TestModelOnPostgres ./fleet/", FlagPrefix: "fleet",
	})
}
