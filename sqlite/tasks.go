package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

var _ weir.TaskStore = (*DB)(nil)

const taskColumns = `seq, id, key_id, kind, model, input, priority, status,
	platform_model, candidate, progress, upstream_id, result, error_code, error_message,
	callback_url, idempotency_key, attempts, created_at, admitted_at, finished_at, deadline,
	fingerprint, deleted_at, callback_events, callback_gone_at, run_mode, run_id, trace_parent,
	upstream_site`

// The task statements prepared at Open: TaskGet on the read pool (clients
// poll it), the others on the write connection.
const (
	taskGetSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ?`

	// taskInsertSQL inserts a task unless its key already holds its
	// idempotency key; it returns the new seq, or no row. A taken id is
	// still a constraint error: the conflict target names only the
	// idempotency constraint.
	taskInsertSQL = `INSERT INTO tasks (id, key_id, kind, model, input, priority, status,
		platform_model, candidate, progress, upstream_id, result, error_code, error_message,
		callback_url, idempotency_key, attempts, created_at, admitted_at, finished_at, deadline,
		fingerprint, callback_events, run_mode, run_id, trace_parent, upstream_site)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (key_id, idempotency_key) DO NOTHING
		RETURNING seq`

	taskByIdempotencySQL = `SELECT ` + taskColumns + ` FROM tasks WHERE key_id = ? AND idempotency_key = ?`

	// taskUpdateSQL is the compare-and-set: one statement, so no other
	// writer (River's, another process's) can move the task between the
	// check and the change. A NULL parameter leaves its column as it is.
	// ?2 is the statuses the task may be in, each between '|'s
	// (fromList); the terminal ones never match, whatever ?2 says. The
	// statuses are matched with instr and the terminal ones with
	// comparisons, not IN lists: SQLite builds a temporary table for an
	// IN list of more than two values, on every execution.
	taskUpdateSQL = `UPDATE tasks SET
		status         = ?3,` + taskUpdateSetSQL + `
		WHERE id = ?1
		AND instr(?2, '|' || status || '|') > 0
		AND status <> 'succeeded' AND status <> 'failed' AND status <> 'cancelled' AND status <> 'expired'`

	// taskUpdateSameSQL is taskUpdateSQL for an update that leaves the
	// status as it is (a running task's progress, say): status is not
	// set, so SQLite leaves the indexes that begin with it alone. ?3 is
	// both the status the task must be in and stays in, never a terminal
	// one (validateTaskUpdate); ?2 is not used.
	taskUpdateSameSQL = `UPDATE tasks SET` + taskUpdateSetSQL + `
		WHERE id = ?1 AND status = ?3`

	// taskUpdateSetSQL is what both updates set besides the status.
	taskUpdateSetSQL = `
		platform_model = coalesce(?4, platform_model),
		candidate      = coalesce(?5, candidate),
		progress       = coalesce(?6, progress),
		upstream_id    = CASE WHEN ?14 THEN '' ELSE coalesce(?7, upstream_id) END,
		upstream_site  = CASE WHEN ?14 THEN '' ELSE coalesce(?15, upstream_site) END,
		result         = CASE WHEN ?14 THEN NULL ELSE coalesce(?8, result) END,
		error_code     = coalesce(?9, error_code),
		error_message  = coalesce(?10, error_message),
		attempts       = coalesce(?11, attempts),
		admitted_at    = coalesce(?12, admitted_at),
		finished_at    = coalesce(?13, finished_at)`

	taskStatusSQL = `SELECT status FROM tasks WHERE id = ?`

	// taskDeleteSQL marks a terminal task deleted, once.
	taskDeleteSQL = `UPDATE tasks SET deleted_at = ?2
		WHERE id = ?1 AND deleted_at IS NULL
		AND status IN ('succeeded', 'failed', 'cancelled', 'expired')`

	// taskCallbackGoneSQL records a callback URL's 410, once.
	taskCallbackGoneSQL = `UPDATE tasks SET callback_gone_at = ?2
		WHERE id = ?1 AND callback_gone_at IS NULL`
)

// InGroupTx is InTx in a transaction that concurrent callers share
// (group commit): fn runs in a savepoint of it, rolled back to alone if
// fn fails, and InGroupTx returns once the transaction has committed or
// failed, with fn's error or the transaction's. Inside fn, give every
// statement a context without cancel (context.WithoutCancel): a
// statement interrupted by its context's end rolls back the whole
// transaction, the other callers' writes with it. The task service ends
// tasks through it, many at once while they drain.
func (db *DB) InGroupTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.inGroupTx(ctx, fn)
}

// InTx runs fn in a transaction on the write connection (begun IMMEDIATE)
// and commits it if fn returns nil; otherwise, or if fn panics, it rolls
// back. fn's error is returned as it is. The task service uses it to change
// a task and insert its River job atomically: pass tx to TaskUpdateTx and
// to River's InsertTx.
//
// The transaction holds the one write connection: inside fn, write only
// through tx. A write through the DB's own methods would wait for the
// connection fn holds, forever. Reads through the DB's methods (TaskGet,
// KeyByID...) use the read pool and see only what was committed before
// they began; on ":memory:" they too would wait forever.
func (db *DB) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	committed = true
	return nil
}

// TaskCreate stores a new task and sets t.Seq. If t's key already holds a
// task with t.IdempotencyKey, nothing is stored: the stored task is copied
// into *t and created is false. The lookup and the insert are one
// transaction, so of concurrent submissions with the same key and
// idempotency key exactly one creates the task and the others get it.
// The caller decides what a repeated submission with a different body
// means.
//
// ID, KeyID, Kind, Model, a known Status and CreatedAt are required
// (weir.ErrInvalid); so is an existing key. A taken ID is weir.ErrConflict.
func (db *DB) TaskCreate(ctx context.Context, t *weir.Task) (created bool, err error) {
	if err := t.ValidateNew(); err != nil {
		return false, fmt.Errorf("create task %q: %w", t.ID, err)
	}
	// t changes only once the transaction has committed.
	c := *t
	err = db.inGroupTx(ctx, func(tx *sql.Tx) error {
		created, err = db.taskCreateTx(context.WithoutCancel(ctx), tx, &c)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("create task %s: %w", t.ID, err)
	}
	*t = c
	return created, nil
}

// TaskCreateMany stores new tasks in one transaction, in order, and sets
// each one's Seq: all of them or, on any error, none. It is TaskCreate
// for a bulk load (a benchmark's queue of 10^6 tasks, say): a task whose
// key already holds its idempotency key is weir.ErrConflict here, not
// returned in its place.
func (db *DB) TaskCreateMany(ctx context.Context, ts []*weir.Task) error {
	for _, t := range ts {
		if err := t.ValidateNew(); err != nil {
			return fmt.Errorf("create task %q: %w", t.ID, err)
		}
	}
	// The tasks change only once the transaction has committed.
	seqs := make([]int64, len(ts))
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		for i, t := range ts {
			c := *t
			created, err := db.taskCreateTx(ctx, tx, &c)
			if err != nil {
				return fmt.Errorf("create task %s: %w", t.ID, err)
			}
			if !created {
				return fmt.Errorf("create task %s: its idempotency key %q is taken: %w", t.ID, t.IdempotencyKey, weir.ErrConflict)
			}
			seqs[i] = c.Seq
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, t := range ts {
		t.Seq = seqs[i]
	}
	return nil
}

// taskCreateTx is TaskCreate's work inside tx, on a validated task: it
// sets t.Seq, or replaces *t with the task stored under its idempotency key.
func (db *DB) taskCreateTx(ctx context.Context, tx *sql.Tx, t *weir.Task) (created bool, err error) {
	var seq int64
	err = tx.StmtContext(ctx, db.taskInsert).QueryRowContext(ctx,
		t.ID, t.KeyID, t.Kind, t.Model, blob(t.Input), int64(t.Priority), string(t.Status),
		t.PlatformModel, int64(t.Candidate), int64(t.Progress), t.UpstreamID, nullBlob(t.Result),
		t.ErrorCode, t.ErrorMessage, t.CallbackURL, nullString(t.IdempotencyKey), int64(t.Attempts),
		formatTime(t.CreatedAt), nullTime(t.AdmittedAt), nullTime(t.FinishedAt), nullTime(t.Deadline),
		nullString(t.Fingerprint), eventsColumn(t.CallbackEvents), string(t.RunMode), t.RunID, t.TraceParent,
		t.UpstreamSite,
	).Scan(&seq)
	switch {
	case err == nil:
		t.Seq = seq
		return true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, classify(err)
	}
	// Only the idempotency constraint is DO NOTHING: the task is there.
	stored, err := scanTask(tx.StmtContext(ctx, db.taskByIdempotency).QueryRowContext(ctx, t.KeyID, t.IdempotencyKey))
	if err != nil {
		return false, fmt.Errorf("load the task of idempotency key %q: %w", t.IdempotencyKey, err)
	}
	*t = stored
	return false, nil
}

// eventsColumn is the callback_events column of events: a JSON array, or
// NULL for none.
func eventsColumn(events []weir.TaskEvent) any {
	if len(events) == 0 {
		return nil
	}
	b, _ := json.Marshal(events) // strings: cannot fail
	return string(b)
}

// TaskByIdempotencyKey finds the task keyID's idempotency key stored,
// from the read pool.
func (db *DB) TaskByIdempotencyKey(ctx context.Context, keyID, idempotencyKey string) (weir.Task, error) {
	if idempotencyKey == "" {
		return weir.Task{}, fmt.Errorf("load the task of an empty idempotency key: %w", weir.ErrNotFound)
	}
	t, err := scanTask(db.read.QueryRowContext(ctx, taskByIdempotencySQL, keyID, idempotencyKey))
	if err != nil {
		return weir.Task{}, fmt.Errorf("load the task of idempotency key %q: %w", idempotencyKey, err)
	}
	return t, nil
}

// TaskGet finds a task by ID; weir.ErrNotFound if there is none. It reads
// from the read pool: what was committed.
func (db *DB) TaskGet(ctx context.Context, id string) (weir.Task, error) {
	t, err := scanTask(db.taskGet.QueryRowContext(ctx, id))
	if err != nil {
		return weir.Task{}, fmt.Errorf("load task %s: %w", id, err)
	}
	return t, nil
}

// TaskList lists tasks in Seq order (newest first if f.Descending), never
// deleted ones: only f.KeyID's if set, only of f.Kind and f.Model if set, only those
// in f.Statuses if any, only Seq > f.AfterSeq and, if f.BeforeSeq is
// positive, Seq < f.BeforeSeq, and at most f.Limit if it is positive (0:
// no limit; negative, or an unknown status: weir.ErrInvalid). It reads
// from the read pool.
//
// A listing of one status, or of one key, reads an index in Seq order, so
// a page costs its own size and listing every queued task at start-up one
// pass over them (BenchmarkTaskListQueued); several statuses without a
// key (the few admitted and running tasks at start-up) are sorted.
func (db *DB) TaskList(ctx context.Context, f weir.TaskFilter) ([]weir.Task, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	q, args := taskListQuery(taskColumns, f)
	// The result is allocated once: appending a large listing to a
	// growing slice would copy it at every doubling, under the GC's write
	// barriers, a large part of the listing's time. For an unbounded or
	// large listing, a count through the same index sizes it first; the
	// count is only a hint, so it needs no transaction with the listing.
	var out []weir.Task
	if f.Limit > 0 && f.Limit <= smallList {
		out = make([]weir.Task, 0, f.Limit)
	} else {
		var n int
		if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM (`+q+`)`, args...).Scan(&n); err != nil {
			return nil, fmt.Errorf("list tasks: count: %w", err)
		}
		out = make([]weir.Task, 0, n)
	}
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	if out, err = rowscan.Append(out, rows, newTaskScanner().scan); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// smallList is the largest TaskFilter.Limit for which TaskList allocates
// the result without counting first.
const smallList = 1000

// TaskStateList lists the tasks TaskList would list with f, in the same
// order, each as its Seq, id and status alone. It reads from the read
// pool.
func (db *DB) TaskStateList(ctx context.Context, f weir.TaskFilter) ([]weir.TaskState, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list task states: %w", err)
	}
	q, args := taskListQuery(taskStateColumns, f)
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list task states: %w", err)
	}
	defer rows.Close()
	out, err := rowscan.Append(nil, rows, scanTaskState)
	if err != nil {
		return nil, fmt.Errorf("list task states: %w", err)
	}
	return out, nil
}

// taskStateColumns are what TaskStateList reads of a task.
const taskStateColumns = `seq, id, status`

func scanTaskState(r rowscan.Row) (weir.TaskState, error) {
	var s weir.TaskState
	var status string
	if err := r.Scan(&s.Seq, &s.ID, &status); err != nil {
		return weir.TaskState{}, err
	}
	s.Status = weir.TaskStatus(status)
	return s, nil
}

// taskListQuery builds the query of TaskList (taskColumns) or
// TaskStateList (taskStateColumns).
func taskListQuery(columns string, f weir.TaskFilter) (string, []any) {
	where := []string{"deleted_at IS NULL"}
	var args []any
	if f.AfterSeq > 0 {
		where, args = append(where, "seq > ?"), append(args, f.AfterSeq)
	}
	if f.BeforeSeq > 0 {
		where, args = append(where, "seq < ?"), append(args, f.BeforeSeq)
	}
	if f.KeyID != "" {
		where, args = append(where, "key_id = ?"), append(args, f.KeyID)
	}
	if f.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, f.Kind)
	}
	if f.Model != "" {
		where, args = append(where, "model = ?"), append(args, f.Model)
	}
	if len(f.Statuses) > 0 {
		marks := strings.Repeat(", ?", len(f.Statuses))[2:]
		where = append(where, "status IN ("+marks+")")
		for _, s := range f.Statuses {
			args = append(args, string(s))
		}
	}
	order := ` ORDER BY seq`
	if f.Descending {
		order += ` DESC`
	}
	q := `SELECT ` + columns + ` FROM tasks WHERE ` + strings.Join(where, " AND ") + order
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return q, args
}

// TaskUpdate applies u (p.Update) to task p.ID if its status is in
// u.From, in one statement, and reports whether it did: false with a nil
// error means the task had moved on. A task that is not there is
// weir.ErrNotFound.
//
// Zero fields of u are left as they are (a nil or empty Result too);
// Status is always set. u.From must not be empty and must not hold a
// terminal status, which is never left; u.Status must be known
// (weir.ErrInvalid).
func (db *DB) TaskUpdate(ctx context.Context, p *weir.TaskUpdateParams) (applied bool, err error) {
	// In a transaction so that a miss can tell "moved on" from "not there"
	// with the same view of the table.
	var updateErr error // already says which task
	err = db.inGroupTx(ctx, func(tx *sql.Tx) error {
		applied, updateErr = db.TaskUpdateTx(context.WithoutCancel(ctx), tx, p)
		return updateErr
	})
	if err != nil && err != updateErr {
		return false, fmt.Errorf("update task %s: %w", p.ID, err)
	}
	return applied, err
}

// TaskUpdateTx is TaskUpdate inside tx, which should come from InTx (or
// be another transaction on SQL()); it commits nothing itself.
func (db *DB) TaskUpdateTx(ctx context.Context, tx *sql.Tx, p *weir.TaskUpdateParams) (bool, error) {
	id, u := p.ID, p.Update
	from, err := validateTaskUpdate(u)
	if err != nil {
		return false, fmt.Errorf("update task %s: %w", id, err)
	}
	stmt := db.taskUpdate
	if sameStatus(u) {
		stmt = db.taskUpdateSame
	}
	res, err := tx.StmtContext(ctx, stmt).ExecContext(ctx,
		id, from, string(u.Status),
		nullString(u.PlatformModel), nullInt(u.Candidate), nullInt(u.Progress), nullString(u.UpstreamID),
		nullBlob(u.Result), nullString(u.ErrorCode), nullString(u.ErrorMessage), nullInt(u.Attempts),
		nullTime(u.AdmittedAt), nullTime(u.FinishedAt), u.ClearUpstream, nullString(u.UpstreamSite))
	if err != nil {
		return false, fmt.Errorf("update task %s to %s: %w", id, u.Status, classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("update task %s to %s: %w", id, u.Status, err)
	}
	if n > 0 {
		return true, nil
	}
	if err := db.taskExistsTx(ctx, tx, id); err != nil {
		return false, fmt.Errorf("update task %s: %w", id, err)
	}
	return false, nil
}

// taskExistsTx tells a statement that changed no task because the task is
// not there (weir.ErrNotFound) from one whose task had moved on (nil).
func (db *DB) taskExistsTx(ctx context.Context, tx *sql.Tx, id string) error {
	var status string
	err := tx.StmtContext(ctx, db.taskStatus).QueryRowContext(ctx, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return weir.ErrNotFound
	}
	return err
}

// TaskDelete marks terminal task p.ID deleted at p.At and reports
// whether it did: false with a nil error means the task is not terminal
// or was already deleted. A task that is not there is weir.ErrNotFound; a
// zero p.At is weir.ErrInvalid.
func (db *DB) TaskDelete(ctx context.Context, p *weir.TaskDeleteParams) (deleted bool, err error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("delete task %s: %w", p.ID, err)
	}
	err = db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, db.taskDelete).ExecContext(ctx, p.ID, formatTime(p.At))
		if err != nil {
			return classify(err)
		}
		n, err := res.RowsAffected()
		if err != nil || n > 0 {
			deleted = n > 0
			return err
		}
		return db.taskExistsTx(ctx, tx, p.ID)
	})
	if err != nil {
		return false, fmt.Errorf("delete task %s: %w", p.ID, err)
	}
	return deleted, nil
}

// TaskCallbackGone records that task p.ID's callback URL answered 410
// Gone at p.At and reports whether it did: false with a nil error means
// it was recorded before (the first time stays). A task that is not there
// is weir.ErrNotFound; a zero p.At is weir.ErrInvalid. Unlike TaskUpdate it
// applies whatever the task's status, deleted tasks included: a terminal
// task still has events in flight.
func (db *DB) TaskCallbackGone(ctx context.Context, p *weir.TaskCallbackGoneParams) (marked bool, err error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("mark the callback of task %s gone: %w", p.ID, err)
	}
	err = db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, taskCallbackGoneSQL, p.ID, formatTime(p.At))
		if err != nil {
			return classify(err)
		}
		n, err := res.RowsAffected()
		if err != nil || n > 0 {
			marked = n > 0
			return err
		}
		return db.taskExistsTx(ctx, tx, p.ID)
	})
	if err != nil {
		return false, fmt.Errorf("mark the callback of task %s gone: %w", p.ID, err)
	}
	return marked, nil
}

// validateTaskUpdate checks u and returns u.From as the JSON array the
// update statement takes.
func validateTaskUpdate(u weir.TaskUpdate) (string, error) {
	if err := u.Validate(); err != nil {
		return "", err
	}
	return fromList(u.From), nil
}

// fromList is statuses as taskUpdateSQL's ?2 matches them: each between
// '|'s.
func fromList(statuses []weir.TaskStatus) string {
	var b strings.Builder
	b.WriteByte('|')
	for _, s := range statuses {
		b.WriteString(string(s))
		b.WriteByte('|')
	}
	return b.String()
}

// sameStatus reports whether u leaves a task's status as it is, as
// taskUpdateSameSQL does.
func sameStatus(u weir.TaskUpdate) bool {
	for _, s := range u.From {
		if s != u.Status {
			return false
		}
	}
	return true
}

// scanTask reads one row of taskColumns; no row is weir.ErrNotFound.
func scanTask(row rowscan.Row) (weir.Task, error) {
	return newTaskScanner().scan(row)
}

// taskScanner reads rows of taskColumns. It holds Scan's destinations so
// that a listing reuses them: scanning into a fresh Task and argument
// list per row costs two heap allocations a row, a third of the time of
// listing 100,000 tasks.
type taskScanner struct {
	t                                      weir.Task
	priority, candidate, progress, retries int64
	status, created                        string
	idem, admitted, finished, deadline     sql.NullString
	fingerprint, deleted, events, gone     sql.NullString
	runMode                                string
	dest                                   []any
}

func newTaskScanner() *taskScanner {
	s := &taskScanner{}
	t := &s.t
	s.dest = []any{&t.Seq, &t.ID, &t.KeyID, &t.Kind, &t.Model, &t.Input, &s.priority, &s.status,
		&t.PlatformModel, &s.candidate, &s.progress, &t.UpstreamID, &t.Result, &t.ErrorCode, &t.ErrorMessage,
		&t.CallbackURL, &s.idem, &s.retries, &s.created, &s.admitted, &s.finished, &s.deadline,
		&s.fingerprint, &s.deleted, &s.events, &s.gone, &s.runMode, &t.RunID, &t.TraceParent,
		&t.UpstreamSite}
	return s
}

func (s *taskScanner) scan(row rowscan.Row) (weir.Task, error) {
	err := row.Scan(s.dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return weir.Task{}, weir.ErrNotFound
	}
	if err != nil {
		return weir.Task{}, err
	}
	t := s.t
	t.Priority, t.Status = int32(s.priority), weir.TaskStatus(s.status)
	t.Candidate, t.Progress, t.Attempts = int(s.candidate), int(s.progress), int(s.retries)
	t.IdempotencyKey, t.Fingerprint = s.idem.String, s.fingerprint.String
	t.RunMode = weir.RunMode(s.runMode)
	if len(t.Input) == 0 {
		t.Input = nil
	}
	t.CallbackEvents = nil
	if s.events.Valid {
		if err := json.Unmarshal([]byte(s.events.String), &t.CallbackEvents); err != nil {
			return weir.Task{}, fmt.Errorf("task %s: callback events %q: %w", t.ID, s.events.String, err)
		}
	}
	if t.CreatedAt, err = parseTime(s.created); err != nil {
		return weir.Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.AdmittedAt, err = parseNullTime(s.admitted); err != nil {
		return weir.Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.FinishedAt, err = parseNullTime(s.finished); err != nil {
		return weir.Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.Deadline, err = parseNullTime(s.deadline); err != nil {
		return weir.Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.DeletedAt, err = parseNullTime(s.deleted); err != nil {
		return weir.Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.CallbackGoneAt, err = parseNullTime(s.gone); err != nil {
		return weir.Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	return t, nil
}

// parseNullTime is parseTime for a nullable column: NULL is the zero time.
func parseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseTime(s.String)
}

// The arguments of optional columns: NULL for a zero value, which the
// insert stores as NULL and the update reads as "leave it".

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

func nullBlob(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

// blob is b for a NOT NULL BLOB column: the driver binds a nil slice as
// NULL.
func blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
