package sqlite

import (
	"context"
	"database/sql"
	"fmt"
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

// usageRowsPerInsert is how many rows one INSERT statement carries. One
// statement per row spent most of a row's cost outside SQLite (database/sql
// and the driver, per statement: argument conversion, a goroutine watching
// the context); 32 rows a statement cut it by more than half
// (BenchmarkUsageInsert) with 512 parameters, far under SQLite's limit.
const usageRowsPerInsert = 32

// usageInsertSQL inserts rows rows; usageInsertSQL(usageRowsPerInsert) is
// prepared once, the rest of a batch uses usageInsertSQL(1).
func usageInsertSQL(rows int) string {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
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
		many, one := tx.StmtContext(ctx, db.usageInsertMany), tx.StmtContext(ctx, db.usageInsertOne)
		args := make([]any, 0, usageColumnCount*usageRowsPerInsert)
		var (
			shared sharedArgs
			times  timeTexts
		)
		for start := 0; start < len(batch); {
			rows, stmt := usageRowsPerInsert, many
			if len(batch)-start < usageRowsPerInsert {
				rows, stmt = 1, one
			}
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
					shared.arg(5, u.Group), u.CachedTokens, int64(u.Cost), u.CostEstimated, shared.arg(6, u.EndUser), u.Handoff)
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				u := batch[start]
				return fmt.Errorf("rows %d-%d (from request %s, key %s): %w",
					start, start+rows-1, u.RequestID, u.KeyID, classify(err))
			}
			start += rows
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
	t.buf = at.UTC().Truncate(time.Microsecond).AppendFormat(t.buf, timeLayout)
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

// UsageList returns usage newest first, filtered by key and time, at most
// f.Limit records if it is positive.
func (db *DB) UsageList(ctx context.Context, f weir.UsageFilter) ([]weir.Usage, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
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
	return listAll(ctx, db, "usage by key", `SELECT key_id, count(*), sum(outcome <> 'ok'),
		sum(prompt_tokens + completion_tokens), max(at)
		FROM usage_records WHERE at >= ? GROUP BY key_id ORDER BY key_id`, scanKeyUsage, formatTime(since))
}

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
