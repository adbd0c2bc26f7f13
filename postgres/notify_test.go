package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// notifierAndListener opens two DBs on a new schema: b, to send
// notices, and another listening, whose first LISTEN has been heard.
func notifierAndListener(t *testing.T) (b *DB, heard <-chan heard) {
	t.Helper()
	dsn := pgtest.Schema(t)
	a := open(t, dsn)
	heard = listen(t, a)
	next(t, heard, "the listener's first LISTEN")
	return open(t, dsn), heard
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

// holdNotices makes ns's notices queue as if a statement were out, and
// returns waitQueued, which waits until n notices have queued, and
// release, which sends those queued.
func holdNotices(t *testing.T, ns *noticeSender) (waitQueued func(n int), release func()) {
	t.Helper()
	lengths := make(chan int, 1024)
	ns.mu.Lock()
	if ns.sending {
		ns.mu.Unlock()
		t.Fatal("a statement is out already")
	}
	ns.sending = true
	ns.queued = func(n int) { lengths <- n }
	ns.mu.Unlock()
	queued := 0
	waitQueued = func(n int) {
		t.Helper()
		for queued < n {
			select {
			case queued = <-lengths:
			case <-time.After(10 * time.Second):
				t.Fatalf("%d notices queued after 10s, want %d", queued, n)
			}
		}
	}
	return waitQueued, func() { go ns.run() }
}

// noticeStatements is how many statements ns has sent.
func noticeStatements(ns *noticeSender) int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.statements
}

// TestNotifyTasksShareAStatement: notices sent while a statement is out
// go together in one statement; each caller gets its answer, and the
// listener hears every notice, in the order they queued, with ids that
// quote and escape intact.
func TestNotifyTasksShareAStatement(t *testing.T) {
	t.Parallel()
	b, heardA := notifierAndListener(t)
	ctx := t.Context()
	if err := b.NotifyTask(ctx, "queued", "task_first"); err != nil {
		t.Fatal(err)
	}
	if h := next(t, heardA, "the first notice"); h != (heard{"queued", "task_first"}) {
		t.Fatalf("heard %+v", h)
	}
	waitQueued, release := holdNotices(t, &b.notices)
	before := noticeStatements(&b.notices)
	const n = 12
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ids[i] = fmt.Sprintf(`task_%d "dq" 'sq' {a,b} back\slash, NULL`, i)
		wg.Go(func() { errs[i] = b.NotifyTask(ctx, "ended", ids[i]) })
		waitQueued(i + 1)
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("notice %d: %v", i, err)
		}
	}
	if got := noticeStatements(&b.notices) - before; got != 1 {
		t.Errorf("%d notices sent while a statement was out went in %d statements, want 1", n, got)
	}
	for i := range n {
		if h := next(t, heardA, "a notice of the statement"); h != (heard{"ended", ids[i]}) {
			t.Errorf("heard %+v, want %q %q", h, "ended", ids[i])
		}
	}
}

// TestNotifyTasksStatementFails: when the statement of several notices
// fails, each of its callers gets the error; the next statement goes on.
func TestNotifyTasksStatementFails(t *testing.T) {
	t.Parallel()
	b, heardA := notifierAndListener(t)
	ctx := t.Context()
	waitQueued, release := holdNotices(t, &b.notices)
	b.notices.mu.Lock()
	b.notices.channel = strings.Repeat("c", 100) // PostgreSQL refuses a channel name this long
	b.notices.mu.Unlock()
	const n = 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = b.NotifyTask(ctx, "ended", fmt.Sprintf("task_%d", i)) })
	}
	waitQueued(n)
	release()
	wg.Wait()
	for i, err := range errs {
		if !isServerError(err) {
			t.Errorf("notice %d of the failing statement: %v, want the server's error", i, err)
		}
	}
	b.notices.mu.Lock()
	b.notices.channel = "" // looked up again
	b.notices.mu.Unlock()
	if err := b.NotifyTask(ctx, "ended", "task_after"); err != nil {
		t.Fatal(err)
	}
	if h := next(t, heardA, "the notice after"); h != (heard{"ended", "task_after"}) {
		t.Errorf("heard %+v, want the notice after the failed statement", h)
	}
}

// TestNotifyTaskContextEnds: a caller whose context ends while its notice
// waits for a statement returns at once with the context's error; the
// notices queued with it are sent and heard.
func TestNotifyTaskContextEnds(t *testing.T) {
	t.Parallel()
	b, heardA := notifierAndListener(t)
	ctx := t.Context()
	waitQueued, release := holdNotices(t, &b.notices)
	leaving, leave := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() { left <- b.NotifyTask(leaving, "ended", "task_leaving") }()
	waitQueued(1)
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = b.NotifyTask(ctx, "ended", fmt.Sprintf("task_%d", i)) })
	}
	waitQueued(n + 1)
	leave()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the caller whose context ended: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a caller whose context ended has not returned after 10s")
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("notice %d: %v", i, err)
		}
	}
	want := map[string]bool{"task_0": true, "task_1": true, "task_2": true}
	for len(want) > 0 {
		h := next(t, heardA, "the notices queued beside the one whose caller left")
		delete(want, h.id)
	}
}
