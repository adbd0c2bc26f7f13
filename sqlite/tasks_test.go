package sqlite

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/task"
)

// The task service lists task states (StateLister) on either store.
var _ task.StateLister = (*DB)(nil)

// TestTaskListPlans pins the plans of the listings the service runs: each
// reads an index in seq order, with no sort, so that a page costs its own
// size however many tasks are stored.
func TestTaskListPlans(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	queued := []weir.TaskStatus{weir.TaskQueued}
	for _, tc := range []struct {
		name, index string
		f           weir.TaskFilter
	}{
		{"recovery", "tasks_status_seq", weir.TaskFilter{Statuses: queued}},
		{"recovery by pages", "tasks_status_seq", weir.TaskFilter{Statuses: queued, AfterSeq: 1000, Limit: 1000}},
		{"a key's tasks", "tasks_key_seq", weir.TaskFilter{KeyID: "k1", AfterSeq: 10, Limit: 20}},
		{"a key's queued tasks", "tasks_key_seq", weir.TaskFilter{KeyID: "k1", Statuses: queued, Limit: 20}},
		{"a key's tasks, newest first", "tasks_key_seq", weir.TaskFilter{KeyID: "k1", Descending: true, BeforeSeq: 500, Limit: 21}},
		{"a key's videos", "tasks_key_kind_seq", weir.TaskFilter{KeyID: "k1", Kind: "video", AfterSeq: 10, Limit: 21}},
		{"a key's videos, newest first", "tasks_key_kind_seq", weir.TaskFilter{KeyID: "k1", Kind: "video", Descending: true, BeforeSeq: 500, Limit: 21}},
		{"everything", "INTEGER PRIMARY KEY", weir.TaskFilter{AfterSeq: 10, Limit: 20}},
	} {
		q, args := taskListQuery(taskColumns, tc.f)
		plan := explain(t, db, q, args...)
		if !strings.Contains(plan, tc.index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want %s and no sort", tc.name, plan, tc.index)
		}
	}
}

// explain is EXPLAIN QUERY PLAN's lines for q, joined by "; ".
func explain(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	return strings.Join(queryPlan(t, db, q, args), "; ")
}

// TestTaskListWhole lists without a limit and with one above smallList,
// the listings sized by a count first, from a store that also holds tasks
// of another status.
func TestTaskListWhole(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	const history, queued = 20, 200
	fillTasks(t, db, history, queued, weir.TaskQueued)
	for _, limit := range []int{0, smallList + 1} {
		got, err := db.TaskList(t.Context(), weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued}, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != queued {
			t.Fatalf("limit %d: listed %d queued tasks, want %d", limit, len(got), queued)
		}
		for i, task := range got {
			if want := int64(history + i + 1); task.Seq != want || task.Status != weir.TaskQueued || len(task.Input) == 0 {
				t.Fatalf("limit %d: task %d: seq %d, status %s, %d bytes of input; want seq %d, queued, an input",
					limit, i, task.Seq, task.Status, len(task.Input), want)
			}
		}
	}
}

// TestTaskStoredBeforeFingerprints: a task stored before migration 00004
// comes back with no fingerprint, which matches any request, and not
// deleted.
func TestTaskStoredBeforeFingerprints(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	p, err := newMigrator(db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(t.Context(), 3); err != nil {
		t.Fatalf("down to 3: %v", err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// As the store wrote keys and tasks before 00004.
	if _, err := db.SQL().ExecContext(t.Context(), `INSERT INTO api_keys (id, name, prefix, hash, group_name, created_at)
		VALUES ('k1', '', '', 'h1', '', ?)`, formatTime(at)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().ExecContext(t.Context(), `INSERT INTO tasks (id, key_id, kind, model, input, priority, status,
		idempotency_key, created_at) VALUES ('video_old', 'k1', 'video', 'sora-2', X'7B7D', 0, 'succeeded', 'idem-old', ?)`,
		formatTime(at)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(t.Context()); err != nil {
		t.Fatalf("up: %v", err)
	}
	got, err := db.TaskGet(t.Context(), "video_old")
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint != "" || got.Deleted() || !got.SameRequest("anything") {
		t.Errorf("old task: fingerprint %q, deleted at %v; want none, not deleted, matching any request", got.Fingerprint, got.DeletedAt)
	}
	again := weir.Task{ID: "video_new", KeyID: "k1", Kind: "video", Model: "sora-2", Status: weir.TaskQueued,
		IdempotencyKey: "idem-old", Fingerprint: strings.Repeat("ab", 32), CreatedAt: at}
	if created, err := db.TaskCreate(t.Context(), &again); err != nil || created || again.ID != "video_old" || again.Fingerprint != "" {
		t.Errorf("a repeat of the old task's key = %v, %v, %s %q; want the old task, without a fingerprint", created, err, again.ID, again.Fingerprint)
	}
}

// TestTaskCreateMany stores tasks in order, one transaction for all; a
// batch that fails half-way (its third task's idempotency key is taken)
// stores none of them.
func TestTaskCreateMany(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key-1", Hash: "hash-1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	batch := func(prefix string, n int) []*weir.Task {
		var ts []*weir.Task
		for i := range n {
			ts = append(ts, &weir.Task{ID: fmt.Sprintf("%s_%d", prefix, i), KeyID: "key-1", Kind: "video", Model: "sora-2",
				Input: []byte(`{"prompt":"x"}`), Status: weir.TaskQueued, Candidate: -1, CreatedAt: at.Add(time.Duration(i) * time.Millisecond),
				IdempotencyKey: fmt.Sprintf("%s-idem-%d", prefix, i)})
		}
		return ts
	}
	first := batch("a", 5)
	if err := db.TaskCreateMany(ctx, first); err != nil {
		t.Fatal(err)
	}
	for i, task := range first {
		got, err := db.TaskGet(ctx, task.ID)
		if err != nil || got.Seq != task.Seq || task.Seq != int64(i+1) {
			t.Fatalf("task %d: stored seq %d (%v), set %d; want %d", i, got.Seq, err, task.Seq, i+1)
		}
	}
	second := batch("b", 5)
	second[2].IdempotencyKey = first[0].IdempotencyKey
	if err := db.TaskCreateMany(ctx, second); !errors.Is(err, weir.ErrConflict) {
		t.Fatalf("a batch with a taken idempotency key: %v, want weir.ErrConflict", err)
	}
	for _, task := range second {
		if _, err := db.TaskGet(ctx, task.ID); !errors.Is(err, weir.ErrNotFound) || task.Seq != 0 {
			t.Errorf("task %s of the failed batch: %v, seq %d; want not stored, seq unset", task.ID, err, task.Seq)
		}
	}
}
