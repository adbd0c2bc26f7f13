package postgres

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/fleet/coordtest"
	"github.com/weir-gateway/weir/pgtest"
)

// guard bounds every wait in these tests; it is a failure guard, never
// the thing waited for.
const guard = 10 * time.Second

// TestCoordination runs the fleet's coordination suite on a DB of a
// schema of each test's own.
func TestCoordination(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	coordtest.Exercise(t, func(t *testing.T) coordtest.Backend {
		db := openTemp(t)
		return coordtest.Backend{Store: db, Fence: func(ctx context.Context, leader string, epoch uint64) (coordtest.FencedWrite, error) {
			return fenceWrite(ctx, db, leader, epoch)
		}}
	})
}

// fencedTx is a transaction fenced by a term (TermFenceTx), open until End.
type fencedTx struct {
	db   *DB
	tx   pgx.Tx
	pid  uint32
	held bool
}

func fenceWrite(ctx context.Context, db *DB, leader string, epoch uint64) (*fencedTx, error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	w := &fencedTx{db: db, tx: tx}
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&w.pid); err != nil {
		tx.Rollback(ctx)
		return nil, err
	}
	if w.held, err = db.TermFenceTx(ctx, tx, leader, epoch); err != nil {
		tx.Rollback(ctx)
		return nil, err
	}
	return w, nil
}

func (w *fencedTx) Held() bool { return w.held }

// Waiting counts the backends whose lock waits for the fenced
// transaction's.
func (w *fencedTx) Waiting(ctx context.Context) (int, error) {
	var n int
	err := w.db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, int64(w.pid)).Scan(&n)
	return n, err
}

func (w *fencedTx) End(ctx context.Context) error { return w.tx.Commit(ctx) }

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

// waitFor polls cond until it holds, failing the test after guard. It is
// for conditions on PostgreSQL's state, which no local event announces.
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

// TestCampaignLinedUp: of ten campaigners that all wait for the term
// row's lock at once, exactly one takes the expired term once the lock
// is free, and every loser is told the winner's term: the row lock, not
// the order of arrival, lines them up.
func TestCampaignLinedUp(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	db := open(t, dsn)
	ctx := context.Background()
	const n = 10
	campaigners := newDB(newPool(t, dsn+"&pool_max_conns=12", "fleet-campaigners"), nil)
	blocker, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM weir_fleet_term FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	results := make([]coordtest.Campaign, n)
	var wg sync.WaitGroup
	for i := range n {
		id := string(rune('a' + i))
		wg.Go(func() {
			r := &results[i]
			r.Term, r.Won, r.Err = campaigners.TermCampaign(ctx, &fleet.TermCampaignParams{Replica: id, Addr: id + ".fleet:7000", TTL: time.Minute})
		})
	}
	waitFor(t, "all campaigners wait for the term row", func() bool {
		var waiting int
		if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'fleet-campaigners' AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting == n
	})
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	coordtest.OneWinner(t, results)
}

// TestCoordinationRefusesWhatBigintCannotHold: epochs and generations
// past PostgreSQL's bigint are refused, not wrapped around.
func TestCoordinationRefusesWhatBigintCannotHold(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	ctx := t.Context()
	const big = math.MaxUint64
	checks := map[string]error{
		"heartbeat": db.ReplicaHeartbeat(ctx, "a", big),
		"leave":     db.ReplicaLeave(ctx, "a", big),
		"resign":    db.TermResign(ctx, big, "a"),
		"hold life": db.LifeHold(ctx, "a", big),
	}
	_, _, checks["campaign"] = db.TermCampaign(ctx, &fleet.TermCampaignParams{Replica: "a", Addr: "a:1", Gen: big, TTL: time.Second})
	_, _, checks["take over"] = db.TermCampaign(ctx, &fleet.TermCampaignParams{Replica: "a", Addr: "a:1", TTL: time.Second, TakeOver: true, Epoch: big})
	_, checks["renew"] = db.TermRenew(ctx, &fleet.TermRenewParams{Epoch: big, Leader: "a", TTL: time.Second})
	_, checks["forget"] = db.ReplicaForget(ctx, &fleet.ReplicaForgetParams{Epoch: 1, Leader: "a", ID: "b", Gen: big, Timeout: time.Second})
	_, checks["life"] = db.LifeGet(ctx, "a", big)
	for what, err := range checks {
		if err == nil {
			t.Errorf("%s past bigint: no error", what)
		}
	}
	if term, err := db.TermGet(ctx); err != nil || term.Epoch != 0 {
		t.Fatalf("the term after refused calls: %+v, %v; want epoch 0", term, err)
	}
}

// TestTermListenReconnects: when the listener's connection is killed it
// connects and LISTENs again; an election announced after that arrives,
// and one announced while it was away is found by the full re-read. The
// term's TTL and the poll are far longer than the guard, so only these
// paths can deliver in time.
func TestTermListenReconnects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// whileAway: resign while no LISTEN is active, before the second
		// connection attempt.
		whileAway bool
	}{
		{name: "change after reconnect"},
		{name: "change while away", whileAway: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.Schema(t)
			ctx := context.Background()
			leader, err := fleet.NewCoordinator(open(t, dsn), fleet.CoordConfig{Replica: "l", Addr: "l:1", TermTTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			term, won, err := leader.Campaign(ctx)
			if err != nil || !won {
				t.Fatalf("campaign: %v %v", won, err)
			}
			f := open(t, dsn)
			pids := make(chan uint32, 4)
			resigned := make(chan error, 1)
			var attempts int
			f.hooks = dbHooks{
				listening: func(pid uint32) { pids <- pid },
				connecting: func() {
					if attempts++; tc.whileAway && attempts == 2 {
						resigned <- leader.Resign(ctx, term.Epoch)
					}
				},
			}
			r := runElector(t, f, "f", fleet.CoordConfig{TermTTL: time.Minute, HeartbeatTimeout: time.Minute})
			var first uint32
			select {
			case first = <-pids:
			case <-time.After(guard):
				t.Fatal("f never LISTENed")
			}
			waitTerm(t, r, "f sees l lead", ledBy("l", 1))
			if _, err := f.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int64(first)); err != nil {
				t.Fatal(err)
			}
			select {
			case second := <-pids:
				if second == first {
					t.Fatalf("listening again on the killed backend %d", first)
				}
			case <-time.After(guard):
				t.Fatal("f did not LISTEN again after its connection was killed")
			}
			if tc.whileAway {
				if err := <-resigned; err != nil {
					t.Fatal(err)
				}
			} else if err := leader.Resign(ctx, term.Epoch); err != nil {
				t.Fatal(err)
			}
			waitTerm(t, r, "f takes the resigned term", ledBy("f", 2))
		})
	}
}

// TestLifeHoldReconnects: a running Elector holds its life session,
// takes it again when PostgreSQL ends its connection, and lets it go
// when it stops.
func TestLifeHoldReconnects(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	pids := make(chan uint32, 4)
	db.hooks.living = func(pid uint32) { pids <- pid }
	r := runElector(t, db, "a", fleet.CoordConfig{})
	var pid uint32
	select {
	case pid = <-pids:
	case <-time.After(guard):
		t.Fatal("the life session was never held")
	}
	if _, err := db.pool.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, int64(pid)); err != nil {
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
	waitTerm(t, r, "a leads", ledBy("a", 1))
	gen := r.coord.Gen()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the life session released", func() bool {
		l, err := db.LifeGet(t.Context(), "a", gen)
		return err == nil && !l.Held
	})
}

// running is an Elector whose Run goes on in the background.
type running struct {
	*fleet.Elector
	coord  *fleet.Coordinator
	cancel context.CancelFunc
	done   chan error
}

// runElector runs an Elector for replica id on db until the test ends.
func runElector(t *testing.T, db *DB, id string, cc fleet.CoordConfig) *running {
	t.Helper()
	cc.Replica, cc.Addr = id, id+".fleet:7000"
	c, err := fleet.NewCoordinator(db, cc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := fleet.NewElector(c, fleet.ElectorConfig{Poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Elector: e, coord: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(guard):
		t.Fatalf("Run of %s did not return after cancel", r.coord.Replica())
		return nil
	}
}

// waitTerm reads r's Changes until a term satisfies want.
func waitTerm(t *testing.T, r *running, what string, want func(fleet.Term) bool) {
	t.Helper()
	timeout := time.After(guard)
	for {
		select {
		case term, ok := <-r.Changes():
			if !ok {
				err := <-r.done
				r.done <- err
				t.Fatalf("%s: Changes closed (Run: %v)", what, err)
			}
			if want(term) {
				return
			}
		case <-timeout:
			t.Fatalf("%s: not reported within %v", what, guard)
		}
	}
}

func ledBy(id string, epoch uint64) func(fleet.Term) bool {
	return func(t fleet.Term) bool { return t.Leader == id && t.Epoch == epoch && t.Left > 0 }
}
