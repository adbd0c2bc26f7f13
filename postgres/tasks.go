package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

var _ weir.TaskStore = (*DB)(nil)

const taskColumns = `seq, id, key_id, kind, model, input, priority, status,
	platform_model, candidate, progress, upstream_id, result, error_code, error_message,
	callback_url, idempotency_key, attempts, created_at, admitted_at, finished_at, deadline,
	fingerprint, deleted_at, callback_events, callback_gone_at, run_mode, run_id, trace_parent,
	upstream_site`

// terminalStatuses is the SQL list of the statuses never left.
const terminalStatuses = `('succeeded', 'failed', 'cancelled', 'expired')`

const (
	taskGetSQL = `SELECT ` + taskColumns + ` FROM tasks WHERE id = $1`

	// taskInsertSQL inserts a task unless its key already holds its
	// idempotency key; it returns the new seq, or no row. A taken id is
	// still a unique violation: the conflict target names only the
	// idempotency constraint. Under READ COMMITTED, an insert that meets
	// a concurrent one of the same idempotency key waits for that
	// transaction to end: if it commits, this one does nothing; if it
	// rolls back, this one inserts.
	taskInsertSQL = `INSERT INTO tasks (id, key_id, kind, model, input, priority, status,
		platform_model, candidate, progress, upstream_id, result, error_code, error_message,
		callback_url, idempotency_key, attempts, created_at, admitted_at, finished_at, deadline,
		fingerprint, callback_events, run_mode, run_id, trace_parent, upstream_site)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)
		ON CONFLICT (key_id, idempotency_key) DO NOTHING
		RETURNING seq`

	taskByIdempotencySQL = `SELECT ` + taskColumns + ` FROM tasks WHERE key_id = $1 AND idempotency_key = $2`

	// taskUpdateSQL is the compare-and-set: one statement, so no other
	// writer (River's, another replica's) can move the task between the
	// check and the change. A concurrent update of the same task waits
	// for the row's lock and then checks the status again on the row as
	// the other left it (READ COMMITTED re-evaluates the WHERE clause), so
	// of updates from one status exactly one applies. A NULL parameter
	// leaves its column as it is. $2 holds the statuses the task may be
	// in; the terminal ones never match, whatever $2 says.
	//
	// It answers whether it applied and whether the task is there at all,
	// both from the statement's one snapshot: a task missed because it
	// moved on is told from one that does not exist in the same round
	// trip. An update that applied is of a task that is there: the
	// second answer looks the task up only when the first is false
	// (PostgreSQL runs a subquery's plan when its value is first needed),
	// so that the update most calls make costs no second read of the row.
	taskUpdateSQL = `WITH updated AS (
		UPDATE tasks SET
			status         = $3,
			platform_model = coalesce($4, platform_model),
			candidate      = coalesce($5, candidate),
			progress       = coalesce($6, progress),
			upstream_id    = CASE WHEN $14 THEN '' ELSE coalesce($7, upstream_id) END,
			upstream_site  = CASE WHEN $14 THEN '' ELSE coalesce($15, upstream_site) END,
			result         = CASE WHEN $14 THEN NULL ELSE coalesce($8, result) END,
			error_code     = coalesce($9, error_code),
			error_message  = coalesce($10, error_message),
			attempts       = coalesce($11, attempts),
			admitted_at    = coalesce($12, admitted_at),
			finished_at    = coalesce($13, finished_at)
		WHERE id = $1
		AND status = ANY ($2::text[])
		AND status NOT IN ` + terminalStatuses + `
		RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM updated),
			EXISTS (SELECT 1 FROM updated) OR EXISTS (SELECT 1 FROM tasks WHERE id = $1)`

	// taskDeleteSQL marks a terminal task deleted, once; it answers as
	// taskUpdateSQL does.
	taskDeleteSQL = `WITH deleted AS (
		UPDATE tasks SET deleted_at = $2
		WHERE id = $1 AND deleted_at IS NULL AND status IN ` + terminalStatuses + `
		RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM deleted), EXISTS (SELECT 1 FROM tasks WHERE id = $1)`

	// taskCallbackGoneSQL records a callback URL's 410, once; it answers
	// as taskUpdateSQL does.
	taskCallbackGoneSQL = `WITH marked AS (
		UPDATE tasks SET callback_gone_at = $2
		WHERE id = $1 AND callback_gone_at IS NULL
		RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM marked), EXISTS (SELECT 1 FROM tasks WHERE id = $1)`
)

// InTx runs fn in a transaction (READ COMMITTED, PostgreSQL's default) on
// a connection of the pool and commits it if fn returns nil; otherwise,
// or if fn panics, it rolls back. fn's error is returned as it is. The
// task service uses it to change a task and insert its River job
// atomically: pass tx to TaskUpdateTx and to River's InsertTx.
//
// Other connections serve the DB's own methods meanwhile: a read through
// them inside fn (TaskGet, KeyByID...) sees only what was committed, not
// fn's writes, and takes a second connection from the pool.
func (db *DB) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			// Rolled back even if ctx has ended: otherwise pgx closes the
			// connection, which rolls back too but costs a new one.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	committed = true
	return nil
}

// TaskCreate stores a new task and sets t.Seq. If t's key already holds a
// task with t.IdempotencyKey, nothing is stored: the stored task is copied
// into *t and created is false. Of concurrent submissions with the same
// key and idempotency key, from this process or any other on the
// database, exactly one creates the task and the others get it (see
// taskInsertSQL). The caller decides what a repeated submission with a
// different body means.
//
// The insert is one statement, sent with the concurrent callers' writes
// (batch.go) and committed with them: a create returns once its task is
// committed.
//
// ID, KeyID, Kind, Model, a known Status and CreatedAt are required
// (weir.ErrInvalid); so is an existing key. A taken ID is weir.ErrConflict.
func (db *DB) TaskCreate(ctx context.Context, t *weir.Task) (created bool, err error) {
	if err := t.ValidateNew(); err != nil {
		return false, fmt.Errorf("create task %q: %w", t.ID, err)
	}
	// t changes only once the insert has committed.
	c := *t
	created, err = db.taskCreate(ctx, &c)
	if err != nil {
		return false, fmt.Errorf("create task %s: %w", t.ID, err)
	}
	*t = c
	return created, nil
}

// createTries bounds taskCreate's rounds: a second round is needed only
// when the task holding the idempotency key was purged between the insert
// and the lookup, which a retention of days makes all but impossible.
const createTries = 3

// taskCreate is TaskCreate's work on a validated task: it sets t.Seq, or
// replaces *t with the task stored under its idempotency key.
func (db *DB) taskCreate(ctx context.Context, t *weir.Task) (created bool, err error) {
	for range createTries {
		var seq int64
		err = db.writes.exec(ctx, taskInsertSQL, []any{
			t.ID, t.KeyID, t.Kind, t.Model, bytea(t.Input), t.Priority, string(t.Status),
			t.PlatformModel, int64(t.Candidate), int64(t.Progress), t.UpstreamID, nullBytes(t.Result),
			t.ErrorCode, t.ErrorMessage, t.CallbackURL, nullString(t.IdempotencyKey), int64(t.Attempts),
			dbTime(t.CreatedAt), nullTime(t.AdmittedAt), nullTime(t.FinishedAt), nullTime(t.Deadline),
			nullString(t.Fingerprint), eventsColumn(t.CallbackEvents), string(t.RunMode), t.RunID, t.TraceParent,
			t.UpstreamSite,
		}, func(row pgx.Row) error { return row.Scan(&seq) })
		switch {
		case err == nil:
			t.Seq = seq
			return true, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return false, classify(err)
		}
		// Only the idempotency constraint is DO NOTHING: the task is
		// there, committed (the insert waited for it, or its own batch
		// inserted it and has committed), and this statement sees it.
		stored, err := scanTask(db.pool.QueryRow(ctx, taskByIdempotencySQL, t.KeyID, t.IdempotencyKey))
		if errors.Is(err, weir.ErrNotFound) {
			continue // purged meanwhile: the key is free again
		}
		if err != nil {
			return false, fmt.Errorf("load the task of idempotency key %q: %w", t.IdempotencyKey, err)
		}
		*t = stored
		return false, nil
	}
	return false, fmt.Errorf("idempotency key %q: its task kept disappearing", t.IdempotencyKey)
}

// eventsColumn is the callback_events column of events: NULL for none.
func eventsColumn(events []weir.TaskEvent) []string {
	if len(events) == 0 {
		return nil
	}
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e)
	}
	return out
}

// TaskByIdempotencyKey finds the task keyID's idempotency key stored.
func (db *DB) TaskByIdempotencyKey(ctx context.Context, keyID, idempotencyKey string) (weir.Task, error) {
	if idempotencyKey == "" {
		return weir.Task{}, fmt.Errorf("load the task of an empty idempotency key: %w", weir.ErrNotFound)
	}
	t, err := scanTask(db.pool.QueryRow(ctx, taskByIdempotencySQL, keyID, idempotencyKey))
	if err != nil {
		return weir.Task{}, fmt.Errorf("load the task of idempotency key %q: %w", idempotencyKey, err)
	}
	return t, nil
}

// TaskGet finds a task by ID; weir.ErrNotFound if there is none.
func (db *DB) TaskGet(ctx context.Context, id string) (weir.Task, error) {
	t, err := scanTask(db.pool.QueryRow(ctx, taskGetSQL, id))
	if err != nil {
		return weir.Task{}, fmt.Errorf("load task %s: %w", id, err)
	}
	return t, nil
}

// TaskGetMany returns the tasks of ids that are stored, deleted ones
// too, in no particular order, in one query: the fleet leader's ledger
// reads the tasks of many notices at once. An id not stored is left
// out.
func (db *DB) TaskGetMany(ctx context.Context, ids []string) ([]weir.Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.pool.Query(ctx, taskGetManySQL, ids)
	if err != nil {
		return nil, fmt.Errorf("load %d tasks: %w", len(ids), err)
	}
	defer rows.Close()
	out, err := rowscan.Append(make([]weir.Task, 0, len(ids)), rows, newTaskScanner().scan)
	if err != nil {
		return nil, fmt.Errorf("load %d tasks: %w", len(ids), err)
	}
	return out, nil
}

// taskGetManySQL is TaskGetMany's query.
const taskGetManySQL = `SELECT ` + taskColumns + ` FROM tasks WHERE id = ANY($1)`

// TaskList lists tasks in Seq order (newest first if f.Descending), never
// deleted ones: only f.KeyID's if set, only of f.Kind and f.Model if set, only those
// in f.Statuses if any, only Seq > f.AfterSeq and, if f.BeforeSeq is
// positive, Seq < f.BeforeSeq, and at most f.Limit if it is positive (0:
// no limit; negative, or an unknown status: weir.ErrInvalid).
//
// A listing of one status, or of one key, can read an index in Seq order
// (tasks_status_seq, tasks_key_seq, tasks_key_kind_seq), so that a page
// costs its own size.
func (db *DB) TaskList(ctx context.Context, f weir.TaskFilter) ([]weir.Task, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	q, args := taskListQuery(taskColumns, f)
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var out []weir.Task
	if f.Limit > 0 && f.Limit <= smallList {
		out = make([]weir.Task, 0, f.Limit)
	}
	if out, err = rowscan.Append(out, rows, newTaskScanner().scan); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// smallList is the largest TaskFilter.Limit for which TaskList allocates
// the whole result before reading it.
const smallList = 1000

// TaskStateList lists the tasks TaskList would list with f, in the same
// order, each as its Seq, id and status alone: the fleet leader's ledger
// polls every task that has not ended without reading their requests.
func (db *DB) TaskStateList(ctx context.Context, f weir.TaskFilter) ([]weir.TaskState, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list task states: %w", err)
	}
	q, args := taskListQuery(taskStateColumns, f)
	rows, err := db.pool.Query(ctx, q, args...)
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
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.AfterSeq > 0 {
		where = append(where, "seq > "+arg(f.AfterSeq))
	}
	if f.BeforeSeq > 0 {
		where = append(where, "seq < "+arg(f.BeforeSeq))
	}
	if f.KeyID != "" {
		where = append(where, "key_id = "+arg(f.KeyID))
	}
	if f.Kind != "" {
		where = append(where, "kind = "+arg(f.Kind))
	}
	if f.Model != "" {
		where = append(where, "model = "+arg(f.Model))
	}
	switch len(f.Statuses) {
	case 0:
	case 1:
		// An equality, which the planner matches to tasks_status_seq
		// surely; = ANY of one element it may not.
		where = append(where, "status = "+arg(string(f.Statuses[0])))
	default:
		statuses := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			statuses[i] = string(s)
		}
		where = append(where, "status = ANY ("+arg(statuses)+"::text[])")
	}
	order := ` ORDER BY seq`
	if f.Descending {
		order += ` DESC`
	}
	q := `SELECT ` + columns + ` FROM tasks WHERE ` + strings.Join(where, " AND ") + order
	if f.Limit > 0 {
		q += ` LIMIT ` + arg(f.Limit)
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
//
// Concurrent calls share round trips and commits (batch.go): the update
// commits with those sent in the same batch, and returns once they have.
func (db *DB) TaskUpdate(ctx context.Context, p *weir.TaskUpdateParams) (bool, error) {
	args, err := taskUpdateArgs(p)
	if err != nil {
		return false, err
	}
	var applied bool
	err = db.writes.exec(ctx, taskUpdateSQL, args, func(row pgx.Row) error {
		var err error
		applied, err = taskUpdateScan(p, row)
		return err
	})
	return applied, err
}

// TaskUpdateTx is TaskUpdate inside tx, which should come from InTx (or
// be another transaction on Pool()); it commits nothing itself.
func (db *DB) TaskUpdateTx(ctx context.Context, tx pgx.Tx, p *weir.TaskUpdateParams) (bool, error) {
	return taskUpdate(ctx, tx, p)
}

// querier is what a pool and a transaction have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func taskUpdate(ctx context.Context, q querier, p *weir.TaskUpdateParams) (bool, error) {
	args, err := taskUpdateArgs(p)
	if err != nil {
		return false, err
	}
	return taskUpdateScan(p, q.QueryRow(ctx, taskUpdateSQL, args...))
}

// taskUpdateArgs are taskUpdateSQL's arguments for p, once p is valid.
func taskUpdateArgs(p *weir.TaskUpdateParams) ([]any, error) {
	id, u := p.ID, p.Update
	from, err := validateTaskUpdate(u)
	if err != nil {
		return nil, fmt.Errorf("update task %s: %w", id, err)
	}
	return []any{id, from, string(u.Status),
		nullString(u.PlatformModel), nullInt(u.Candidate), nullInt(u.Progress), nullString(u.UpstreamID),
		nullBytes(u.Result), nullString(u.ErrorCode), nullString(u.ErrorMessage), nullInt(u.Attempts),
		nullTime(u.AdmittedAt), nullTime(u.FinishedAt), u.ClearUpstream, nullString(u.UpstreamSite),
	}, nil
}

// taskUpdateScan reads taskUpdateSQL's answer to p.
func taskUpdateScan(p *weir.TaskUpdateParams, row pgx.Row) (bool, error) {
	var applied, exists bool
	err := row.Scan(&applied, &exists)
	switch {
	case err != nil:
		return false, fmt.Errorf("update task %s to %s: %w", p.ID, p.Update.Status, classify(err))
	case !exists:
		return false, fmt.Errorf("update task %s: %w", p.ID, weir.ErrNotFound)
	}
	return applied, nil
}

// TaskUpdateManyTx is TaskUpdateTx for each of ps, in order, inside tx,
// sent to the server together (a pipeline: one round trip, not one a
// task): applied[i] is what TaskUpdateTx would say of ps[i]. The first
// update that fails is the error, and tx must then roll back: the server
// ran none after it.
func (db *DB) TaskUpdateManyTx(ctx context.Context, tx pgx.Tx, ps []weir.TaskUpdateParams) (applied []bool, err error) {
	if len(ps) == 0 {
		return nil, nil
	}
	b := &pgx.Batch{}
	for i := range ps {
		args, err := taskUpdateArgs(&ps[i])
		if err != nil {
			return nil, err
		}
		b.Queue(taskUpdateSQL, args...)
	}
	br := tx.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			applied, err = nil, fmt.Errorf("update %d tasks: %w", len(ps), classify(cerr))
		}
	}()
	applied = make([]bool, len(ps))
	for i := range ps {
		if applied[i], err = taskUpdateScan(&ps[i], br.QueryRow()); err != nil {
			return nil, err
		}
	}
	return applied, nil
}

// TaskUpdateManyFencedTx is TermFenceTx and then TaskUpdateManyTx, inside
// tx, sent to the server together: one round trip for the fence and the
// updates. held false says the term has passed: the server ran none of
// the updates, applied is nil, and tx must roll back. An error fails tx
// as TaskUpdateManyTx's does.
func (db *DB) TaskUpdateManyFencedTx(ctx context.Context, tx pgx.Tx, leader string, epoch uint64, ps []weir.TaskUpdateParams) (held bool, applied []bool, err error) {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return false, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(fenceOrFailSQL, e, leader)
	for i := range ps {
		args, err := taskUpdateArgs(&ps[i])
		if err != nil {
			return false, nil, err
		}
		b.Queue(taskUpdateSQL, args...)
	}
	br := tx.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && held && cerr != nil {
			held, applied, err = false, nil, fmt.Errorf("update %d tasks: %w", len(ps), classify(cerr))
		}
	}()
	var one int
	if err := br.QueryRow().Scan(&one); err != nil {
		if termPassed(err) {
			return false, nil, nil
		}
		return false, nil, fmt.Errorf("fence epoch %d: %w", epoch, err)
	}
	applied = make([]bool, len(ps))
	for i := range ps {
		if applied[i], err = taskUpdateScan(&ps[i], br.QueryRow()); err != nil {
			return true, nil, err
		}
	}
	return true, applied, nil
}

// TaskDelete marks terminal task p.ID deleted at p.At and reports
// whether it did: false with a nil error means the task is not terminal
// or was already deleted. A task that is not there is weir.ErrNotFound; a
// zero p.At is weir.ErrInvalid.
func (db *DB) TaskDelete(ctx context.Context, p *weir.TaskDeleteParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("delete task %s: %w", p.ID, err)
	}
	deleted, err := db.markOnce(ctx, taskDeleteSQL, p.ID, p.At)
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
func (db *DB) TaskCallbackGone(ctx context.Context, p *weir.TaskCallbackGoneParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("mark the callback of task %s gone: %w", p.ID, err)
	}
	marked, err := db.markOnce(ctx, taskCallbackGoneSQL, p.ID, p.At)
	if err != nil {
		return false, fmt.Errorf("mark the callback of task %s gone: %w", p.ID, err)
	}
	return marked, nil
}

// markOnce runs taskDeleteSQL or taskCallbackGoneSQL.
func (db *DB) markOnce(ctx context.Context, sql, id string, at time.Time) (bool, error) {
	var marked, exists bool
	if err := db.pool.QueryRow(ctx, sql, id, dbTime(at)).Scan(&marked, &exists); err != nil {
		return false, classify(err)
	}
	if !exists {
		return false, weir.ErrNotFound
	}
	return marked, nil
}

// validateTaskUpdate checks u and returns u.From as the text array the
// update statement takes.
func validateTaskUpdate(u weir.TaskUpdate) ([]string, error) {
	if err := u.Validate(); err != nil {
		return nil, err
	}
	from := make([]string, len(u.From))
	for i, s := range u.From {
		from[i] = string(s)
	}
	return from, nil
}

// scanTask reads one row of taskColumns; no row is weir.ErrNotFound.
func scanTask(row rowscan.Row) (weir.Task, error) {
	return newTaskScanner().scan(row)
}

// taskScanner reads rows of taskColumns, holding Scan's destinations so
// that a listing reuses them rather than allocate them for every row.
type taskScanner struct {
	t                                           weir.Task
	candidate, progress, attempts               int64
	status                                      string
	idem, fingerprint                           *string
	admitted, finished, deadline, deleted, gone *time.Time
	events                                      []string
	runMode                                     string
	dest                                        []any
}

func newTaskScanner() *taskScanner {
	s := &taskScanner{}
	t := &s.t
	s.dest = []any{&t.Seq, &t.ID, &t.KeyID, &t.Kind, &t.Model, &t.Input, &t.Priority, &s.status,
		&t.PlatformModel, &s.candidate, &s.progress, &t.UpstreamID, &t.Result, &t.ErrorCode, &t.ErrorMessage,
		&t.CallbackURL, &s.idem, &s.attempts, &t.CreatedAt, &s.admitted, &s.finished, &s.deadline,
		&s.fingerprint, &s.deleted, &s.events, &s.gone, &s.runMode, &t.RunID, &t.TraceParent,
		&t.UpstreamSite}
	return s
}

func (s *taskScanner) scan(row rowscan.Row) (weir.Task, error) {
	// Fresh slices for every row, so that no two tasks share one.
	s.t.Input, s.t.Result, s.events = nil, nil, nil
	err := row.Scan(s.dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return weir.Task{}, weir.ErrNotFound
	}
	if err != nil {
		return weir.Task{}, err
	}
	t := s.t
	t.Status = weir.TaskStatus(s.status)
	t.Candidate, t.Progress, t.Attempts = int(s.candidate), int(s.progress), int(s.attempts)
	t.IdempotencyKey, t.Fingerprint = deref(s.idem), deref(s.fingerprint)
	if len(t.Input) == 0 {
		t.Input = nil
	}
	if len(t.Result) == 0 {
		t.Result = nil
	}
	t.CallbackEvents = nil
	for _, e := range s.events {
		t.CallbackEvents = append(t.CallbackEvents, weir.TaskEvent(e))
	}
	t.CreatedAt = t.CreatedAt.UTC()
	t.AdmittedAt, t.FinishedAt, t.Deadline = fromNullTime(s.admitted), fromNullTime(s.finished), fromNullTime(s.deadline)
	t.DeletedAt, t.CallbackGoneAt = fromNullTime(s.deleted), fromNullTime(s.gone)
	t.RunMode = weir.RunMode(s.runMode)
	return t, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// The arguments of optional columns: NULL for a zero value, which the
// insert stores as NULL and the update reads as "leave it".

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullInt(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func nullBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// bytea is b for a NOT NULL bytea column: pgx sends a nil slice as NULL.
func bytea(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
