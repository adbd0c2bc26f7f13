package fleet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/pgtest"
)

// guard bounds every wait in these tests; it is a failure guard, never
// the thing waited for.
const guard = 10 * time.Second

// bundle is one test's schema: its DSN and a migrated pool on it.
type bundle struct {
	dsn  string
	pool *pgxpool.Pool
}

func setup(t *testing.T) *bundle {
	t.Helper()
	dsn := pgtest.Schema(t)
	b := &bundle{dsn: dsn, pool: newPool(t, dsn, "fleet-test")}
	if err := Migrate(context.Background(), b.pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return b
}

// newPool opens another pool on dsn whose connections name themselves
// app in pg_stat_activity.
func newPool(t *testing.T, dsn, app string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// coord returns a Coordinator for replica id on the bundle's pool, with
// cfg's durations (zero: the defaults).
func (b *bundle) coord(t *testing.T, id string, cfg CoordConfig) *Coordinator {
	t.Helper()
	cfg.Replica, cfg.Addr = id, id+".fleet:7000"
	c, err := NewCoordinator(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it holds, failing the test after guard. It is
// for conditions on PostgreSQL's clock, which no local event announces.
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

func current(t *testing.T, c *Coordinator) Term {
	t.Helper()
	term, err := c.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return term
}

func ids(rs []Replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// TestMigrateConcurrentAndIdempotent: replicas starting together all
// migrate; one applies, the rest wait and find nothing to do, and goose's
// table is the fleet's own.
func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = Migrate(ctx, pool) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	var applied int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM weir_fleet_goose_version WHERE version_id > 0 AND is_applied`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(files) {
		t.Fatalf("%d migrations recorded as applied, want %d (each once)", applied, len(files))
	}
	var storage bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&storage); err != nil {
		t.Fatal(err)
	}
	if storage {
		t.Fatal("Migrate created goose_db_version, the storage package's table")
	}
	var term Term
	c, err := NewCoordinator(pool, CoordConfig{Replica: "r", Addr: "r:1"})
	if err != nil {
		t.Fatal(err)
	}
	if term, err = c.Current(ctx); err != nil || term.Epoch != 0 || term.Left != 0 {
		t.Fatalf("fresh term = %+v, %v; want epoch 0, ended", term, err)
	}
}

func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, cfg := range []CoordConfig{
		{Addr: "a:1"},
		{Replica: "a"},
		{Replica: "a\x00b", Addr: "a:1"},
		{Replica: "a", Addr: "\xff"},
		{Replica: string(make([]byte, 201)), Addr: "a:1"},
		{Replica: "a", Addr: "a:1", TermTTL: time.Millisecond},
		{Replica: "a", Addr: "a:1", HeartbeatTimeout: -time.Second},
	} {
		if _, err := NewCoordinator(pool, cfg); err == nil {
			t.Errorf("NewCoordinator(%+v) accepted", cfg)
		}
	}
	if _, err := NewCoordinator(nil, CoordConfig{Replica: "a", Addr: "a:1"}); err == nil {
		t.Error("NewCoordinator(nil pool) accepted")
	}
	c, err := NewCoordinator(pool, CoordConfig{Replica: "a", Addr: "a:1", TermTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Renew(ctx, math.MaxUint64); err == nil {
		t.Error("Renew of an epoch past bigint accepted")
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
	for _, cfg := range []ElectorConfig{{Margin: 500 * time.Millisecond}, {Margin: -1}, {Poll: time.Millisecond}} {
		if _, err := NewElector(c, cfg); err == nil {
			t.Errorf("NewElector(%+v) accepted with a 1s TTL", cfg)
		}
	}
	if _, err := NewElector(nil, ElectorConfig{}); err == nil {
		t.Error("NewElector(nil) accepted")
	}
}

// TestCampaignOneWinner: of ten concurrent campaigners for an expired
// term exactly one takes it, and every loser is told the winner's term.
// A transaction holding the term row lines all ten up behind it first, so
// they really do run at once.
func TestCampaignOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 10
	pool := newPool(t, b.dsn+"&pool_max_conns=12", "fleet-campaigners")
	blocker, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM weir_fleet_term FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		term Term
		won  bool
		err  error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		id := string(rune('a' + i))
		c, err := NewCoordinator(pool, CoordConfig{Replica: id, Addr: id + ".fleet:7000", TermTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			r := &results[i]
			r.term, r.won, r.err = c.Campaign(ctx)
		})
	}
	waitFor(t, "all campaigners wait for the term row", func() bool {
		var waiting int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'fleet-campaigners' AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting == n
	})
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var winner string
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("campaigner %d: %v", i, r.err)
		}
		if r.won {
			if winner != "" {
				t.Fatalf("both %s and %s won", winner, r.term.Leader)
			}
			winner = r.term.Leader
		}
	}
	if winner == "" {
		t.Fatal("no campaigner won an expired term")
	}
	for i, r := range results {
		if r.term.Epoch != 1 || r.term.Leader != winner || r.term.Addr != winner+".fleet:7000" || r.term.Left <= 0 {
			t.Errorf("campaigner %d saw %+v; want epoch 1 led by %s, running", i, r.term, winner)
		}
	}
}

// TestDeposedLeaderIsRefused: once another replica took the expired term,
// the old leader's Renew and Forget change nothing, while the new
// leader's Forget works.
func TestDeposedLeaderIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := CoordConfig{TermTTL: 200 * time.Millisecond, HeartbeatTimeout: 100 * time.Millisecond}
	a, bb, gone := b.coord(t, "a", cfg), b.coord(t, "b", cfg), b.coord(t, "gone", cfg)
	gen, err := gone.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	term, won, err := a.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("a's campaign = %+v, %v, %v", term, won, err)
	}
	waitFor(t, "gone lapses", func() bool {
		rs, err := a.Lapsed(ctx)
		return err == nil && slices.Contains(ids(rs), "gone")
	})
	// b takes over once a's term has expired on PostgreSQL's clock.
	var next Term
	waitFor(t, "b takes the expired term", func() bool {
		var won bool
		next, won, err = bb.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return won
	})
	if next.Epoch != term.Epoch+1 || next.Leader != "b" {
		t.Fatalf("b took %+v, want epoch %d led by b", next, term.Epoch+1)
	}
	if ok, err := a.Renew(ctx, term.Epoch); err != nil || ok {
		t.Fatalf("deposed a's Renew = %v, %v; want refused", ok, err)
	}
	if ok, err := a.Forget(ctx, term.Epoch, "gone", gen); err != nil || ok {
		t.Fatalf("deposed a's Forget = %v, %v; want refused", ok, err)
	}
	// a cannot pass off b's epoch as its own either.
	if ok, err := a.Forget(ctx, next.Epoch, "gone", gen); err != nil || ok {
		t.Fatalf("a's Forget under b's epoch = %v, %v; want refused", ok, err)
	}
	if rs, _ := bb.Lapsed(ctx); !slices.Contains(ids(rs), "gone") {
		t.Fatal("a refused Forget removed the row")
	}
	if ok, err := bb.Forget(ctx, next.Epoch, "gone", gen+1); err != nil || ok {
		t.Fatalf("Forget of another generation = %v, %v; want refused", ok, err)
	}
	if ok, err := bb.Forget(ctx, next.Epoch, "gone", gen); err != nil || !ok {
		t.Fatalf("the leader's Forget = %v, %v; want done", ok, err)
	}
	if err := gone.Heartbeat(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("a forgotten replica's Heartbeat = %v, want ErrFenced", err)
	}
	if ok, err := bb.Renew(ctx, next.Epoch); err != nil || !ok {
		t.Fatalf("the leader's Renew = %v, %v; want done", ok, err)
	}
}

// TestForgetRefusesLiveReplica: a replica that heartbeated within the
// timeout is not forgotten, even by the current leader.
func TestForgetRefusesLiveReplica(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	leader := b.coord(t, "l", CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: time.Minute})
	r := b.coord(t, "r", CoordConfig{})
	gen, err := r.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	term, won, err := leader.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("campaign: %v %v", won, err)
	}
	if ok, err := leader.Forget(ctx, term.Epoch, "r", gen); err != nil || ok {
		t.Fatalf("Forget of a live replica = %v, %v; want refused", ok, err)
	}
	if err := r.Heartbeat(ctx); err != nil {
		t.Fatalf("Heartbeat after a refused Forget: %v", err)
	}
}

// TestRegisterSupersedes: a restarted replica (same id) gets a newer
// generation, and the old generation's heartbeat is fenced; forgetting and
// registering again never hands back an old generation.
func TestRegisterSupersedes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: 50 * time.Millisecond}
	old, restarted := b.coord(t, "a", cfg), b.coord(t, "a", cfg)
	g1, err := old.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	g2, err := restarted.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g2 != g1+1 {
		t.Fatalf("second Register gave gen %d after %d, want %d", g2, g1, g1+1)
	}
	if err := old.Heartbeat(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old generation's Heartbeat = %v, want ErrFenced", err)
	}
	if err := restarted.Heartbeat(ctx); err != nil {
		t.Fatalf("the new generation's Heartbeat: %v", err)
	}

	// Forget the new generation, then register again: still newer.
	leader := b.coord(t, "l", cfg)
	term, _, err := leader.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a lapses and is forgotten", func() bool {
		ok, err := leader.Forget(ctx, term.Epoch, "a", g2)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	g3, err := old.Register(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g3 <= g2 {
		t.Fatalf("Register after Forget gave gen %d, not newer than %d", g3, g2)
	}
	if err := restarted.Heartbeat(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("the forgotten generation's Heartbeat = %v, want ErrFenced", err)
	}
}

// TestLiveAndLapsed: a replica that keeps heartbeating is live; one that
// stops lapses after HeartbeatTimeout on PostgreSQL's clock.
func TestLiveAndLapsed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := CoordConfig{HeartbeatTimeout: 300 * time.Millisecond}
	alive, quiet := b.coord(t, "alive", cfg), b.coord(t, "quiet", cfg)
	for _, c := range []*Coordinator{alive, quiet} {
		if _, err := c.Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	live, err := alive.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(live); !slices.Equal(got, []string{"alive", "quiet"}) {
		t.Fatalf("Live = %v, want both", got)
	}
	if live[0].Addr != "alive.fleet:7000" || live[0].Gen == 0 || live[0].HeartbeatAge < 0 || live[0].HeartbeatAge >= cfg.HeartbeatTimeout {
		t.Fatalf("Live[0] = %+v", live[0])
	}
	waitFor(t, "quiet lapses", func() bool {
		if err := alive.Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		rs, err := alive.Lapsed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(ids(rs), []string{"quiet"})
	})
	lapsed, _ := alive.Lapsed(ctx)
	if lapsed[0].HeartbeatAge < cfg.HeartbeatTimeout {
		t.Fatalf("lapsed heartbeat age %v, below the timeout %v", lapsed[0].HeartbeatAge, cfg.HeartbeatTimeout)
	}
	live, err = alive.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(live); !slices.Equal(got, []string{"alive"}) {
		t.Fatalf("Live = %v, want only alive", got)
	}
}

// listenTerm returns a connection LISTENing on the schema's term channel.
func listenTerm(t *testing.T, b *bundle) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var channel string
	if err := conn.QueryRow(ctx, listenChannelSQL).Scan(&channel); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

func nextNotification(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return n.Payload
}

// TestTermChangesAreNotified: a won campaign and a resignation each NOTIFY
// the epoch; a renewal does not; and Resign ends the term at once.
func TestTermChangesAreNotified(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	conn := listenTerm(t, b)
	a := b.coord(t, "a", CoordConfig{TermTTL: time.Minute})
	term, won, err := a.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("campaign: %v %v", won, err)
	}
	if p := nextNotification(t, conn); p != "1" {
		t.Fatalf("campaign notified %q, want epoch 1", p)
	}
	if ok, err := a.Renew(ctx, term.Epoch); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	if _, won, err := a.Campaign(ctx); err != nil || won {
		t.Fatalf("campaign for a running term: won %v, %v", won, err)
	}
	if err := a.Resign(ctx, term.Epoch); err != nil {
		t.Fatal(err)
	}
	// The renewal and the lost campaign sent nothing: the next
	// notification is the resignation's.
	if p := nextNotification(t, conn); p != "1" {
		t.Fatalf("resign notified %q, want epoch 1", p)
	}
	if got := current(t, a); got.Epoch != 1 || got.Left != 0 {
		t.Fatalf("after Resign the term is %+v, want epoch 1 ended", got)
	}
	if ok, err := a.Renew(ctx, term.Epoch); err != nil || ok {
		t.Fatalf("Renew of a resigned term = %v, %v; want refused", ok, err)
	}
	bb := b.coord(t, "b", CoordConfig{TermTTL: time.Minute})
	next, won, err := bb.Campaign(ctx)
	if err != nil || !won || next.Epoch != 2 {
		t.Fatalf("campaign after resign = %+v, %v, %v; want epoch 2 won", next, won, err)
	}
	if p := nextNotification(t, conn); p != "2" {
		t.Fatalf("second campaign notified %q, want epoch 2", p)
	}
}

// TestFenceHoldsOffCampaign: a transaction fenced under the current epoch
// keeps the next campaign waiting until it ends, even past the term's
// expiry; afterwards the old epoch's Fence is refused.
func TestFenceHoldsOffCampaign(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a := b.coord(t, "a", CoordConfig{TermTTL: 200 * time.Millisecond})
	term, won, err := a.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("campaign: %v %v", won, err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := a.Fence(ctx, tx, term.Epoch); err != nil {
		t.Fatalf("Fence of the current term: %v", err)
	}
	waitFor(t, "a's term expires", func() bool { return current(t, a).Left == 0 })

	type result struct {
		term Term
		won  bool
		err  error
	}
	done := make(chan result, 1)
	c, err := NewCoordinator(newPool(t, b.dsn, "fleet-campaigner"), CoordConfig{Replica: "b", Addr: "b:1", TermTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var r result
		r.term, r.won, r.err = c.Campaign(ctx)
		done <- r
	}()
	waitFor(t, "the campaign waits for the fenced transaction", func() bool {
		var waiting bool
		err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = 'fleet-campaigner' AND wait_event_type = 'Lock')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	select {
	case r := <-done:
		t.Fatalf("the campaign ended while a fenced transaction was open: %+v", r)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || !r.won || r.term.Epoch != term.Epoch+1 {
			t.Fatalf("campaign after the fenced commit = %+v", r)
		}
	case <-time.After(guard):
		t.Fatal("the campaign did not finish after the fenced transaction committed")
	}
	tx2, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	if err := a.Fence(ctx, tx2, term.Epoch); !errors.Is(err, ErrDeposed) {
		t.Fatalf("Fence of a deposed epoch = %v, want ErrDeposed", err)
	}
}

// TestRegisterPublishesWorkers: each replica's worker count is read back
// with its registration, for the leader to sum.
func TestRegisterPublishesWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for id, n := range map[string]int{"a": 3, "b": 5} {
		if _, err := b.coord(t, id, CoordConfig{Workers: n}).Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	live, err := b.coord(t, "a", CoordConfig{}).Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live[0].Workers != 3 || live[1].Workers != 5 {
		t.Fatalf("Live = %+v; want a with 3 workers, b with 5", live)
	}
	if _, err := NewCoordinator(b.pool, CoordConfig{Replica: "c", Addr: "c:1", Workers: -1}); err == nil {
		t.Fatal("NewCoordinator with -1 workers: no error")
	}
}

// TestSecretIsMadeOnce: replicas asking for the fleet's secret at once
// all get the one the first of them made, and it stays.
func TestSecretIsMadeOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		c := b.coord(t, fmt.Sprintf("r%d", i), CoordConfig{})
		wg.Go(func() { got[i], errs[i] = c.Secret(context.Background()) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] || len(got[i]) < 32 {
			t.Fatalf("Secret #%d = %q, %v; want %q from every replica", i, got[i], errs[i], got[0])
		}
	}
	again, err := b.coord(t, "later", CoordConfig{}).Secret(context.Background())
	if err != nil || again != got[0] {
		t.Fatalf("a later Secret = %q, %v; want %q", again, err, got[0])
	}
}

// TestRestartedReplicaTakesItsTerm: a replica id registered anew (its
// process restarted) takes the term its earlier registration still
// holds at once, under a new epoch that refuses the old one's writes;
// another replica, and the same registration, must wait for the expiry.
func TestRestartedReplicaTakesItsTerm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := CoordConfig{TermTTL: time.Hour}
	old := b.coord(t, "r0", cfg)
	if _, err := old.Register(ctx); err != nil {
		t.Fatal(err)
	}
	term, won, err := old.Campaign(ctx)
	if err != nil || !won {
		t.Fatalf("the first campaign = %+v, %v, %v", term, won, err)
	}
	other := b.coord(t, "r1", cfg)
	if _, err := other.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, won, err := other.Campaign(ctx); err != nil || won {
		t.Fatalf("another replica's campaign under a running term = %v, %v; want lost", won, err)
	}
	if _, won, err := old.Campaign(ctx); err != nil || won {
		t.Fatalf("the holder's own second campaign = %v, %v; want lost (its term runs)", won, err)
	}
	restarted := b.coord(t, "r0", cfg)
	if _, err := restarted.Register(ctx); err != nil {
		t.Fatal(err)
	}
	next, won, err := restarted.Campaign(ctx)
	if err != nil || !won || next.Epoch != term.Epoch+1 {
		t.Fatalf("the restarted replica's campaign = %+v, %v, %v; want epoch %d at once", next, won, err, term.Epoch+1)
	}
	if ok, err := old.Renew(ctx, term.Epoch); err != nil || ok {
		t.Fatalf("the earlier registration's Renew = %v, %v; want refused", ok, err)
	}
	if _, won, err := restarted.Campaign(ctx); err != nil || won {
		t.Fatalf("the restarted replica's second campaign = %v, %v; want lost (its own term runs)", won, err)
	}
}
