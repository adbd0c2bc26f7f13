package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoListen means a notification sent to this replica's own LISTEN
// connection never arrived: the DSN most likely leads through a PgBouncer
// in transaction or statement pooling mode, which hands each statement to
// whichever server connection is free and silently loses LISTEN.
var ErrNoListen = errors.New("fleet: LISTEN receives no notifications on a connection of this DSN " +
	"(a PgBouncer in transaction or statement pooling mode loses them): " +
	"give the fleet a direct PostgreSQL DSN, or a session-pooled one")

// probeTimeout is how long the listener waits for its own probe,
// unless a test says otherwise.
const probeTimeout = 5 * time.Second

// listenChannelSQL names the channel the term trigger notifies: the same
// expression over the schema of the weir_fleet_term that this connection's
// search_path finds (the trigger uses TG_TABLE_SCHEMA; see the migration).
const listenChannelSQL = `
	SELECT 'weir_fleet_term_' || to_hex(hashtext(n.nspname::text))
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'weir_fleet_term'::regclass`

// listen keeps a dedicated connection LISTENing for term notifications and
// asks the term loop to re-read the term on each one, and in full after
// every (re)connection, since what was sent while it was away is lost.
// The first connection must pass the probe, or listen returns ErrNoListen;
// other failures are retried (at once after a lost connection, then with
// a growing jittered pause) until ctx ends.
func (e *Elector) listen(ctx context.Context) error {
	probed := false
	pause := time.Duration(0)
	for attempt := 1; ctx.Err() == nil; attempt++ {
		if e.hooks.connecting != nil {
			e.hooks.connecting(attempt)
		}
		listened, err := e.listenOnce(ctx, &probed)
		if errors.Is(err, ErrNoListen) {
			e.log.Error("fleet listener", "err", err)
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		if listened {
			pause = 0
		} else {
			pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
		}
		e.log.Warn("fleet listener lost its connection; reconnecting", "err", err, "after", pause)
		if pause > 0 {
			w := newWaker(e.clock)
			w.arm(pause/2 + mathrand.N(pause))
			select {
			case <-ctx.Done():
			case <-w.c:
			}
			w.stop()
		}
	}
	return nil
}

// listenOnce connects, LISTENs and waits for notifications until the
// connection fails or ctx ends. listened reports whether it got as far as
// LISTENing.
func (e *Elector) listenOnce(ctx context.Context, probed *bool) (listened bool, err error) {
	// A connection of its own, outside the pool: a LISTEN lives as long as
	// its session, and the pool's connections are shared.
	cfg := e.coord.pool.Config().ConnConfig.Copy()
	dialCtx, cancel := context.WithTimeout(ctx, e.opTimeout())
	conn, err := pgx.ConnectConfig(dialCtx, cfg)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	setupCtx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	var channel string
	if err := conn.QueryRow(setupCtx, listenChannelSQL).Scan(&channel); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return false, fmt.Errorf("find the term table (run fleet.Migrate): %w", err)
		}
		return false, fmt.Errorf("name the channel: %w", err)
	}
	if _, err := conn.Exec(setupCtx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	if !*probed {
		if err := e.probe(ctx, conn, channel); err != nil {
			return false, err
		}
		*probed = true
	}
	cancel()
	// Anything sent before the LISTEN took effect is lost: read the term
	// in full now.
	e.signalRefresh()
	if e.hooks.listening != nil {
		e.hooks.listening(conn.PgConn().PID())
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		if n.Channel == channel {
			e.signalRefresh()
		}
	}
}

// probe checks that the LISTEN connection receives notifications: it
// LISTENs on a channel of its own, NOTIFYs it from another connection of
// the pool, and waits for the notification. Through PgBouncer in
// transaction mode the LISTEN lands on a server connection the client no
// longer holds, and nothing arrives.
func (e *Elector) probe(ctx context.Context, conn *pgx.Conn, channel string) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "weir_fleet_probe_" + hex.EncodeToString(b[:])
	pctx, cancel := context.WithTimeout(ctx, e.probeTimeout)
	defer cancel()
	if _, err := conn.Exec(pctx, "LISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("probe: listen: %w", err)
	}
	if _, err := e.coord.pool.Exec(pctx, "SELECT pg_notify($1, 'probe')", name); err != nil {
		return fmt.Errorf("probe: notify: %w", err)
	}
	for {
		n, err := conn.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() == nil && pctx.Err() != nil {
				return fmt.Errorf("%w (no probe notification within %v)", ErrNoListen, e.probeTimeout)
			}
			return fmt.Errorf("probe: %w", err)
		}
		switch n.Channel {
		case name:
			if _, err := conn.Exec(pctx, "UNLISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
				return fmt.Errorf("probe: unlisten: %w", err)
			}
			return nil
		case channel:
			e.signalRefresh()
		}
	}
}

// life keeps this replica's life session (Coordinator.HoldLife) on a
// connection of its own for as long as ctx runs, connecting again (at
// once, then with a growing jittered pause) whenever it is lost.
func (e *Elector) life(ctx context.Context) {
	pause := time.Duration(0)
	for ctx.Err() == nil {
		held, err := e.lifeOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if held {
			pause = 0
		} else {
			pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
		}
		e.log.Warn("fleet life session lost; connecting again", "err", err, "after", pause)
		if pause > 0 {
			w := newWaker(e.clock)
			w.arm(pause/2 + mathrand.N(pause))
			select {
			case <-ctx.Done():
			case <-w.c:
			}
			w.stop()
		}
	}
}

// lifeOnce connects, takes the life lock and holds it until the
// connection fails or ctx ends; held reports whether it got the lock.
func (e *Elector) lifeOnce(ctx context.Context) (held bool, err error) {
	cfg := e.coord.pool.Config().ConnConfig.Copy()
	dialCtx, cancel := context.WithTimeout(ctx, e.opTimeout())
	conn, err := pgx.ConnectConfig(dialCtx, cfg)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	lockCtx, cancel := context.WithTimeout(ctx, e.opTimeout())
	err = e.coord.HoldLife(lockCtx, conn)
	cancel()
	if err != nil {
		return false, err
	}
	if e.hooks.living != nil {
		e.hooks.living(conn.PgConn().PID())
	}
	// Nothing is ever sent on it: waiting reads until the session ends.
	for {
		if err := conn.PgConn().WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("hold: %w", err)
		}
	}
}
