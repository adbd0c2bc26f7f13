package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weir-gateway/weir/fleet"
)

// One LISTEN connection per DB carries every notification this process
// follows: the fleet's term announcements (TermListen), the task
// notices (ListenTasks) and the catalog's versions (ListenCatalog). It is a connection of its own, outside the pool
// (a LISTEN lives as long as its session), made when the first listener
// comes and closed when the last one goes. When it is lost the listener
// connects and LISTENs again — at once after a connection that had
// listened, then after a growing jittered pause — and tells every
// listener to read everything again, since what was sent meanwhile is
// lost.
//
// LISTEN needs a session of its own: a PgBouncer in transaction or
// statement pooling mode silently drops notifications (and breaks the
// migration lock, a session advisory lock), so the fleet needs a direct
// DSN or a session-pooled one. The first connection checks this: it
// NOTIFYs itself from a connection of the pool and waits for the
// notification; when nothing arrives, TermListen fails with
// fleet.ErrNoListen (task notices go on, deaf: the task service's poll is
// their safety net).

// termChannelSQL names the channel of the term trigger (migration 00008):
// the same expression over the schema of the weir_fleet_term that this
// connection's search_path finds (the trigger uses TG_TABLE_SCHEMA).
const termChannelSQL = `SELECT 'weir_fleet_term_' || to_hex(hashtext(n.nspname::text))
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'weir_fleet_term'::regclass`

const (
	// probeTimeout is how long the first connection waits for its own
	// probe notification, unless a test says otherwise.
	probeTimeout = 5 * time.Second
	// listenSetupTimeout bounds naming the channels and LISTENing on a
	// new connection.
	listenSetupTimeout = 10 * time.Second
)

// listener is a DB's one LISTEN connection and the listeners it serves.
type listener struct {
	db *DB

	mu   sync.Mutex
	subs map[*subscription]struct{}
	run  *listenRun // the connection's loop, while anyone listens
	// probed says the first connection has checked that notifications
	// arrive; noListen is closed, and noListenErr set, if they do not.
	probed      bool
	noListen    chan struct{}
	noListenErr error
}

// listenRun is one run of the loop, from the first listener to the last.
type listenRun struct {
	cancel    context.CancelFunc
	done      chan struct{}
	listening bool // LISTENed on its current connection
}

// subscription is one listener: of term announcements, of task notices
// or of catalog versions.
type subscription struct {
	term    func(epoch uint64)
	task    func(event, id string)
	catalog func(version int64)
}

// resync tells the listener it may have missed notifications.
func (s *subscription) resync() {
	if s.term != nil {
		s.term(0)
	}
	if s.task != nil {
		s.task("", "")
	}
	if s.catalog != nil {
		s.catalog(0)
	}
}

// TermListen implements fleet.TermListener.
func (db *DB) TermListen(ctx context.Context, f func(epoch uint64)) error {
	return db.listener.follow(ctx, &subscription{term: f})
}

// follow adds s to the listeners until ctx ends (or, for a term
// listener, until notifications are found not to arrive), starting the
// loop if it is the first and stopping it if it is the last.
func (l *listener) follow(ctx context.Context, s *subscription) error {
	l.mu.Lock()
	if s.term != nil && l.noListenErr != nil {
		err := l.noListenErr
		l.mu.Unlock()
		return err
	}
	if l.subs == nil {
		l.subs = make(map[*subscription]struct{})
		l.noListen = make(chan struct{})
	}
	l.subs[s] = struct{}{}
	switch {
	case l.run == nil:
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		l.run = &listenRun{cancel: cancel, done: make(chan struct{})}
		go l.loop(runCtx, l.run)
	case l.run.listening:
		// Listening already: it hears from now on, and reads what was
		// before.
		s.resync()
	}
	noListen := l.noListen
	l.mu.Unlock()

	var err error
	if s.term != nil {
		select {
		case <-ctx.Done():
		case <-noListen:
			l.mu.Lock()
			err = l.noListenErr
			l.mu.Unlock()
		}
	} else {
		<-ctx.Done()
	}

	l.mu.Lock()
	delete(l.subs, s)
	var last *listenRun
	if len(l.subs) == 0 && l.run != nil {
		last, l.run = l.run, nil
		last.cancel()
	}
	l.mu.Unlock()
	if last != nil {
		<-last.done
	}
	return err
}

// loop keeps r's connection LISTENing until its context ends.
func (l *listener) loop(ctx context.Context, r *listenRun) {
	defer close(r.done)
	pause := time.Duration(0)
	for ctx.Err() == nil {
		listened, err := l.once(ctx, r)
		l.mu.Lock()
		r.listening = false
		l.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		pause = nextPause(pause, listened)
		l.db.log.Warn("PostgreSQL listener lost its connection; connecting again", "err", err, "after", pause)
		sleepCtx(ctx, pause)
	}
}

// once connects, LISTENs and hands notifications to the listeners until
// the connection fails or ctx ends. listened reports whether it got as
// far as LISTENing.
func (l *listener) once(ctx context.Context, r *listenRun) (listened bool, err error) {
	if l.db.hooks.connecting != nil {
		l.db.hooks.connecting()
	}
	dialCtx, cancel := context.WithTimeout(ctx, listenSetupTimeout)
	conn, err := l.db.connect(dialCtx)
	cancel()
	if err != nil {
		return false, err
	}
	defer closeConn(ctx, conn)
	setupCtx, cancel := context.WithTimeout(ctx, listenSetupTimeout)
	defer cancel()
	var ch channels
	if err := conn.QueryRow(setupCtx, `SELECT (`+termChannelSQL+`), (`+taskChannelSQL+`), (`+catalogChannelSQL+`)`).Scan(&ch.term, &ch.tasks, &ch.catalog); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return false, fmt.Errorf("find the tables (Open migrates them): %w", err)
		}
		return false, fmt.Errorf("name the channels: %w", err)
	}
	if err := l.probe(ctx, conn); err != nil {
		return false, err
	}
	listen := "LISTEN " + pgx.Identifier{ch.term}.Sanitize() + "; LISTEN " + pgx.Identifier{ch.tasks}.Sanitize() +
		"; LISTEN " + pgx.Identifier{ch.catalog}.Sanitize()
	if _, err := conn.PgConn().Exec(setupCtx, listen).ReadAll(); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	cancel()
	l.mu.Lock()
	if l.run == r {
		r.listening = true
		for s := range l.subs {
			s.resync()
		}
	}
	l.mu.Unlock()
	if l.db.hooks.listening != nil {
		l.db.hooks.listening(conn.PgConn().PID())
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		l.dispatch(r, n, ch)
	}
}

// channels are the names of the channels the connection LISTENs on.
type channels struct{ term, tasks, catalog string }

// dispatch hands one notification to the listeners it is for.
func (l *listener) dispatch(r *listenRun, n *pgconn.Notification, ch channels) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run != r {
		return // the last listener has gone
	}
	switch n.Channel {
	case ch.term:
		// An announcement that names no epoch (someone else's NOTIFY)
		// still says: read the term.
		epoch, _ := strconv.ParseUint(n.Payload, 10, 64)
		for s := range l.subs {
			if s.term != nil {
				s.term(epoch)
			}
		}
	case ch.catalog:
		v, err := strconv.ParseInt(n.Payload, 10, 64)
		if err != nil || v <= 0 {
			v = 0 // not ours: still, read the newest
		}
		for s := range l.subs {
			if s.catalog != nil {
				s.catalog(v)
			}
		}
	case ch.tasks:
		var tn taskNotice
		if json.Unmarshal([]byte(n.Payload), &tn) != nil || tn.Event == "" || tn.ID == "" {
			return // not ours: someone else NOTIFYing the channel
		}
		for s := range l.subs {
			if s.task != nil {
				s.task(tn.Event, tn.ID)
			}
		}
	}
}

// probe checks, on the first connection only, that conn receives
// notifications: it LISTENs on a channel of its own, NOTIFYs it from a
// connection of the pool, and waits for the notification. Through
// PgBouncer in transaction mode the LISTEN lands on a server connection
// the client no longer holds, and nothing arrives: the verdict is kept
// (noListen), and the connection goes on for the task notices. Any
// other failure is the connection's, and the next one probes again.
func (l *listener) probe(ctx context.Context, conn *pgx.Conn) error {
	l.mu.Lock()
	probed := l.probed
	l.mu.Unlock()
	if probed {
		return nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "weir_probe_" + hex.EncodeToString(b[:])
	timeout := l.db.probeTimeout
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := conn.Exec(pctx, "LISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("probe: listen: %w", err)
	}
	if _, err := l.db.pool.Exec(pctx, "SELECT pg_notify($1, 'probe')", name); err != nil {
		return fmt.Errorf("probe: notify: %w", err)
	}
	for {
		n, err := conn.WaitForNotification(pctx)
		if err != nil {
			if ctx.Err() == nil && pctx.Err() != nil {
				l.mu.Lock()
				l.probed = true
				l.noListenErr = fmt.Errorf("%w (no probe notification within %v)", fleet.ErrNoListen, timeout)
				close(l.noListen)
				l.mu.Unlock()
				l.db.log.Error("PostgreSQL listener: notifications do not arrive", "err", l.noListenErr)
				return nil
			}
			return fmt.Errorf("probe: %w", err)
		}
		if n.Channel == name {
			if _, err := conn.Exec(pctx, "UNLISTEN "+pgx.Identifier{name}.Sanitize()); err != nil {
				return fmt.Errorf("probe: unlisten: %w", err)
			}
			l.mu.Lock()
			l.probed = true
			l.mu.Unlock()
			return nil
		}
	}
}
