package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/pgtest"
)

// heard is one call of ListenTasks' f.
type heard struct{ event, id string }

// listen runs ListenTasks on db until the test ends and returns what it
// hears.
func listen(t *testing.T, db *DB) <-chan heard {
	t.Helper()
	ch := make(chan heard, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- db.ListenTasks(ctx, func(event, id string) { ch <- heard{event, id} }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ListenTasks: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ListenTasks did not return when its context ended")
		}
	})
	return ch
}

func next(t *testing.T, ch <-chan heard, what string) heard {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing heard", what)
		return heard{}
	}
}

// TestNotifyTask: a listener hears, in order, the notices sent on its
// schema from another pool, after the resync call that begins every
// LISTEN; a schema of its own hears none of them; bad notices are
// refused.
func TestNotifyTask(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	a, b, other := open(t, dsn), open(t, dsn), openTemp(t)
	heardA, heardOther := listen(t, a), listen(t, other)
	if h := next(t, heardA, "a's first LISTEN"); h != (heard{}) {
		t.Fatalf("first call %+v; want the resync call (empty event and id)", h)
	}
	next(t, heardOther, "the other schema's first LISTEN")
	ctx := t.Context()
	for _, n := range []heard{{"queued", "task_1"}, {`requeue {"after":"1s"}`, "task_2"}, {"ended", "task 3 \"quoted\""}} {
		if err := b.NotifyTask(ctx, n.event, n.id); err != nil {
			t.Fatalf("NotifyTask(%q, %q): %v", n.event, n.id, err)
		}
		if h := next(t, heardA, "notice "+n.id); h != n {
			t.Fatalf("heard %+v; want %+v", h, n)
		}
	}
	for _, bad := range []heard{{"", "task_1"}, {"queued", ""}, {strings.Repeat("x", 8000), "task_1"}} {
		if err := b.NotifyTask(ctx, bad.event, bad.id); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("NotifyTask(%.10q…, %q): %v; want ErrInvalid", bad.event, bad.id, err)
		}
	}
	// A notice the other schema's listener would hear, were it leaking,
	// comes after everything a's schema sent.
	if err := other.NotifyTask(ctx, "mark", "other"); err != nil {
		t.Fatal(err)
	}
	if h := next(t, heardOther, "the other schema's own notice"); h != (heard{"mark", "other"}) {
		t.Fatalf("the other schema heard %+v first; want only its own notice", h)
	}
}

// TestListenTasksReconnects: when the listener's connection is killed,
// it listens again, calls f("", "") to say it may have missed notices,
// and hears the ones sent after.
func TestListenTasksReconnects(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	a, b := open(t, dsn), open(t, dsn)
	ch := listen(t, a)
	next(t, ch, "the first LISTEN")
	var channel string
	if err := a.Pool().QueryRow(t.Context(), taskChannelSQL).Scan(&channel); err != nil {
		t.Fatal(err)
	}
	var killed bool
	if err := b.Pool().QueryRow(t.Context(), `SELECT coalesce(bool_and(pg_terminate_backend(pid)), false) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND query LIKE '%' || $1 || '%'`, channel).Scan(&killed); err != nil || !killed {
		t.Fatalf("kill the listener's connection: %v, %v", killed, err)
	}
	if h := next(t, ch, "the LISTEN after the connection was killed"); h != (heard{}) {
		t.Fatalf("heard %+v after the connection was killed; want the resync call", h)
	}
	if err := b.NotifyTask(t.Context(), "queued", "task_1"); err != nil {
		t.Fatal(err)
	}
	if h := next(t, ch, "a notice after the reconnect"); h != (heard{"queued", "task_1"}) {
		t.Fatalf("heard %+v; want the notice", h)
	}
}
