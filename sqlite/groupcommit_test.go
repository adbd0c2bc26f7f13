package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// holdWrites holds db's write connection until release is called;
// queued(n) waits until a transaction has begun to run (its caller waits
// for the connection) and n writes queue behind it.
func holdWrites(t *testing.T, db *DB) (queued func(n int), release func()) {
	t.Helper()
	held, done := make(chan struct{}), make(chan struct{})
	go func() {
		_ = db.InTx(context.Background(), func(*sql.Tx) error {
			close(held)
			<-done
			return nil
		})
	}()
	<-held
	db.group.mu.Lock()
	txs := db.group.txs
	db.group.mu.Unlock()
	queued = func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			db.group.mu.Lock()
			got, running := len(db.group.queue), db.group.txs > txs
			db.group.mu.Unlock()
			if got == n && running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d writes queued, want %d", got, n)
			}
			time.Sleep(time.Millisecond) // polling the queue's length
		}
	}
	return queued, func() { close(done) }
}

func groupTask(i int, at time.Time) *weir.Task {
	return &weir.Task{ID: fmt.Sprintf("task_%d", i), KeyID: "key-1", Kind: "video", Model: "sora-2",
		Input: []byte(`{"prompt":"x"}`), Status: weir.TaskQueued, Candidate: -1, CreatedAt: at}
}

// TestGroupCommitSharesTransactions: writes that queue while the write
// connection is busy commit together, and one that fails (a taken id)
// fails alone.
func TestGroupCommitSharesTransactions(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key-1", Hash: "hash-1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TaskCreate(ctx, groupTask(0, at)); err != nil {
		t.Fatal(err)
	}
	queued, release := holdWrites(t, db)
	txsBefore := db.group.txs // the test's goroutines only start below
	const n = 20
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	// The first waits for the connection with a transaction of its own;
	// the others queue behind it, task_0 among them (taken).
	wg.Go(func() { _, errs[1] = db.TaskCreate(ctx, groupTask(1, at)) })
	queued(0)
	for i := 2; i <= n; i++ {
		id := i
		if i == n/2 {
			id = 0
		}
		wg.Go(func() { _, errs[i] = db.TaskCreate(ctx, groupTask(id, at)) })
	}
	queued(n - 1)
	release()
	wg.Wait()
	for i := 1; i <= n; i++ {
		if i == n/2 {
			if !errors.Is(errs[i], weir.ErrConflict) {
				t.Errorf("the write of a taken id: %v, want weir.ErrConflict", errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("write %d: %v", i, errs[i])
		}
		if _, err := db.TaskGet(ctx, fmt.Sprintf("task_%d", i)); err != nil {
			t.Errorf("task_%d after its write: %v", i, err)
		}
	}
	if got := db.group.txs - txsBefore; got != 2 {
		t.Errorf("%d writes in %d transactions, want 2 (one alone, the rest together)", n, got)
	}
}

// TestGroupCommitBrokenTransaction: when the shared transaction breaks
// half-way (here a write ends it), every write in it fails and none of
// them is stored, those that ran before the break included.
func TestGroupCommitBrokenTransaction(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key-1", Hash: "hash-1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	queued, release := holdWrites(t, db)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	wg.Go(func() { _, errs[0] = db.TaskCreate(ctx, groupTask(0, at)) })
	queued(0)
	for i := 1; i < 5; i++ {
		wg.Go(func() {
			if i == 3 {
				errs[i] = db.inGroupTx(ctx, func(tx *sql.Tx) error {
					_, err := tx.Exec(`ROLLBACK`)
					return err
				})
				return
			}
			_, errs[i] = db.TaskCreate(ctx, groupTask(i, at))
		})
		queued(i) // in this order
	}
	release()
	wg.Wait()
	if errs[0] != nil {
		t.Errorf("the write alone: %v", errs[0])
	}
	for i := 1; i < 5; i++ {
		if errs[i] == nil {
			t.Errorf("write %d of the broken transaction succeeded", i)
		}
		if i == 3 {
			continue
		}
		if _, err := db.TaskGet(ctx, fmt.Sprintf("task_%d", i)); !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("task_%d of the broken transaction: %v, want not stored", i, err)
		}
	}
}

// TestGroupCommitTakesTheRunnableWriters: writes that become ready
// together share one transaction even when the write connection is
// free, each answered after the commit with its own outcome: a taken id
// fails alone, and two creates of one idempotency key make one task.
// The scheduler runs one goroutine at a time here (GOMAXPROCS 1), so the
// first writer would otherwise run its transaction before the others
// had queued, and each write would commit alone.
func TestGroupCommitTakesTheRunnableWriters(t *testing.T) {
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key-1", Hash: "hash-1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TaskCreate(ctx, groupTask(0, at)); err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 20
	const taken, idemA, idemB = 7, 11, 12
	tasks := make([]*weir.Task, n+1)
	created := make([]bool, n+1)
	errs := make([]error, n+1)
	for i := 1; i <= n; i++ {
		tasks[i] = groupTask(i, at)
		switch i {
		case taken:
			tasks[i].ID = "task_0"
		case idemA, idemB:
			tasks[i].IdempotencyKey = "idem-1"
		}
	}
	db.group.mu.Lock()
	txsBefore := db.group.txs
	db.group.mu.Unlock()
	// Every writer is made runnable at once, when start closes.
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			<-start
			created[i], errs[i] = db.TaskCreate(ctx, tasks[i])
		})
	}
	close(start)
	wg.Wait()
	db.group.mu.Lock()
	txs := db.group.txs - txsBefore
	db.group.mu.Unlock()
	// One, unless the scheduler preempted a writer before it queued
	// (a busy machine); n when each write commits alone.
	if txs > n/4 {
		t.Errorf("%d writes ready together ran in %d transactions, want at most %d", n, txs, n/4)
	}
	var idemCreated int
	for i := 1; i <= n; i++ {
		switch {
		case i == taken:
			if !errors.Is(errs[i], weir.ErrConflict) {
				t.Errorf("the write of a taken id: %v, want weir.ErrConflict", errs[i])
			}
			continue
		case errs[i] != nil:
			t.Errorf("write %d: %v", i, errs[i])
			continue
		case i == idemA || i == idemB:
			if created[i] {
				idemCreated++
			}
			if tasks[i].ID != tasks[idemA].ID && tasks[i].ID != tasks[idemB].ID {
				t.Errorf("write %d of idem-1 got task %s", i, tasks[i].ID)
			}
			continue
		case !created[i]:
			t.Errorf("write %d: not created", i)
		}
		if got, err := db.TaskGet(ctx, tasks[i].ID); err != nil || got.Seq != tasks[i].Seq {
			t.Errorf("task %s after its write: seq %d, %v; want seq %d", tasks[i].ID, got.Seq, err, tasks[i].Seq)
		}
	}
	if idemCreated != 1 || tasks[idemA].ID != tasks[idemB].ID {
		t.Errorf("two creates of one idempotency key: %d created, tasks %s and %s; want 1, one task", idemCreated, tasks[idemA].ID, tasks[idemB].ID)
	}
	if got, err := db.TaskList(ctx, weir.TaskFilter{}); err != nil || len(got) != n-1 {
		t.Errorf("%d tasks stored (%v), want %d: task_0 and the %d new ones", len(got), err, n-1, n-2)
	}
}
