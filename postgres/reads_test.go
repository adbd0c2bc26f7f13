package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/pgtest"
)

// holdReads makes r's callers queue as if its limit of batches were
// under way, and returns release, which waits until n reads have queued
// and hands the first of them the lead: it sends every one queued in one
// query.
func holdReads(t *testing.T, r *taskReads) (release func(n int)) {
	t.Helper()
	lengths := make(chan int, 1024)
	r.mu.Lock()
	if r.running > 0 {
		r.mu.Unlock()
		t.Fatal("a read is under way already")
	}
	r.running = max(r.limit, 1)
	r.queued = func(n int) { lengths <- n }
	r.mu.Unlock()
	return func(n int) {
		t.Helper()
		for queued := 0; queued < n; {
			select {
			case queued = <-lengths:
			case <-time.After(10 * time.Second):
				t.Fatalf("%d reads queued after 10s, want %d", queued, n)
			}
		}
		r.mu.Lock()
		first := r.queue[0]
		r.queue = r.queue[1:]
		r.running = 1 // the batches held end but the one handed on
		r.mu.Unlock()
		first.lead <- true
	}
}

// TestTaskGetsShareAQuery: TaskGets made at once go to the server as one
// query, and each caller gets its own task as a read of its own would
// give it: a task read twice comes back to both, with slices of their
// own, and a task not there is weir.ErrNotFound.
func TestTaskGetsShareAQuery(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	db := openTemp(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key-1", Hash: "hash-1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	for i := range n {
		task := &weir.Task{ID: fmt.Sprintf("task_%d", i), KeyID: "key-1", Kind: "video", Model: "m",
			Input: []byte(fmt.Sprintf(`{"n":%d}`, i)), Status: weir.TaskQueued, CreatedAt: at}
		if _, err := db.TaskCreate(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	// Reads of task_0 … task_7, task_0 again, and a task not there.
	ids := make([]string, 0, n+2)
	for i := range n {
		ids = append(ids, fmt.Sprintf("task_%d", i))
	}
	ids = append(ids, "task_0", "task_missing")
	release := holdReads(t, &db.reads)
	db.reads.mu.Lock()
	before := db.reads.batches
	db.reads.mu.Unlock()
	got := make([]weir.Task, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { got[i], errs[i] = db.TaskGet(ctx, id) })
	}
	release(len(ids))
	wg.Wait()
	db.reads.mu.Lock()
	sent := db.reads.batches - before
	db.reads.mu.Unlock()
	if sent != 1 {
		t.Errorf("%d reads queued together went in %d queries, want 1", len(ids), sent)
	}
	for i, id := range ids {
		if id == "task_missing" {
			if !errors.Is(errs[i], weir.ErrNotFound) {
				t.Errorf("the read of a task not there: %v, want weir.ErrNotFound", errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("TaskGet(%s): %v", id, errs[i])
			continue
		}
		var k int
		if _, err := fmt.Sscanf(id, "task_%d", &k); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"n":%d}`, k); got[i].ID != id || string(got[i].Input) != want {
			t.Errorf("TaskGet(%s) = %s with input %s, want input %s", id, got[i].ID, got[i].Input, want)
		}
	}
	if a, b := got[0].Input, got[n].Input; len(a) > 0 && len(b) > 0 && &a[0] == &b[0] {
		t.Error("the two reads of task_0 share their input's bytes")
	}
}
