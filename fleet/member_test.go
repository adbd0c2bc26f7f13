package fleet

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

type runningMember struct {
	m      *Member
	cancel context.CancelFunc
	done   chan error
}

func startMember(t *testing.T, store Coordination, id string) *runningMember {
	t.Helper()
	return startMemberWith(t, store, MemberConfig{Replica: id, Secret: "s"})
}

// startMemberWith starts a member of cfg on store, with short timings
// and a listener on loopback.
func startMemberWith(t *testing.T, store Coordination, cfg MemberConfig) *runningMember {
	t.Helper()
	return runMember(t, newMember(t, store, cfg))
}

// newMember makes a member with the tests' short timeouts.
func newMember(t *testing.T, store Coordination, cfg MemberConfig) *Member {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	cfg.TermTTL, cfg.HeartbeatTimeout, cfg.Poll = 400*time.Millisecond, 400*time.Millisecond, 200*time.Millisecond
	m, err := NewMember(t.Context(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runMember runs m until the test ends.
func runMember(t *testing.T, m *Member) *runningMember {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningMember{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// TestMembersFailover: three replicas on one store elect a leader;
// when it goes away, another takes over, the leases held on the others
// still count against the limit, and a queued waiter is admitted by a
// release under the new leader.
func TestMembersFailover(t *testing.T) {
	t.Parallel()
	store := newMemStore(clock.Real)
	ms := map[string]*runningMember{}
	for _, id := range []string{"a", "b", "c"} {
		ms[id] = startMember(t, store, id)
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

// TestMemberLeadsWorkersAndForgets: the leader is told the live
// replicas' workers when its term begins and when they change, and each
// replica it forgets, once its heartbeats lapsed.
func TestMemberLeadsWorkersAndForgets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	// A replica that registers, heartbeats until a leads, and goes quiet.
	ghost := b.coord(t, "ghost", CoordConfig{Workers: 3, HeartbeatTimeout: 400 * time.Millisecond})
	if _, err := ghost.Register(ctx); err != nil {
		t.Fatal(err)
	}
	quiet := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quiet:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = ghost.Heartbeat(ctx)
			}
		}
	}()
	m := newMember(t, b.store, MemberConfig{Replica: "a", Workers: 2})
	events, stop := m.Subscribe()
	defer stop()
	r := runMember(t, m)
	next := func(what string) admission.LeadEvent {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(guard):
			t.Fatalf("no event: %s", what)
		}
		return admission.LeadEvent{}
	}
	// First the term began with both replicas' workers; then ghost was
	// forgotten, and the workers are a's alone (ghost stops counting when
	// its heartbeats lapse, which may come before it is forgotten).
	e := next("a never led")
	close(quiet)
	<-beating
	if e.Kind != admission.TermBegan || e.Engine == nil || e.Workers != 5 {
		t.Fatalf("first event %+v; want TermBegan with 5 workers (a's 2 and ghost's 3, both live)", e)
	}
	forgot, changed := false, false
	for !forgot || !changed {
		switch e := next("ghost forgotten and the workers changed"); {
		case e.Kind == admission.ReplicaForgotten && e.Replica == "ghost" && !forgot:
			forgot = true
		case e.Kind == admission.WorkersChanged && e.Workers == 2 && !changed:
			changed = true
		default:
			t.Fatalf("event %+v; want ghost forgotten once and the workers changed to 2 (a's alone) once", e)
		}
	}
	// One who subscribes now hears of the term, with the workers now.
	late, stopLate := m.Subscribe()
	defer stopLate()
	if e := <-late; e.Kind != admission.TermBegan || e.Workers != 2 {
		t.Fatalf("late subscriber's first event %+v; want TermBegan with 2 workers", e)
	}
	if err := ghost.Heartbeat(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("ghost's heartbeat: %v; want ErrFenced", err)
	}
	if _, leading := r.m.Term(); !leading {
		t.Fatal("a no longer leads")
	}
}

// TestMemberSecretFromDatabase: replicas given no secret share the one
// the store keeps, and reach each other with it.
func TestMemberSecretFromDatabase(t *testing.T) {
	t.Parallel()
	store := newMemStore(clock.Real)
	a := startMemberWith(t, store, MemberConfig{Replica: "a"})
	bm := startMemberWith(t, store, MemberConfig{Replica: "b"})
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	for _, r := range []*runningMember{a, bm} {
		if err := r.m.Ready(ctx); err != nil {
			t.Fatalf("not synced with a leader: %v", err)
		}
	}
	if err := a.m.Engine().SetScope(ctx, "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	tryAcquire(t, a.m.Engine(), "h", "s")
	if _, err := bm.m.Engine().TryAcquire(ctx, admission.Request{ID: "x",
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}}); !errors.Is(err, admission.ErrWouldWait) {
		t.Fatalf("TryAcquire on b: %v; want ErrWouldWait (a holds the one slot)", err)
	}
}

// TestMemberDiscard: a member that never started lets go of its fleet
// listener when discarded; one that started is left to its Stop.
func TestMemberDiscard(t *testing.T) {
	t.Parallel()
	store := newMemStore(clock.Real)
	m := newMember(t, store, MemberConfig{Replica: "a"})
	addr := m.Addr()
	if err := m.Discard(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("the fleet listener of a discarded member still accepts")
	}

	b := newMember(t, store, MemberConfig{Replica: "b"})
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	if err := b.Discard(); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatalf("Discard after Start closed the listener: %v", err)
	}
	c.Close()
}
