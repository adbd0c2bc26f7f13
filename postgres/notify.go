package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weir-gateway/weir"
)

// Task notifications tell the replicas sharing the database that a task
// changed (task.Notifier): NOTIFY on a channel of the schema's own, since
// a notification reaches every session of the database, and tests (or
// two deployments) on schemas of their own must not hear each other.

// taskChannelSQL names the channel of the schema whose tasks table this
// connection's search_path finds.
const taskChannelSQL = `SELECT 'weir_tasks_' || to_hex(hashtext(n.nspname::text))
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.oid = 'tasks'::regclass`

// maxNotifyPayload bounds a notification's payload: PostgreSQL refuses
// one of 8000 bytes or more.
const maxNotifyPayload = 7999

// taskNotice is a notification's payload.
type taskNotice struct {
	Event string `json:"e"`
	ID    string `json:"id"`
}

// NotifyTask tells every replica listening on this database's schema
// (ListenTasks) that task id changed, as event says (the task service's
// words; not empty, which ListenTasks keeps for its resync). It is sent
// at once, outside any transaction, and lost for a listener that is not
// connected then. An empty event or id, or a notice past PostgreSQL's
// 8000 bytes, is weir.ErrInvalid.
func (db *DB) NotifyTask(ctx context.Context, event, id string) error {
	if event == "" || id == "" {
		return fmt.Errorf("notify task %q: %w: an event and an id are required", id, weir.ErrInvalid)
	}
	payload, err := json.Marshal(taskNotice{Event: event, ID: id})
	if err != nil {
		return fmt.Errorf("notify task %s: %w", id, err)
	}
	if len(payload) > maxNotifyPayload {
		return fmt.Errorf("notify task %s: %w: a notice of %d bytes (at most %d)", id, weir.ErrInvalid, len(payload), maxNotifyPayload)
	}
	if _, err := db.pool.Exec(ctx, `SELECT pg_notify((`+taskChannelSQL+`), $1)`, string(payload)); err != nil {
		return fmt.Errorf("notify task %s: %w", id, err)
	}
	return nil
}

// listenPauseMax bounds the pause between attempts to listen again.
const listenPauseMax = 5 * time.Second

// ListenTasks calls f with each task notification sent on this
// database's schema (NotifyTask) until ctx ends, then returns nil. It
// listens on a connection of its own, outside the pool (a LISTEN lives
// as long as its session), and when that connection is lost it connects
// and listens again, at once after a connection that had listened, then
// after a growing jittered pause. What was sent while it was not
// listening is lost: after every LISTEN, the first included, it calls
// f("", "") — the listener should then look at everything again. f is
// called from one goroutine, in the order the notifications arrive, and
// must not block.
//
// A DSN that leads through PgBouncer in transaction pooling mode loses
// LISTEN silently; the fleet's elector refuses such a DSN at start
// (fleet.ErrNoListen), and the task service's poll is the safety net.
func (db *DB) ListenTasks(ctx context.Context, f func(event, id string)) error {
	pause := time.Duration(0)
	for ctx.Err() == nil {
		listened, _ := db.listenTasksOnce(ctx, f)
		if ctx.Err() != nil {
			break
		}
		if listened {
			pause = 0
			continue
		}
		pause = min(max(2*pause, 100*time.Millisecond), listenPauseMax)
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// listenTasksOnce connects, LISTENs and hands notifications to f until
// the connection fails or ctx ends. listened reports whether it got as
// far as LISTENing.
func (db *DB) listenTasksOnce(ctx context.Context, f func(event, id string)) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, db.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	var channel string
	if err := conn.QueryRow(ctx, taskChannelSQL).Scan(&channel); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return false, fmt.Errorf("find the tasks table (open the DB first, which migrates it): %w", err)
		}
		return false, fmt.Errorf("name the channel: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	f("", "")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		if n.Channel != channel {
			continue
		}
		var tn taskNotice
		if json.Unmarshal([]byte(n.Payload), &tn) != nil || tn.Event == "" || tn.ID == "" {
			continue // not ours: someone else NOTIFYing the channel
		}
		f(tn.Event, tn.ID)
	}
}
