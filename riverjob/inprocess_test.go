package riverjob_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/riverjob"
	"github.com/weir-gateway/weir/sqlite"
)

// noPoll is a fetch poll so long that a job found within a test was
// found by a notification.
const noPoll = time.Hour

// within bounds each wait for an event that must come.
const within = 20 * time.Second

type pingArgs struct {
	// Snooze, if set, snoozes the first run for that long.
	Snooze time.Duration `json:"snooze"`
	// Fail fails the first run (River retries it a second later).
	Fail bool `json:"fail"`
}

func (pingArgs) Kind() string { return "ping" }

type pingWorker struct {
	river.WorkerDefaults[pingArgs]
	ran     chan time.Time
	snoozed atomic.Bool
	failed  atomic.Bool
}

func (w *pingWorker) Work(_ context.Context, job *river.Job[pingArgs]) error {
	w.ran <- time.Now()
	if job.Args.Snooze > 0 && !w.snoozed.Swap(true) {
		return river.JobSnooze(job.Args.Snooze)
	}
	if job.Args.Fail && !w.failed.Swap(true) {
		return errors.New("the first run fails")
	}
	return nil
}

type rig struct {
	pool   *sql.DB
	client *river.Client[*sql.Tx]
	waker  *riverjob.Waker
	ran    chan time.Time
}

// openPool opens a SQLite database on one connection, as the SQLite
// store opens its writes, with River's tables, and returns it with
// River's driver on it, InProcess.
func openPool(t *testing.T) (*sql.DB, riverdriver.Driver[*sql.Tx]) {
	t.Helper()
	pool, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "weir.db")+"?_txlock=immediate&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	pool.SetMaxOpenConns(1)
	t.Cleanup(func() { pool.Close() })
	d := riverjob.InProcess(riversqlite.New(pool))
	m, err := rivermigrate.New(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(t.Context(), rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	return pool, d
}

// setup starts a River client that fetches only when told, on a
// database of openPool's.
func setup(t *testing.T) rig {
	t.Helper()
	pool, d := openPool(t)
	r := rig{pool: pool, waker: riverjob.NewWaker(d, clock.Real, nil), ran: make(chan time.Time, 16)}
	workers := river.NewWorkers()
	river.AddWorker(workers, &pingWorker{ran: r.ran})
	var err error
	r.client, err = river.NewClient(d, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
		FetchPollInterval: noPoll,
		FetchCooldown:     time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	unfollow := riverjob.Follow(r.client, r.waker)
	if err := r.client.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unfollow()
		r.waker.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		_ = r.client.Stop(ctx)
	})
	return r
}

func (r rig) wait(t *testing.T, what string) time.Time {
	t.Helper()
	select {
	case at := <-r.ran:
		return at
	case <-time.After(within):
		t.Fatalf("%s: the job did not run within %s (with a fetch poll of %s)", what, within, noPoll)
		return time.Time{}
	}
}

// A job inserted in a transaction wakes the producer when it commits:
// without a fetch poll, it runs.
func TestInsertWakesProducer(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for i := range 3 {
		tx, err := r.pool.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.client.InsertTx(t.Context(), tx, pingArgs{}, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		r.wait(t, "insert "+string(rune('1'+i)))
	}
	// The notices went through the process, not River's outbox table.
	var n int
	if err := r.pool.QueryRowContext(t.Context(), `SELECT count(*) FROM river_notification`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d notifications in River's outbox table, want none", n)
	}
}

// A job snoozed for less than River's scheduler interval is made
// available with its time in the future, which no notice announces:
// Follow's wake when the snooze ends makes it run again.
func TestWakeAfterSnooze(t *testing.T) {
	t.Parallel()
	r := setup(t)
	const snooze = 500 * time.Millisecond
	if _, err := r.client.Insert(t.Context(), pingArgs{Snooze: snooze}, nil); err != nil {
		t.Fatal(err)
	}
	first := r.wait(t, "first run")
	again := r.wait(t, "after the snooze")
	if d := again.Sub(first); d < snooze {
		t.Errorf("ran again %s after the first run, before its snooze of %s ended", d, snooze)
	}
}

// A job whose run failed is retried a second later (River's default
// policy), made available at once with its time in the future: Follow's
// wake when it is due makes it run again.
func TestWakeForRetry(t *testing.T) {
	t.Parallel()
	r := setup(t)
	if _, err := r.client.Insert(t.Context(), pingArgs{Fail: true}, nil); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "first run")
	r.wait(t, "the retry")
}

// A notification sent inside a transaction reaches the listener before
// the commit, but a read it prompts on the single connection waits for
// the commit and sees the job.
func TestNoticeBeforeCommitReadsAfterIt(t *testing.T) {
	t.Parallel()
	pool, d := openPool(t)
	client, err := river.NewClient(d, &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t, d, "river_insert")
	exec := d.GetExecutor()
	counted := make(chan int, 1)
	tx, err := pool.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.InsertTx(t.Context(), tx, pingArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitForNotification(t.Context()); err != nil {
		t.Fatal(err)
	}
	go func() {
		n, err := exec.JobCountByState(context.Background(), &riverdriver.JobCountByStateParams{State: rivertype.JobStateAvailable})
		if err != nil {
			n = -1
		}
		counted <- n
	}()
	// Commit only once the read waits for the connection.
	for pool.Stats().WaitCount == 0 {
		runtime.Gosched()
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := <-counted; n != 1 {
		t.Errorf("the read prompted by the notice counted %d available jobs, want the one committed", n)
	}
}

func listen(t *testing.T, d riverdriver.Driver[*sql.Tx], topics ...string) riverdriver.Listener {
	t.Helper()
	l := d.GetListener(&riverdriver.GetListenenerParams{})
	if err := l.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	for _, topic := range topics {
		if err := l.Listen(t.Context(), topic); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// The SQLite store's River driver is InProcess.
func TestSQLiteStoreWakesInProcess(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if !riverjob.WakesInProcess(db.RiverDriver()) {
		t.Error("the SQLite store's River driver does not wake in the process")
	}
}

// A listener hears the topics it listens to, from when it listens until
// it unlistens, and its wait ends with its context.
func TestListenerTopics(t *testing.T) {
	t.Parallel()
	_, d := openPool(t)
	l := listen(t, d, "a")
	exec := d.GetExecutor()
	notify := func(topic, payload string) {
		t.Helper()
		if err := exec.NotifyMany(t.Context(), &riverdriver.NotifyManyParams{Topic: topic, Payload: []string{payload}}); err != nil {
			t.Fatal(err)
		}
	}
	notify("b", "not listened")
	notify("a", "1")
	if n, err := l.WaitForNotification(t.Context()); err != nil || n.Topic != "a" || n.Payload != "1" {
		t.Fatalf("WaitForNotification = %+v, %v; want a: 1", n, err)
	}
	notify("a", "2")
	if err := l.Unlisten(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, err := l.WaitForNotification(ctx); err == nil {
		t.Errorf("WaitForNotification after Unlisten = %+v; want none, the context's error", n)
	}
}
