package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

const usageColumns = `request_id, key_id, model, platform_model, endpoint,
	prompt_tokens, completion_tokens, waited_ns, latency_ns, status, outcome, at,
	group_name, cached_tokens, cost, cost_estimated, end_user, handoff`

// usageColumnCount is how many columns usageColumns names.
const usageColumnCount = 18

// usageRowsPerInsert is the most rows one INSERT statement carries. One
// statement per row spent most of a row's cost outside SQLite (database/sql
// and the driver, per statement: argument conversion, a goroutine watching
// the context); 32 rows a statement cut it by more than half
// (BenchmarkUsageInsert) with 576 parameters, far under SQLite's limit.
const usageRowsPerInsert = 1 << insertSizes

// insertSizes is how many smaller statements there are besides the
// largest: the inserts are prepared for 1, 2, 4, ... usageRowsPerInsert
// rows, so that the rest of a batch past its last full statement takes
// one statement for each bit of its length rather than one per row.
const insertSizes = 5

// insertStmts are the prepared inserts of one table, stmts[k] of 1<<k
// rows.
type insertStmts [insertSizes + 1]*sql.Stmt

// inTx returns, for tx, the statement of s of 1<<k rows, made once per
// transaction in made: Tx.StmtContext allocates each time.
func (s *insertStmts) inTx(ctx context.Context, tx *sql.Tx, made *insertStmts, k int) *sql.Stmt {
	if made[k] == nil {
		made[k] = tx.StmtContext(ctx, s[k])
	}
	return made[k]
}

// eachChunk calls fn for consecutive runs of n rows, each the largest
// that one of the prepared statements carries, k being its index in
// insertStmts; it stops at fn's first error.
func eachChunk(n int, fn func(start, rows, k int) error) error {
	for start := 0; start < n; {
		k := min(bits.Len(uint(n-start))-1, insertSizes)
		if err := fn(start, 1<<k, k); err != nil {
			return err
		}
		start += 1 << k
	}
	return nil
}

// usageInsertSQL inserts rows rows; it is prepared for each size of
// insertStmts. The group, end user and handoff of most rows are empty,
// which a row passes as NULL (orNull): the driver binds NULL without
// the copy into C memory that it makes of any text, the larger part of
// what binding a text costs.
func usageInsertSQL(rows int) string {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?, ''), ?, ?, ?, coalesce(?, ''), coalesce(?, ''))`
	var b strings.Builder
	b.WriteString(`INSERT INTO usage_records (` + usageColumns + `) VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(` ON CONFLICT (request_id) DO NOTHING`)
	return b.String()
}

// UsageInsert records a batch in one transaction: all of it or nothing.
// A row whose RequestID is already stored (or earlier in the batch) is
// skipped, so a flush retried after an unknown outcome counts once. The
// same transaction deletes the batch's reservations from the spend
// journal: a usage record settles its request's reservation.
func (db *DB) UsageInsert(ctx context.Context, batch []weir.Usage) (err error) {
	if len(batch) == 0 {
		return nil
	}
	for i, u := range batch {
		if err := u.Validate(); err != nil {
			return fmt.Errorf("insert usage: row %d (request %q): %w", i, u.RequestID, err)
		}
	}
	err = db.InTx(ctx, func(tx *sql.Tx) error {
		args := make([]any, 0, usageColumnCount*usageRowsPerInsert)
		var (
			shared sharedArgs
			times  timeTexts
			stmts  insertStmts
		)
		err := eachChunk(len(batch), func(start, rows, k int) error {
			args = args[:0]
			times.reset()
			for _, u := range batch[start : start+rows] {
				times.add(u.At)
			}
			times.done()
			for i, u := range batch[start : start+rows] {
				args = append(args, u.RequestID, shared.arg(0, u.KeyID), shared.arg(1, u.Model),
					shared.arg(2, u.PlatformModel), shared.arg(3, u.Endpoint),
					u.PromptTokens, u.CompletionTokens, int64(u.Waited), int64(u.Latency),
					int64(u.Status), shared.arg(4, u.Outcome), times.text(i),
					shared.argOrNull(5, u.Group), u.CachedTokens, int64(u.Cost), u.CostEstimated,
					shared.argOrNull(6, u.EndUser), orNull(u.Handoff))
			}
			if _, err := db.usageInsert.inTx(ctx, tx, &stmts, k).ExecContext(ctx, args...); err != nil {
				u := batch[start]
				return fmt.Errorf("rows %d-%d (from request %s, key %s): %w",
					start, start+rows-1, u.RequestID, u.KeyID, classify(err))
			}
			return nil
		})
		if err != nil {
			return err
		}
		return db.settleTx(ctx, tx, batch)
	})
	if err != nil {
		return fmt.Errorf("insert usage: %w", err)
	}
	return nil
}

// sharedArgs hold the arguments of a batch's columns that its rows
// mostly share (key, model, platform model, endpoint, outcome, group,
// end user), so that a row with the same value as the row before passes
// the same argument: a string made an argument is a copy on the heap.
type sharedArgs [7]any

// arg is s as the argument of column i.
func (a *sharedArgs) arg(i int, s string) any {
	if p, ok := a[i].(string); !ok || p != s {
		a[i] = s
	}
	return a[i]
}

// argOrNull is arg(i, s), or nil for an empty s: a column that
// usageInsertSQL writes as coalesce(?, the empty text).
func (a *sharedArgs) argOrNull(i int, s string) any {
	if s == "" {
		return nil
	}
	return a.arg(i, s)
}

// orNull is s, or nil if it is empty, for a column that usageInsertSQL
// writes as coalesce(?, the empty text).
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// timeTexts are the times of a statement's rows as formatTime writes
// them, made one string of which each row's is a part: one allocation
// for them all.
type timeTexts struct {
	buf  []byte
	ends []int
	all  string
}

func (t *timeTexts) reset() { t.buf, t.ends = t.buf[:0], t.ends[:0] }

// add writes the next row's time.
func (t *timeTexts) add(at time.Time) {
	t.buf = appendTime(t.buf, at)
	t.ends = append(t.ends, len(t.buf))
}

// done makes the string once every row's time is added.
func (t *timeTexts) done() { t.all = string(t.buf) }

// text is row i's time.
func (t *timeTexts) text(i int) string {
	start := 0
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.all[start:t.ends[i]]
}

// usageListSQL is the query of UsageList and its arguments.
func usageListSQL(f weir.UsageFilter) (string, []any) {
	var (
		where []string
		args  []any
	)
	if f.KeyID != "" {
		where, args = append(where, "key_id = ?"), append(args, f.KeyID)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, formatTime(f.Since))
	}
	q := `SELECT ` + usageColumns + ` FROM usage_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY at DESC, seq DESC`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	return q, args
}

// UsageList returns usage newest first, filtered by key and time, at most
// f.Limit records if it is positive.
func (db *DB) UsageList(ctx context.Context, f weir.UsageFilter) ([]weir.Usage, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	q, args := usageListSQL(f)
	return listAll(ctx, db, "usage", q, scanUsage, args...)
}

// scanUsage reads one row of usageColumns.
func scanUsage(row rowscan.Row) (weir.Usage, error) {
	var (
		u               weir.Usage
		waited, latency int64
		status, cost    int64
		at              string
	)
	if err := row.Scan(&u.RequestID, &u.KeyID, &u.Model, &u.PlatformModel, &u.Endpoint,
		&u.PromptTokens, &u.CompletionTokens, &waited, &latency, &status, &u.Outcome, &at,
		&u.Group, &u.CachedTokens, &cost, &u.CostEstimated, &u.EndUser, &u.Handoff); err != nil {
		return weir.Usage{}, err
	}
	u.Waited, u.Latency, u.Status, u.Cost = time.Duration(waited), time.Duration(latency), int(status), weir.Money(cost)
	var err error
	if u.At, err = parseTime(at); err != nil {
		return weir.Usage{}, fmt.Errorf("request %s: %w", u.RequestID, err)
	}
	return u, nil
}

// UsageByKey sums the usage recorded since since, by key, in key id
// order, over the index on (at, seq).
func (db *DB) UsageByKey(ctx context.Context, since time.Time) ([]weir.KeyUsage, error) {
	return listAll(ctx, db, "usage by key", usageByKeySQL, scanKeyUsage, formatTime(since))
}

// usageByKeySQL sums usage at ?1 or later by key. Without INDEXED BY,
// SQLite reads the whole of usage_records_key_at to have the keys in
// order, every row of every key ever, rather than the window's rows and
// sort them.
const usageByKeySQL = `SELECT key_id, count(*), sum(outcome <> 'ok'),
	sum(prompt_tokens + completion_tokens), max(at)
	FROM usage_records INDEXED BY usage_records_at WHERE at >= ? GROUP BY key_id ORDER BY key_id`

func scanKeyUsage(row rowscan.Row) (weir.KeyUsage, error) {
	var (
		u    weir.KeyUsage
		last string
	)
	if err := row.Scan(&u.KeyID, &u.Requests, &u.Failed, &u.Tokens, &last); err != nil {
		return u, err
	}
	var err error
	if u.Last, err = parseTime(last); err != nil {
		return u, fmt.Errorf("key %s: %w", u.KeyID, err)
	}
	return u, nil
}
