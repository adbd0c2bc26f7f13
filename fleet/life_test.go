package fleet

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/pgtest"
)

// lifeConn opens a connection of its own on b's schema and holds c's
// life lock on it; closing it is the process's end as PostgreSQL sees
// it.
func (b *bundle) lifeConn(t *testing.T, c *Coordinator) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if err := c.HoldLife(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestTakeOverOnlyWithoutLifeSession: a term that has not expired is
// taken early only while PostgreSQL holds no life session of its
// leader's generation; otherwise TakeOver is an ordinary campaign, and
// loses.
func TestTakeOverOnlyWithoutLifeSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ttl := CoordConfig{TermTTL: time.Minute}
	a, o := b.coord(t, "a", ttl), b.coord(t, "o", ttl)
	for _, c := range []*Coordinator{a, o} {
		if _, err := c.Register(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	life := b.lifeConn(t, a)
	term, won, err := a.Campaign(t.Context())
	if err != nil || !won {
		t.Fatalf("a's campaign: %+v, %v, %v", term, won, err)
	}

	if got, won, err := o.TakeOver(t.Context(), term.Epoch); err != nil || won {
		t.Fatalf("TakeOver while a's life session is held: %+v, won %v, %v; want lost", got, won, err)
	}
	if _, won, err := o.TakeOver(t.Context(), term.Epoch+7); err != nil || won {
		t.Fatalf("TakeOver of another epoch: won %v, %v; want lost", won, err)
	}
	if rs, err := o.Live(t.Context()); err != nil || len(rs) != 2 || !rs[0].Session || rs[1].Session {
		t.Fatalf("Live: %+v, %v; want a with its session, o without", rs, err)
	}

	life.Close(context.Background())
	waitFor(t, "a's life session gone", func() bool {
		_, held, err := o.Life(t.Context(), "a", a.Gen())
		return err == nil && !held
	})
	if _, won, err := o.Campaign(t.Context()); err != nil || won {
		t.Fatalf("a plain campaign before the term expired: won %v, %v; want lost", won, err)
	}
	got, won, err := o.TakeOver(t.Context(), term.Epoch)
	if err != nil || !won || got.Epoch != term.Epoch+1 || got.Leader != "o" {
		t.Fatalf("TakeOver once a's life session is gone: %+v, won %v, %v; want epoch %d led by o", got, won, err, term.Epoch+1)
	}
}

// TestLifeReportsRegistration: Life tells a registered replica's address
// and whether its session is held, and no address once it left.
func TestLifeReportsRegistration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.coord(t, "a", CoordConfig{})
	if _, err := a.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	addr, held, err := a.Life(t.Context(), "a", a.Gen())
	if err != nil || addr != "a.fleet:7000" || held {
		t.Fatalf("before HoldLife: %q, %v, %v", addr, held, err)
	}
	b.lifeConn(t, a)
	if addr, held, err = a.Life(t.Context(), "a", a.Gen()); err != nil || addr == "" || !held {
		t.Fatalf("with its session: %q, %v, %v", addr, held, err)
	}
	if err := a.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if addr, held, err = a.Life(t.Context(), "a", a.Gen()); err != nil || addr != "" || !held {
		t.Fatalf("after Leave: %q, %v, %v; want no address, the session still held", addr, held, err)
	}
}

// TestElectorHoldsLife: a running Elector holds its life session, takes
// it again when PostgreSQL ends its connection, and lets it go when it
// stops.
func TestElectorHoldsLife(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.elector(t, "a", CoordConfig{}, ElectorConfig{})
	pids := make(chan uint32, 4)
	r.hooks.living = func(pid uint32) { pids <- pid }
	r.start(t)
	var pid uint32
	select {
	case pid = <-pids:
	case <-time.After(guard):
		t.Fatal("the life session was never held")
	}
	if _, err := b.pool.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, int64(pid)); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-pids:
		if again == pid {
			t.Fatalf("held again on the ended backend %d", pid)
		}
	case <-time.After(guard):
		t.Fatal("the life session was not held again after its backend ended")
	}
	gen := r.coord.Gen()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the life session released", func() bool {
		_, held, err := r.coord.Life(t.Context(), "a", gen)
		return err == nil && !held
	})
}

// TestMemberDeadNeedsBothSigns: a Member proves a replica dead only when
// PostgreSQL holds no life session of it and its fleet listener refuses
// connections (or its registration is gone).
func TestMemberDeadNeedsBothSigns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m, err := NewMember(t.Context(), b.pool, MemberConfig{Replica: "m", Listen: "127.0.0.1:0", Secret: "members"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.ln.Close() })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCoordinator(b.pool, CoordConfig{Replica: "x", Addr: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	life := b.lifeConn(t, other)
	if m.dead(t.Context(), "x", other.Gen()) {
		t.Fatal("dead while its session is held and its listener open")
	}
	ln.Close()
	if m.dead(t.Context(), "x", other.Gen()) {
		t.Fatal("dead while its session is held (a paused process's backend lives on)")
	}
	life.Close(context.Background())
	waitFor(t, "x proven dead once its session is gone too", func() bool { return m.dead(t.Context(), "x", other.Gen()) })

	// A live listener keeps a replica alive whose session alone ended.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	y, err := NewCoordinator(b.pool, CoordConfig{Replica: "y", Addr: ln2.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := y.Register(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m.dead(t.Context(), "y", y.Gen()) {
		t.Fatal("dead with no session but its listener open (its PostgreSQL connection alone ended)")
	}
}

// TestLeaderLostTakesOverOnlyFromAClosedListener: a follower whose
// session the leader closed asks its elector to take the term only when
// the leader's listener refuses connections; a leader that still
// listens (its PostgreSQL connection alone ended, or it closed one
// session) keeps its term.
func TestLeaderLostTakesOverOnlyFromAClosedListener(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m, err := NewMember(t.Context(), b.pool, MemberConfig{Replica: "m", Listen: "127.0.0.1:0", Secret: "members"})
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

// TestMemberLeaderCrashEndsTermAtOnce: when the leader's process dies —
// its sessions, listener and PostgreSQL connections close together —
// the follower takes the term long before it expires, and admits.
func TestMemberLeaderCrashEndsTermAtOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	type member struct {
		m      *Member
		pool   *pgxpool.Pool
		cancel context.CancelFunc
		done   chan error
	}
	start := func(id string) *member {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		m, err := NewMember(t.Context(), pool, MemberConfig{Replica: id, Secret: "s", Listen: "127.0.0.1:0",
			TermTTL: time.Minute, HeartbeatTimeout: 2 * time.Second, Poll: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &member{m: m, pool: pool, cancel: cancel, done: make(chan error, 1)}
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

	// The leader's process dies: no resignation reaches PostgreSQL.
	lead.pool.Close()
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
}
