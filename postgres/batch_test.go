package postgres

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/pgtest"
)

// holdBatches makes b's callers queue as if its limit of batches were
// under way, and returns release, which waits until n statements have
// queued and hands the first of them the lead: it sends every one queued
// in one batch.
func holdBatches(t *testing.T, b *stmtBatcher) (release func(n int)) {
	t.Helper()
	lengths := make(chan int, 1024)
	b.mu.Lock()
	if b.running > 0 {
		b.mu.Unlock()
		t.Fatal("a batch is under way already")
	}
	b.running = max(b.limit, 1)
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
		b.queue = b.queue[1:]
		b.running = 1 // the batches held end but the one handed on
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
	release := holdBatches(t, &db.writes)
	before := batches(&db.writes)
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
	if got := batches(&db.writes) - before; got != 1 {
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

// TestTaskCreatesShareABatch: creates queued together go in one batch;
// of two creates of one idempotency key, one creates the task and the
// other gets it; a taken id fails alone (weir.ErrConflict) and the
// others of its batch commit.
func TestTaskCreatesShareABatch(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := openTemp(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key-1", Hash: "hash-1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	newTask := func(i int) *weir.Task {
		return &weir.Task{ID: fmt.Sprintf("task_%d", i), KeyID: "key-1", Kind: "video", Model: "m", Status: weir.TaskQueued, CreatedAt: at}
	}
	// createTogether creates tasks in one batch.
	createTogether := func(tasks []*weir.Task) ([]bool, []error) {
		release := holdBatches(t, &db.writes)
		before := batches(&db.writes)
		created := make([]bool, len(tasks))
		errs := make([]error, len(tasks))
		var wg sync.WaitGroup
		for i := range tasks {
			wg.Go(func() { created[i], errs[i] = db.TaskCreate(ctx, tasks[i]) })
		}
		release(len(tasks))
		wg.Wait()
		if got := batches(&db.writes) - before; got != 1 {
			t.Errorf("%d creates queued together went in %d batches, want 1", len(tasks), got)
		}
		return created, errs
	}

	const n, idemA, idemB = 10, 3, 7
	tasks := make([]*weir.Task, n)
	for i := range tasks {
		tasks[i] = newTask(i)
		if i == idemA || i == idemB {
			tasks[i].IdempotencyKey = "idem-1"
		}
	}
	created, errs := createTogether(tasks)
	var idemCreated int
	for i := range tasks {
		switch {
		case errs[i] != nil:
			t.Errorf("create %d: %v", i, errs[i])
		case i == idemA || i == idemB:
			if created[i] {
				idemCreated++
			}
		case !created[i] || tasks[i].Seq == 0:
			t.Errorf("create %d: created %v, seq %d", i, created[i], tasks[i].Seq)
		}
	}
	if idemCreated != 1 || tasks[idemA].ID != tasks[idemB].ID || tasks[idemA].Seq != tasks[idemB].Seq {
		t.Errorf("two creates of one idempotency key created %d tasks (%s seq %d, %s seq %d), want 1 shared",
			idemCreated, tasks[idemA].ID, tasks[idemA].Seq, tasks[idemB].ID, tasks[idemB].Seq)
	}

	again := []*weir.Task{newTask(20), newTask(0), newTask(21)} // task_0 is taken
	created, errs = createTogether(again)
	if !errors.Is(errs[1], weir.ErrConflict) {
		t.Errorf("the create of a taken id: %v, want weir.ErrConflict", errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil || !created[i] {
			t.Errorf("create %s beside a taken id: created %v, %v", again[i].ID, created[i], errs[i])
		}
	}
}

// TestBatchesUpToTheLimit: a batcher of limit 2 sends two batches at a
// time; a third statement queues until one of them has ended.
func TestBatchesUpToTheLimit(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := openTemp(t)
	ctx := t.Context()
	// The statements wait for an advisory lock that the test holds.
	holder, err := db.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	const key = 4242
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	lengths := make(chan int, 3)
	b := &stmtBatcher{pool: db.pool, limit: 2, queued: func(n int) { lengths <- n }}
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- b.exec(ctx, `SELECT pg_advisory_xact_lock($1)`, []any{key}, nil) }()
	}
	var got []int
	for range 3 {
		select {
		case n := <-lengths:
			got = append(got, n)
		case <-time.After(10 * time.Second):
			t.Fatalf("queue lengths %v after 10s", got)
		}
	}
	slices.Sort(got) // the calls race each other out of the lock
	if want := []int{0, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("queue lengths as the statements came %v, want %v: two sent at once, the third queued", got, want)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
