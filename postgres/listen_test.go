package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
)

// follow runs f (ListenTasks or TermListen) until the returned stop is
// called or the test ends.
func follow(t *testing.T, f func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("listener: %v", err)
			}
		case <-time.After(guard):
			t.Error("a listener did not return when its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

func nextEpoch(t *testing.T, ch <-chan uint64, what string) uint64 {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(guard):
		t.Fatalf("%s: nothing heard", what)
		return 0
	}
}

func nextPid(t *testing.T, ch <-chan uint32) uint32 {
	t.Helper()
	select {
	case pid := <-ch:
		return pid
	case <-time.After(guard):
		t.Fatal("the listener never LISTENed")
		return 0
	}
}

// backendAlive reports whether PostgreSQL still runs backend pid.
func backendAlive(t *testing.T, db *DB, pid uint32) bool {
	t.Helper()
	var alive bool
	if err := db.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, int64(pid)).Scan(&alive); err != nil {
		t.Fatal(err)
	}
	return alive
}

// TestOneListenerForEverything: the fleet's term announcements and the
// task notices arrive over one connection; when it is lost, one new
// connection LISTENs again and every listener is told to read
// everything again; a listener that comes while it listens is told so at
// once; and the connection closes with the last listener.
func TestOneListenerForEverything(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	db, other := open(t, dsn), open(t, dsn)
	var connects atomic.Int64
	pids := make(chan uint32, 4)
	db.hooks = dbHooks{connecting: func() { connects.Add(1) }, listening: func(pid uint32) { pids <- pid }}

	tasks := make(chan heard, 16)
	terms := make(chan uint64, 16)
	stopTasks := follow(t, func(ctx context.Context) error {
		return db.ListenTasks(ctx, func(event, id string) { tasks <- heard{event, id} })
	})
	if h := next(t, tasks, "the task listener's first call"); h != (heard{}) {
		t.Fatalf("first task call %+v; want the resync call", h)
	}
	pid := nextPid(t, pids)
	stopTerms := follow(t, func(ctx context.Context) error {
		return db.TermListen(ctx, func(epoch uint64) { terms <- epoch })
	})
	if e := nextEpoch(t, terms, "the term listener's first call"); e != 0 {
		t.Fatalf("first term call %d; want 0, read the term in full", e)
	}
	if n := connects.Load(); n != 1 {
		t.Fatalf("%d connections for two listeners; want one", n)
	}

	c, err := fleet.NewCoordinator(other, fleet.CoordConfig{Replica: "a", Addr: "a:1", TermTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, won, err := c.Campaign(ctx); err != nil || !won {
		t.Fatalf("campaign: %v, %v", won, err)
	}
	if err := other.NotifyTask(ctx, "queued", "task_1"); err != nil {
		t.Fatal(err)
	}
	if e := nextEpoch(t, terms, "the campaign"); e != 1 {
		t.Fatalf("announced %d; want epoch 1", e)
	}
	if h := next(t, tasks, "the task notice"); h != (heard{"queued", "task_1"}) {
		t.Fatalf("heard %+v; want the task notice", h)
	}

	if _, err := other.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int64(pid)); err != nil {
		t.Fatal(err)
	}
	if again := nextPid(t, pids); again == pid {
		t.Fatalf("listening again on the killed backend %d", pid)
	} else {
		pid = again
	}
	if e := nextEpoch(t, terms, "the term listener after the reconnect"); e != 0 {
		t.Fatalf("term call %d after the reconnect; want 0", e)
	}
	if h := next(t, tasks, "the task listener after the reconnect"); h != (heard{}) {
		t.Fatalf("task call %+v after the reconnect; want the resync call", h)
	}
	if n := connects.Load(); n != 2 {
		t.Fatalf("%d connections after one was lost; want two", n)
	}
	if err := c.Resign(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := other.NotifyTask(ctx, "ended", "task_1"); err != nil {
		t.Fatal(err)
	}
	if e := nextEpoch(t, terms, "the resignation"); e != 1 {
		t.Fatalf("announced %d; want epoch 1's end", e)
	}
	if h := next(t, tasks, "the task notice after the reconnect"); h != (heard{"ended", "task_1"}) {
		t.Fatalf("heard %+v; want the task notice", h)
	}

	stopTasks()
	if !backendAlive(t, db, pid) {
		t.Fatal("the connection closed while the term listener still listens")
	}
	stopTerms()
	waitFor(t, "the connection closes with the last listener", func() bool { return !backendAlive(t, db, pid) })

	// A listener after the last one starts it again.
	follow(t, func(ctx context.Context) error {
		return db.ListenTasks(ctx, func(event, id string) { tasks <- heard{event, id} })
	})
	if h := next(t, tasks, "a listener after the last"); h != (heard{}) {
		t.Fatalf("first call %+v; want the resync call", h)
	}
	if n := connects.Load(); n != 3 {
		t.Fatalf("%d connections; want a third for the new listener", n)
	}
}
