package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir/fleet"
)

// A replica's life session: a session-level advisory lock that the
// replica holds on a connection of its own, outside the pool, for as long
// as its process lives (LifeHold). PostgreSQL ends a backend whose
// client's socket closed, and with it the lock, at once: a replica whose
// lock is free has lost its connection to PostgreSQL — its process died,
// or the connection alone was ended (pg_terminate_backend, a restart of
// PostgreSQL), which LifeHold mends by connecting again. A paused or
// cut-off process keeps its backend, and its lock. The lock's keys are a
// hash of the schema, so that fleets in other schemas of a database never
// meet, and the generation.

// lifeClassSQL is the first key of the life locks: the schema's.
const lifeClassSQL = `(SELECT hashtext(n.nspname::text || '.weir_fleet_life')
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'weir_fleet_replicas'::regclass)`

// lifeHeldSQL is true while the life lock of the generation gen (an SQL
// expression) is held.
func lifeHeldSQL(gen string) string {
	return `EXISTS (SELECT 1 FROM pg_locks lk
		WHERE lk.locktype = 'advisory' AND lk.objsubid = 2 AND lk.granted
		  AND lk.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND lk.classid = (` + lifeClassSQL + `::bigint & 4294967295)::oid
		  AND lk.objid = ((` + gen + `) & 2147483647)::oid)`
}

const (
	// lifeLockWait bounds the wait for the life lock on a new connection:
	// an earlier connection of the same generation that PostgreSQL has
	// not yet seen end may hold it, and a connection that hangs is made
	// again after it.
	lifeLockWait = 10 * time.Second
	// reconnectPauseMax bounds the pause between attempts to connect
	// again, of the listener and of a life session.
	reconnectPauseMax = 5 * time.Second
)

// LifeHold implements fleet.Liveness: it takes the life lock of id at
// generation gen on a connection of its own and holds it until ctx ends,
// connecting again (at once, then after a growing jittered pause)
// whenever the connection is lost.
func (db *DB) LifeHold(ctx context.Context, id string, gen uint64) error {
	g, err := toInt64("generation", gen)
	if err != nil {
		return err
	}
	pause := time.Duration(0)
	for ctx.Err() == nil {
		held, err := db.lifeOnce(ctx, g)
		if ctx.Err() != nil {
			break
		}
		pause = nextPause(pause, held)
		db.log.Warn("fleet life session lost; connecting again", "replica", id, "gen", gen, "err", err, "after", pause)
		sleepCtx(ctx, pause)
	}
	return nil
}

// lifeOnce connects, takes the life lock and holds it until the
// connection fails or ctx ends; held reports whether it got the lock.
func (db *DB) lifeOnce(ctx context.Context, gen int64) (held bool, err error) {
	conn, err := db.connect(ctx)
	if err != nil {
		return false, err
	}
	defer closeConn(ctx, conn)
	lockCtx, cancel := context.WithTimeout(ctx, lifeLockWait)
	_, err = conn.Exec(lockCtx, `SELECT pg_advisory_lock(`+lifeClassSQL+`, ($1::bigint & 2147483647)::int4)`, gen)
	cancel()
	if err != nil {
		return false, fmt.Errorf("take the life lock: %w", err)
	}
	if db.hooks.living != nil {
		db.hooks.living(conn.PgConn().PID())
	}
	// Nothing is ever sent on it: waiting reads until the session ends.
	for {
		if err := conn.PgConn().WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("hold: %w", err)
		}
	}
}

// LifeGet implements fleet.Liveness.
func (db *DB) LifeGet(ctx context.Context, id string, gen uint64) (fleet.Life, error) {
	g, err := toInt64("generation", gen)
	if err != nil {
		return fleet.Life{}, err
	}
	var addr *string
	var l fleet.Life
	err = db.pool.QueryRow(ctx, `
		SELECT (SELECT addr FROM weir_fleet_replicas WHERE id = $1 AND gen = $2), `+lifeHeldSQL("$2::bigint"), id, g).Scan(&addr, &l.Held)
	if err != nil {
		return fleet.Life{}, err
	}
	if addr != nil {
		l.Addr = *addr
	}
	return l, nil
}

// connect opens a connection of its own, outside the pool, with the
// pool's settings: a LISTEN or a session lock lives as long as its
// session, and the pool's connections are shared.
func (db *DB) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// closeConn closes a connection of connect's, even once ctx has ended.
func closeConn(ctx context.Context, conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	conn.Close(cctx)
}

// nextPause is the pause before connecting again: none after a
// connection that worked, then doubling from 100ms up to
// reconnectPauseMax.
func nextPause(last time.Duration, worked bool) time.Duration {
	if worked {
		return 0
	}
	return min(max(2*last, 100*time.Millisecond), reconnectPauseMax)
}

// sleepCtx waits d, jittered to [d/2, 3d/2), or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d/2 + rand.N(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
