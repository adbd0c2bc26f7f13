package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/pgtest"
)

// holdBatches makes b's callers queue as if a batch were under way, and
// returns release, which waits until n statements have queued and hands
// the first of them the lead: it sends every one queued in one batch.
func holdBatches(t *testing.T, b *stmtBatcher) (release func(n int)) {
	t.Helper()
	lengths := make(chan int, 1024)
	b.mu.Lock()
	if b.running {
		b.mu.Unlock()
		t.Fatal("a batch is under way already")
	}
	b.running = true
	b.queued = func(n int) { lengths <- n }
	b.mu.Unlock()
	return func(n int) {
		t.Helper()
		for queued := 0; queued < n; {
			select {
			case queued = <-lengths:
			case <-time.After(10 * time.Second):
				t.Fatalf("%d statements queued after 10s, want %d", queued, n)
			}
		}
		b.mu.Lock()
		first := b.queue[0]
		b.mu.Unlock()
		first.lead <- true
	}
}

// batches is how many batches b has sent.
func batches(b *stmtBatcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.batches
}

// TestTaskUpdatesShareABatch: task updates queued together go to the
// server in one batch, and each caller gets its own update's answer: one
// applied, one that found its task moved on, one whose task is not
// there.
func TestTaskUpdatesShareABatch(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := openTemp(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key-1", Hash: "hash-1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		task := &weir.Task{ID: fmt.Sprintf("task_%d", i), KeyID: "key-1", Kind: "video", Model: "m", Status: weir.TaskQueued, CreatedAt: at}
		if _, err := db.TaskCreate(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	release := holdBatches(t, &db.updates)
	before := batches(&db.updates)
	applied := make([]bool, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n + 1 {
		from := weir.TaskQueued
		if i == 3 {
			from = weir.TaskRunning // moved on
		}
		wg.Go(func() {
			applied[i], errs[i] = db.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: fmt.Sprintf("task_%d", i), Update: weir.TaskUpdate{
				From: []weir.TaskStatus{from}, Status: weir.TaskAdmitted, AdmittedAt: at,
			}})
		})
	}
	release(n + 1)
	wg.Wait()
	if got := batches(&db.updates) - before; got != 1 {
		t.Errorf("%d updates queued together went in %d batches, want 1", n+1, got)
	}
	for i := range n + 1 {
		switch {
		case i == n:
			if !errors.Is(errs[i], weir.ErrNotFound) {
				t.Errorf("the update of a task not there: %v, want weir.ErrNotFound", errs[i])
			}
		case errs[i] != nil:
			t.Errorf("update %d: %v", i, errs[i])
		case applied[i] != (i != 3):
			t.Errorf("update %d applied %v, want %v", i, applied[i], i != 3)
		}
	}
	for i := range n {
		got, err := db.TaskGet(ctx, fmt.Sprintf("task_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]weir.TaskStatus{true: weir.TaskQueued, false: weir.TaskAdmitted}[i == 3]; got.Status != want {
			t.Errorf("task_%d is %s, want %s", i, got.Status, want)
		}
	}
}

// TestBatchStatementRefusedFailsAlone: a statement the server refuses
// fails alone; the others of its batch, rolled back with it, are sent
// again and commit.
func TestBatchStatementRefusedFailsAlone(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := openTemp(t)
	ctx := t.Context()
	if _, err := db.pool.Exec(ctx, `CREATE TABLE batch_rows (n int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	b := &stmtBatcher{pool: db.pool}
	release := holdBatches(t, b)
	const n, refused = 8, 5
	errs := make([]error, n)
	got := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if i == refused {
				errs[i] = b.exec(ctx, `SELECT 1 / $1::int`, []any{0}, func(row pgx.Row) error { return row.Scan(&got[i]) })
				return
			}
			errs[i] = b.exec(ctx, `INSERT INTO batch_rows (n) VALUES ($1) RETURNING n`, []any{i}, func(row pgx.Row) error { return row.Scan(&got[i]) })
		})
	}
	release(n)
	wg.Wait()
	for i := range n {
		switch {
		case i == refused:
			if !isServerError(errs[i]) {
				t.Errorf("the refused statement: %v, want the server's error", errs[i])
			}
		case errs[i] != nil:
			t.Errorf("statement %d: %v", i, errs[i])
		case got[i] != i:
			t.Errorf("statement %d read %d", i, got[i])
		}
	}
	var rows int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM batch_rows`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != n-1 {
		t.Errorf("%d rows committed, want %d", rows, n-1)
	}
}

// TestNotifyTaskBatched: notices queued together, sent in one batch, are
// each heard.
func TestNotifyTaskBatched(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	a, b := open(t, dsn), open(t, dsn)
	heardA := listen(t, a)
	next(t, heardA, "a's first LISTEN")
	release := holdBatches(t, &b.notices)
	before := batches(&b.notices)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = b.NotifyTask(t.Context(), "ended", fmt.Sprintf("task_%d", i)) })
	}
	release(n)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("notice %d: %v", i, err)
		}
	}
	if got := batches(&b.notices) - before; got != 1 {
		t.Errorf("%d notices queued together went in %d batches, want 1", n, got)
	}
	seen := map[string]bool{}
	for range n {
		h := next(t, heardA, "a notice of the batch")
		if h.event != "ended" || seen[h.id] {
			t.Errorf("heard %+v", h)
		}
		seen[h.id] = true
	}
}
