package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/pgtest"
)

type runningMember struct {
	m      *Member
	cancel context.CancelFunc
	done   chan error
}

func startMember(t *testing.T, dsn, id string) *runningMember {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m, err := NewMember(t.Context(), pool, MemberConfig{Replica: id, Listen: "127.0.0.1:0", Secret: "s",
		TermTTL: 400 * time.Millisecond, HeartbeatTimeout: 400 * time.Millisecond, Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningMember{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// TestMembersFailover: three replicas on one PostgreSQL elect a leader;
// when it goes away, another takes over, the leases held on the others
// still count against the limit, and a queued waiter is admitted by a
// release under the new leader.
func TestMembersFailover(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	ms := map[string]*runningMember{}
	for _, id := range []string{"a", "b", "c"} {
		ms[id] = startMember(t, dsn, id)
	}
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	for _, r := range ms {
		if err := r.m.Engine().Ready(ctx); err != nil {
			t.Fatalf("not synced with a leader: %v", err)
		}
	}
	var leader *runningMember
	var followers []*runningMember
	for _, r := range ms {
		if _, leading := r.m.Term(); leading {
			leader = r
		} else {
			followers = append(followers, r)
		}
	}
	if leader == nil || len(followers) != 2 {
		t.Fatalf("leader %v, %d followers; want one leader", leader, len(followers))
	}
	f1, f2 := followers[0].m.Engine(), followers[1].m.Engine()
	if err := f1.SetScope(ctx, "s", admission.ScopeConfig{Limit: 2}); err != nil {
		t.Fatal(err)
	}
	tryAcquire(t, f1, "h1", "s")
	h2 := tryAcquire(t, f2, "h2", "s")
	w := enqueue(t, f1, "w", "s")

	leader.cancel() // resigns: the next campaign wins at once
	if err := <-leader.done; err != nil {
		t.Fatalf("leader's Run: %v", err)
	}
	leader.done <- nil // for the cleanup

	// The next leader knows the scope (synced) and both leases.
	_, err := f2.TryAcquire(ctx, admission.Request{ID: "x", Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
	if !errors.Is(err, admission.ErrWouldWait) {
		t.Fatalf("TryAcquire under the new leader: %v; want ErrWouldWait (both leases still held)", err)
	}
	pending(t, w, "w")
	if err := f2.Release(ctx, h2.ID, h2.Owner); err != nil {
		t.Fatal(err)
	}
	o := wait(t, w, "w")
	if o.err != nil || o.lease.ID>>40 < 2 {
		t.Fatalf("w: lease %#x, %v; want a lease of a later epoch", uint64(o.lease.ID), o.err)
	}
}
