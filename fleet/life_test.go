package fleet

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// holdLife holds c's life session until the test ends or the returned
// release is called (the process's end as the store sees it), and waits
// until the store reports it held.
func holdLife(t *testing.T, c *Coordinator) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.HoldLife(ctx); err != nil {
			t.Errorf("HoldLife: %v", err)
		}
	}()
	release = func() {
		cancel()
		<-done
	}
	t.Cleanup(release)
	waitFor(t, "the life session held", func() bool {
		_, held, err := c.Life(context.Background(), c.Replica(), c.Gen())
		return err == nil && held
	})
	return release
}

// TestMemberDeadNeedsBothSigns: a Member proves a replica dead only when
// the store holds no life session of it and its fleet listener refuses
// connections (or its registration is gone).
func TestMemberDeadNeedsBothSigns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m, err := NewMember(t.Context(), b.store, MemberConfig{Replica: "m", Listen: "127.0.0.1:0", Secret: "members"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.ln.Close() })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCoordinator(b.store, CoordConfig{Replica: "x", Addr: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	release := holdLife(t, other)
	if m.dead(t.Context(), "x", other.Gen()) {
		t.Fatal("dead while its session is held and its listener open")
	}
	ln.Close()
	if m.dead(t.Context(), "x", other.Gen()) {
		t.Fatal("dead while its session is held (a paused process's session lives on)")
	}
	release()
	waitFor(t, "x proven dead once its session is gone too", func() bool { return m.dead(t.Context(), "x", other.Gen()) })

	// A live listener keeps a replica alive whose session alone ended.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	y, err := NewCoordinator(b.store, CoordConfig{Replica: "y", Addr: ln2.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := y.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m.dead(t.Context(), "y", y.Gen()) {
		t.Fatal("dead with no session but its listener open (its connection to the store alone ended)")
	}
	// Gone from the registry and without a session: dead, whatever its
	// address does.
	if err := y.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !m.dead(t.Context(), "y", y.Gen()) {
		t.Fatal("not dead with no session and no registration")
	}
}

// TestLeaderLostTakesOverOnlyFromAClosedListener: a follower whose
// session the leader closed asks its elector to take the term only when
// the leader's listener refuses connections; a leader that still
// listens (its connection to the store alone ended, or it closed one
// session) keeps its term.
func TestLeaderLostTakesOverOnlyFromAClosedListener(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m, err := NewMember(t.Context(), b.store, MemberConfig{Replica: "m", Listen: "127.0.0.1:0", Secret: "members"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.ln.Close() })
	lost := func(addr string, epoch uint64) (uint64, bool) {
		m.leaderLost(Term{Epoch: epoch, Leader: "l", Addr: addr})
		waitFor(t, "the probe done", func() bool { return !m.takingOver.Load() })
		select {
		case e := <-m.elector.takeover:
			return e, true
		default:
			return 0, false
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := lost(ln.Addr().String(), 4); ok {
		t.Fatalf("take over epoch %d of a leader that still listens", e)
	}
	ln.Close()
	if e, ok := lost(ln.Addr().String(), 5); !ok || e != 5 {
		t.Fatalf("take over: %d, %v; want epoch 5 of the leader whose listener refuses", e, ok)
	}
}

// crashable is a replica's view of the store that fails every write once
// the replica's process has died: a dead process resigns nothing and
// does not leave.
type crashable struct {
	Coordination
	dead atomic.Bool
}

var errDied = errors.New("the process died")

func (c *crashable) TermResign(ctx context.Context, epoch uint64, leader string) error {
	if c.dead.Load() {
		return errDied
	}
	return c.Coordination.TermResign(ctx, epoch, leader)
}

func (c *crashable) ReplicaLeave(ctx context.Context, id string, gen uint64) error {
	if c.dead.Load() {
		return errDied
	}
	return c.Coordination.ReplicaLeave(ctx, id, gen)
}

// TestMemberLeaderCrashEndsTermAtOnce: when the leader's process dies —
// its sessions, listener and life session end together, and it neither
// resigns nor leaves — the follower takes the term long before it
// expires, and admits.
func TestMemberLeaderCrashEndsTermAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type member struct {
		m      *Member
		store  *crashable
		cancel context.CancelFunc
		done   chan error
	}
	start := func(id string) *member {
		store := &crashable{Coordination: b.store}
		m, err := NewMember(t.Context(), store, MemberConfig{Replica: id, Secret: "s", Listen: "127.0.0.1:0",
			TermTTL: time.Minute, HeartbeatTimeout: 2 * time.Second, Poll: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &member{m: m, store: store, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- m.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			<-r.done
		})
		return r
	}
	ms := []*member{start("a"), start("b")}
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	for _, r := range ms {
		if err := r.m.Engine().Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lead, follow := ms[0], ms[1]
	if _, leading := follow.m.Term(); leading {
		lead, follow = follow, lead
	}
	first, _ := lead.m.Term()
	if err := follow.m.Engine().SetScope(ctx, "s", admission.ScopeConfig{Limit: 1}); err != nil {
		t.Fatal(err)
	}

	// The leader's process dies: no resignation reaches the store.
	lead.store.dead.Store(true)
	lead.cancel()
	<-lead.done
	lead.done <- nil
	died := time.Now()
	waitFor(t, "the follower leads", func() bool {
		term, leading := follow.m.Term()
		return leading && term.Epoch > first.Epoch
	})
	if _, err := follow.m.Engine().Acquire(ctx, admission.Request{ID: "x",
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(died); took > 5*time.Second {
		t.Fatalf("admitting again took %v after the leader died; want far less than its minute-long term", took)
	}
	if term, _ := b.store.TermGet(t.Context()); term.Epoch != first.Epoch+1 {
		t.Fatalf("the store's term is %+v; want epoch %d, taken over", term, first.Epoch+1)
	}
}
