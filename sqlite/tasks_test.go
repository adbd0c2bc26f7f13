package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// newQueuedTask stores a key and a queued task of it.
func newQueuedTask(t *testing.T, db *DB) weir.Task {
	t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := db.KeyCreate(t.Context(), weir.APIKey{ID: "k1", Hash: "h1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	task := weir.Task{ID: "video_1", KeyID: "k1", Kind: "video", Model: "sora-2", Input: []byte(`{}`),
		Status: weir.TaskQueued, Candidate: -1, CreatedAt: at}
	if created, err := db.TaskCreate(t.Context(), &task); err != nil || !created {
		t.Fatalf("TaskCreate = %v, %v", created, err)
	}
	return task
}

var admit = weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted, PlatformModel: "pm"}

// insertJob stands for River's InsertTx: another write in the same
// transaction.
func insertJob(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO usage_records (request_id, key_id, model, platform_model, endpoint,
		prompt_tokens, completion_tokens, waited_ns, latency_ns, status, outcome, at)
		VALUES ('job-1', 'k1', '', '', '', 0, 0, 0, 0, 0, '', '2026-01-02T03:04:05.000000Z')`)
	return err
}

func usageCount(t *testing.T, db *DB) int {
	t.Helper()
	n := 0
	if err := db.read.QueryRowContext(t.Context(), `SELECT count(*) FROM usage_records`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestInTx checks that a task update and another write in InTx commit
// together, and that an error or a panic in fn rolls both back and leaves
// the write connection free.
func TestInTx(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	task := newQueuedTask(t, db)

	failed := errors.New("river said no")
	err := db.InTx(t.Context(), func(tx *sql.Tx) error {
		if ok, err := db.TaskUpdateTx(t.Context(), tx, &weir.TaskUpdateParams{ID: task.ID, Update: admit}); err != nil || !ok {
			t.Fatalf("TaskUpdateTx = %v, %v", ok, err)
		}
		if err := insertJob(t.Context(), tx); err != nil {
			t.Fatal(err)
		}
		return failed
	})
	if err != failed {
		t.Errorf("InTx returned %v, want fn's error as it is", err)
	}
	if got, _ := db.TaskGet(t.Context(), task.ID); got.Status != weir.TaskQueued || usageCount(t, db) != 0 {
		t.Fatalf("after a failed InTx: task %s, %d jobs; want queued and none", got.Status, usageCount(t, db))
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("InTx swallowed fn's panic")
			}
		}()
		db.InTx(t.Context(), func(tx *sql.Tx) error {
			if _, err := db.TaskUpdateTx(t.Context(), tx, &weir.TaskUpdateParams{ID: task.ID, Update: admit}); err != nil {
				t.Fatal(err)
			}
			panic("boom")
		})
	}()
	if got, _ := db.TaskGet(t.Context(), task.ID); got.Status != weir.TaskQueued {
		t.Fatalf("after a panic in InTx the task is %s, want queued", got.Status)
	}

	err = db.InTx(t.Context(), func(tx *sql.Tx) error {
		if ok, err := db.TaskUpdateTx(t.Context(), tx, &weir.TaskUpdateParams{ID: task.ID, Update: admit}); err != nil || !ok {
			t.Fatalf("TaskUpdateTx = %v, %v", ok, err)
		}
		// The read pool sees only what is committed.
		if got, err := db.TaskGet(t.Context(), task.ID); err != nil || got.Status != weir.TaskQueued {
			t.Errorf("TaskGet inside the transaction = %s, %v; want queued", got.Status, err)
		}
		return insertJob(t.Context(), tx)
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	got, err := db.TaskGet(t.Context(), task.ID)
	if err != nil || got.Status != weir.TaskAdmitted || got.PlatformModel != "pm" || usageCount(t, db) != 1 {
		t.Fatalf("after InTx: task %+v (%v), %d jobs; want admitted on pm and one job", got, err, usageCount(t, db))
	}
	// The CAS inside a transaction: the task has moved on.
	err = db.InTx(t.Context(), func(tx *sql.Tx) error {
		ok, err := db.TaskUpdateTx(t.Context(), tx, &weir.TaskUpdateParams{ID: task.ID, Update: admit})
		if ok {
			t.Errorf("TaskUpdateTx from queued applied to an admitted task")
		}
		return err
	})
	if err != nil {
		t.Errorf("InTx: %v", err)
	}
}

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
		q, args := taskListQuery(tc.f)
		plan := explain(t, db, q, args...)
		if !strings.Contains(plan, tc.index) || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want %s and no sort", tc.name, plan, tc.index)
		}
	}
	// The reaper's query.
	if plan := explain(t, db, `SELECT id FROM tasks WHERE status = 'queued' AND deadline <= ?`, "2026"); !strings.Contains(plan, "tasks_status_deadline") {
		t.Errorf("reaper: plan %q, want tasks_status_deadline", plan)
	}
}

func explain(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
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
