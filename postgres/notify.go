package postgres

import (
	"context"
	"encoding/json"
	"fmt"

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
// outside the caller's transactions, in a statement shared with the
// notices sent meanwhile (notices.go), and lost for a listener that is
// not connected then. When ctx ends first, NotifyTask returns its error
// at once, and the notice may still be sent. An empty event or id, or a notice past PostgreSQL's
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
	if err := db.notices.send(ctx, string(payload)); err != nil {
		return fmt.Errorf("notify task %s: %w", id, err)
	}
	return nil
}

// ListenTasks calls f with each task notification sent on this
// database's schema (NotifyTask) until ctx ends, then returns nil. It
// listens on the DB's one LISTEN connection (listen.go), shared with the
// fleet's term announcements, which is made again whenever it is lost.
// What was sent while it was not listening is lost: after it begins
// listening, and after every LISTEN on a new connection, it calls f("",
// "") — the listener should then look at everything again. f is called
// for one notification at a time, in the order they arrive, and must not
// block.
//
// A DSN that leads through PgBouncer in transaction pooling mode loses
// LISTEN silently; the fleet's elector refuses such a DSN at start
// (fleet.ErrNoListen), and the task service's poll is the safety net.
func (db *DB) ListenTasks(ctx context.Context, f func(event, id string)) error {
	return db.listener.follow(ctx, &subscription{task: f})
}
