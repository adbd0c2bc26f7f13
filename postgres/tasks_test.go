package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/task"
)

// The task service runs on a DB, in pgx's transactions, and in a fleet.
var (
	_ task.Store[pgx.Tx]         = (*DB)(nil)
	_ task.Notifier              = (*DB)(nil)
	_ task.JobReclaimer          = (*DB)(nil)
	_ task.ManyReader            = (*DB)(nil)
	_ task.StateLister           = (*DB)(nil)
	_ task.ManyUpdater[pgx.Tx]   = (*DB)(nil)
	_ task.FencedUpdater[pgx.Tx] = (*DB)(nil)
)

// newQueuedTask stores a key and a queued task of it.
func newQueuedTask(t *testing.T, db *DB) weir.Task {
	t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := db.KeyCreate(t.Context(), weir.APIKey{ID: "k1", Hash: "h1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	task := weir.Task{ID: "video_1", KeyID: "k1", Kind: "video", Model: "sora-2", Input: []byte(`{"prompt": "a cat"}`),
		Status: weir.TaskQueued, Candidate: -1, CreatedAt: at}
	if created, err := db.TaskCreate(t.Context(), &task); err != nil || !created {
		t.Fatalf("TaskCreate = %v, %v", created, err)
	}
	return task
}

// twoQueuedTasks stores a key and two queued tasks of it, the second
// newQueuedTask's with another id.
func twoQueuedTasks(t *testing.T, db *DB) (first, second weir.Task) {
	t.Helper()
	first = newQueuedTask(t, db)
	second = first
	second.ID, second.IdempotencyKey = "video_2", ""
	if created, err := db.TaskCreate(t.Context(), &second); err != nil || !created {
		t.Fatalf("TaskCreate = %v, %v", created, err)
	}
	return first, second
}

// TestTwoPoolsRace races two DBs on one schema, as two replicas would:
// submitters on both create tasks under one idempotency key, and exactly
// one creates it; updaters on both move the same tasks from queued, and
// for each task exactly one update applies. Several rounds, so that the
// racers meet inside each other's statements.
func TestTwoPoolsRace(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	dbs := [2]*DB{open(t, dsn), open(t, dsn)}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := dbs[0].KeyCreate(t.Context(), weir.APIKey{ID: "k1", Hash: "h1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	const rounds, racers = 20, 8 // racers per round, half on each pool

	for round := range rounds {
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			created = make([]bool, racers)
			got     = make([]weir.Task, racers)
			errs    = make([]error, racers)
		)
		for i := range racers {
			wg.Go(func() {
				task := weir.Task{ID: fmt.Sprintf("video_%d_%d", round, i), KeyID: "k1", Kind: "video", Model: "sora-2",
					Input: []byte(`{}`), Status: weir.TaskQueued, IdempotencyKey: fmt.Sprintf("idem-%d", round),
					Fingerprint: fmt.Sprintf("%064x", i), CreatedAt: at}
				<-start
				created[i], errs[i] = dbs[i%2].TaskCreate(t.Context(), &task)
				got[i] = task
			})
		}
		close(start)
		wg.Wait()
		winner := onlyOne(t, fmt.Sprintf("round %d: creator", round), created, errs)
		for i := range racers {
			if got[i].ID != got[winner].ID || got[i].Fingerprint != got[winner].Fingerprint || got[i].Seq != got[winner].Seq {
				t.Errorf("round %d: creator %d got task %s (%q, seq %d), want the winner's %s (%q, seq %d)", round, i,
					got[i].ID, got[i].Fingerprint, got[i].Seq, got[winner].ID, got[winner].Fingerprint, got[winner].Seq)
			}
		}
		id := got[winner].ID

		// The task just created: racers on both pools move it from queued,
		// each to its own platform model.
		start = make(chan struct{})
		applied := make([]bool, racers)
		for i := range racers {
			wg.Go(func() {
				u := weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted,
					PlatformModel: fmt.Sprintf("pm-%d", i), Attempts: &i}
				<-start
				applied[i], errs[i] = dbs[i%2].TaskUpdate(t.Context(), &weir.TaskUpdateParams{ID: id, Update: u})
			})
		}
		close(start)
		wg.Wait()
		winner = onlyOne(t, fmt.Sprintf("round %d: updater", round), applied, errs)
		task, err := dbs[round%2].TaskGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != weir.TaskAdmitted || task.PlatformModel != fmt.Sprintf("pm-%d", winner) || task.Attempts != winner {
			t.Errorf("round %d: task after the race: %s on %s, attempts %d; want admitted with updater %d's changes alone",
				round, task.Status, task.PlatformModel, task.Attempts, winner)
		}
	}
	tasks, err := dbs[0].TaskList(t.Context(), weir.TaskFilter{})
	if err != nil || len(tasks) != rounds {
		t.Errorf("TaskList: %d tasks (%v), want %d: one per idempotency key", len(tasks), err, rounds)
	}
}

// onlyOne checks that of racers that all succeeded exactly one won, and
// returns which.
func onlyOne(t *testing.T, who string, won []bool, errs []error) int {
	t.Helper()
	winner := -1
	for i := range won {
		if errs[i] != nil {
			t.Fatalf("%s %d: %v", who, i, errs[i])
		}
		if won[i] {
			if winner >= 0 {
				t.Fatalf("%ss %d and %d both won", who, winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no %s won", who)
	}
	return winner
}

// TestTaskListPlans checks that each listing the service pages through
// has an index of its own, which the planner takes over a scan of the
// whole table once the table is large: a page costs about its own size.
// (The planner may read a few matching rows through a bitmap scan of the
// index and sort them, where that is cheaper than walking it in order.)
func TestTaskListPlans(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	const keys = 100
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range keys {
		if err := db.KeyCreate(t.Context(), weir.APIKey{ID: fmt.Sprintf("k%d", i), Hash: fmt.Sprintf("h%d", i), CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	// Many tasks over many keys, most finished: as a database in use.
	if _, err := db.Pool().Exec(t.Context(), `INSERT INTO tasks (id, key_id, kind, model, input, priority, status, created_at)
		SELECT 'task_' || g, 'k' || (g % $1), CASE WHEN g % 3 = 0 THEN 'video' ELSE 'task' END, 'm', '\x7b7d', 0,
			CASE WHEN g % 50 = 0 THEN 'queued' ELSE 'succeeded' END, now()
		FROM generate_series(1, 20000) AS g`, keys); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(t.Context(), `ANALYZE tasks`); err != nil {
		t.Fatal(err)
	}
	queued := []weir.TaskStatus{weir.TaskQueued}
	for _, tc := range []struct {
		name  string
		index []string // any of these
		f     weir.TaskFilter
	}{
		{"recovery by pages", []string{"tasks_status_seq"}, weir.TaskFilter{Statuses: queued, AfterSeq: 100, Limit: 100}},
		{"a key's tasks", []string{"tasks_key_seq", "tasks_key_kind_seq"}, weir.TaskFilter{KeyID: "k1", AfterSeq: 10, Limit: 20}},
		{"a key's tasks, newest first", []string{"tasks_key_seq", "tasks_key_kind_seq"}, weir.TaskFilter{KeyID: "k1", Descending: true, BeforeSeq: 5000, Limit: 21}},
		{"a key's videos", []string{"tasks_key_kind_seq"}, weir.TaskFilter{KeyID: "k1", Kind: "video", AfterSeq: 10, Limit: 21}},
		{"a key's videos, newest first", []string{"tasks_key_kind_seq"}, weir.TaskFilter{KeyID: "k1", Kind: "video", Descending: true, BeforeSeq: 5000, Limit: 21}},
		{"everything", []string{"tasks_pkey"}, weir.TaskFilter{AfterSeq: 10, Limit: 20}},
	} {
		q, args := taskListQuery(taskColumns, tc.f)
		plan := explain(t, db, q, args...)
		uses := false
		for _, index := range tc.index {
			uses = uses || strings.Contains(plan, " on "+index) || strings.Contains(plan, " using "+index)
		}
		if !uses || strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: plan\n%s\nwant a scan of %s", tc.name, plan, strings.Join(tc.index, " or "))
		}
	}
}

func explain(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Pool().Query(t.Context(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestTaskGetMany reads the tasks of several ids in one query, as
// TaskGet reads each, deleted ones too, and leaves out ids not stored.
func TestTaskGetMany(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t, pgtest.Schema(t))
	first, second := twoQueuedTasks(t, db)
	if ok, err := db.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: second.ID, Update: weir.TaskUpdate{
		From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskCancelled, FinishedAt: second.CreatedAt}}); err != nil || !ok {
		t.Fatalf("TaskUpdate = %v, %v", ok, err)
	}
	if ok, err := db.TaskDelete(ctx, &weir.TaskDeleteParams{ID: second.ID, At: second.CreatedAt}); err != nil || !ok {
		t.Fatalf("TaskDelete = %v, %v", ok, err)
	}
	got, err := db.TaskGetMany(ctx, []string{"video_none", second.ID, first.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d tasks, want the two stored", len(got))
	}
	for _, tk := range got {
		want, err := db.TaskGet(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(tk) != fmt.Sprint(want) {
			t.Errorf("TaskGetMany's %s = %+v, TaskGet's %+v", tk.ID, tk, want)
		}
	}
	if got, err := db.TaskGetMany(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("TaskGetMany(nil) = %v, %v; want none", got, err)
	}
}

// TestTaskUpdateManyTx applies a batch of updates in one transaction as
// TaskUpdateTx applies each: applied in order, false for a task whose
// status is not among From; a task not stored fails the batch, and
// the transaction, rolled back, changes nothing.
func TestTaskUpdateManyTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t, pgtest.Schema(t))
	first, second := twoQueuedTasks(t, db)
	cand := 0
	admit := func(id string) weir.TaskUpdateParams {
		return weir.TaskUpdateParams{ID: id, Update: weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted,
			PlatformModel: "pm", Candidate: &cand, AdmittedAt: first.CreatedAt.Add(time.Second)}}
	}
	var applied []bool
	err := db.InTx(ctx, func(tx pgx.Tx) (err error) {
		// The second task's second admission finds it admitted already.
		applied, err = db.TaskUpdateManyTx(ctx, tx, []weir.TaskUpdateParams{admit(second.ID), admit(first.ID), admit(second.ID)})
		return err
	})
	if err != nil || fmt.Sprint(applied) != "[true true false]" {
		t.Fatalf("TaskUpdateManyTx = %v, %v; want [true true false]", applied, err)
	}
	for _, id := range []string{first.ID, second.ID} {
		if got, err := db.TaskGet(ctx, id); err != nil || got.Status != weir.TaskAdmitted || got.PlatformModel != "pm" {
			t.Errorf("TaskGet(%s) = %s on %q, %v; want admitted on pm", id, got.Status, got.PlatformModel, err)
		}
	}

	third := first
	third.ID, third.IdempotencyKey = "video_3", ""
	if created, err := db.TaskCreate(ctx, &third); err != nil || !created {
		t.Fatalf("TaskCreate = %v, %v", created, err)
	}
	err = db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := db.TaskUpdateManyTx(ctx, tx, []weir.TaskUpdateParams{admit(third.ID), admit("video_none"), admit(third.ID)})
		return err
	})
	if !errors.Is(err, weir.ErrNotFound) || !strings.Contains(err.Error(), "video_none") {
		t.Errorf("TaskUpdateManyTx with a task not stored: %v, want ErrNotFound naming it", err)
	}
	if got, err := db.TaskGet(ctx, third.ID); err != nil || got.Status != weir.TaskQueued {
		t.Errorf("after the failed batch, TaskGet(%s) = %s, %v; want queued", third.ID, got.Status, err)
	}
	bad := admit(third.ID)
	bad.Update.Status = ""
	if err := db.InTx(ctx, func(tx pgx.Tx) error {
		_, err := db.TaskUpdateManyTx(ctx, tx, []weir.TaskUpdateParams{admit(third.ID), bad})
		return err
	}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("TaskUpdateManyTx with an invalid update: %v, want ErrInvalid", err)
	}
}

// TestTaskUpdateManyFencedTx fences a batch of updates by the term, in
// one round trip: under the term's epoch and leader the updates apply;
// under another epoch, or another leader, the term is not held and the
// server ran none of them (the transaction is failed); and the fence's row lock
// holds a campaign off until the transaction ends.
func TestTaskUpdateManyFencedTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	db := open(t, dsn)
	first, second := twoQueuedTasks(t, db)
	term, won, err := db.TermCampaign(ctx, &fleet.TermCampaignParams{Replica: "a", Addr: "a:1", Gen: 1, TTL: time.Minute})
	if err != nil || !won {
		t.Fatalf("TermCampaign = %+v, %v, %v", term, won, err)
	}
	cand := 0
	admit := func(id string) weir.TaskUpdateParams {
		return weir.TaskUpdateParams{ID: id, Update: weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted,
			PlatformModel: "pm", Candidate: &cand, AdmittedAt: first.CreatedAt.Add(time.Second)}}
	}
	for _, c := range []struct {
		leader string
		epoch  uint64
	}{{"a", term.Epoch + 1}, {"b", term.Epoch}} {
		var held bool
		var applied []bool
		errPassed := errors.New("the term has passed")
		err := db.InTx(ctx, func(tx pgx.Tx) (err error) {
			held, applied, err = db.TaskUpdateManyFencedTx(ctx, tx, c.leader, c.epoch, []weir.TaskUpdateParams{admit(first.ID)})
			if err == nil && !held {
				return errPassed
			}
			return err
		})
		if !errors.Is(err, errPassed) || applied != nil {
			t.Errorf("TaskUpdateManyFencedTx(%s, %d) = %v, %v, %v; want not held", c.leader, c.epoch, held, applied, err)
		}
		if got, err := db.TaskGet(ctx, first.ID); err != nil || got.Status != weir.TaskQueued {
			t.Errorf("after a fence not held, TaskGet = %s, %v; want queued", got.Status, err)
		}
	}

	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var pid uint32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	held, applied, err := db.TaskUpdateManyFencedTx(ctx, tx, "a", term.Epoch, []weir.TaskUpdateParams{admit(second.ID), admit(first.ID), admit(second.ID)})
	if err != nil || !held || fmt.Sprint(applied) != "[true true false]" {
		t.Fatalf("TaskUpdateManyFencedTx under the term = %v, %v, %v; want held, [true true false]", held, applied, err)
	}
	campaigned := make(chan error, 1)
	go func() {
		_, _, err := db.TermCampaign(context.Background(), &fleet.TermCampaignParams{Replica: "b", Addr: "b:1", Gen: 1, TTL: time.Minute, TakeOver: true, Epoch: term.Epoch})
		campaigned <- err
	}()
	waitFor(t, "a campaign waiting for the fenced transaction", func() bool {
		var n int
		err := db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, int64(pid)).Scan(&n)
		return err == nil && n > 0
	})
	select {
	case err := <-campaigned:
		t.Fatalf("a campaign ended (%v) while the fenced transaction was open", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-campaigned; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first.ID, second.ID} {
		if got, err := db.TaskGet(ctx, id); err != nil || got.Status != weir.TaskAdmitted {
			t.Errorf("TaskGet(%s) = %s, %v; want admitted", id, got.Status, err)
		}
	}
}

// TestTaskUpdateLooksUpOnlyWhenNotApplied: the compare-and-set that
// applies reads the task's row once (the update's own scan); the look-up
// that tells a task moved on from one not there runs only when the
// update did not apply.
func TestTaskUpdateLooksUpOnlyWhenNotApplied(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "k", Hash: "h", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TaskCreate(ctx, &weir.Task{ID: "task_1", KeyID: "k", Kind: "video", Model: "m", Status: weir.TaskRunning, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	plan := func(from weir.TaskStatus) string {
		t.Helper()
		p := 5
		args, err := taskUpdateArgs(&weir.TaskUpdateParams{ID: "task_1", Update: weir.TaskUpdate{
			From: []weir.TaskStatus{from}, Status: weir.TaskRunning, Progress: &p}})
		if err != nil {
			t.Fatal(err)
		}
		return explain(t, db, "(ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+taskUpdateSQL, args...)
	}
	// The look-up is the plan's last index scan of tasks.
	lookup := func(plan string) string {
		i := strings.LastIndex(plan, " on tasks ")
		if i < 0 {
			t.Fatalf("no scan of tasks in\n%s", plan)
		}
		line, _, _ := strings.Cut(plan[i:], "\n")
		return line
	}
	if got := lookup(plan(weir.TaskRunning)); !strings.Contains(got, "never executed") {
		t.Errorf("an update that applied looked the task up: %s", got)
	}
	if got := lookup(plan(weir.TaskQueued)); strings.Contains(got, "never executed") {
		t.Errorf("an update that did not apply did not look the task up: %s", got)
	}
}
