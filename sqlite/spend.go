package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

var _ weir.SpendStore = (*DB)(nil)

// spendColumns are the usage_records column of each subject type.
var spendColumns = map[string]string{"key": "key_id", "group": "group_name", "model": "model", "platform_model": "platform_model", "user": "end_user"}

// spendBuckets start each bucket of the text times (timeLayout) as a
// time of the same layout: SQLite has no date_trunc. A week's starts on
// the Monday on or before its day.
var spendBuckets = map[string]string{
	"":      `''`,
	"hour":  `substr(at, 1, 13) || ':00:00.000000Z'`,
	"day":   `substr(at, 1, 10) || 'T00:00:00.000000Z'`,
	"week":  `date(substr(at, 1, 10), '-6 days', 'weekday 1') || 'T00:00:00.000000Z'`,
	"month": `substr(at, 1, 7) || '-01T00:00:00.000000Z'`,
}

// costSums sums cost as whole units and billionths apart, so that no sum
// overflows SQLite's integers (which fails the query) however many
// saturated costs it adds; joinCost adds them up, saturating.
const costSums = `coalesce(sum(cost / 1000000000), 0), coalesce(sum(cost % 1000000000), 0)`

func joinCost(units, billionths int64) weir.Money {
	return weir.Money(billionths).Add(weir.MoneyScale.MulDiv(units, 1))
}

// spendSumSQL sums the cost of a subject of type typ (?1) in [?2, ?3).
// The indexes by group and by end user hold only the rows that name one
// (migration 00019): the query says so, for SQLite to use them; a
// subject's name is never ”.
func spendSumSQL(typ string) string {
	col := spendColumns[typ]
	q := `SELECT ` + costSums + ` FROM usage_records WHERE ` + col + ` = ? AND at >= ? AND at < ?`
	if typ == "group" || typ == "user" {
		q += ` AND ` + col + ` <> ''`
	}
	return q
}

// SpendSum is the cost of f.Subject's usage in [f.From, f.Until), over
// the index on its column and at.
func (db *DB) SpendSum(ctx context.Context, f weir.SpendFilter) (weir.Money, error) {
	if err := f.Validate(); err != nil {
		return 0, fmt.Errorf("sum spend: %w", err)
	}
	var units, billionths int64
	err := db.read.QueryRowContext(ctx, spendSumSQL(f.Subject.Type),
		f.Subject.Name, formatTime(f.From), formatTime(f.Until)).Scan(&units, &billionths)
	if err != nil {
		return 0, fmt.Errorf("sum spend of %s %s: %w", f.Subject.Type, f.Subject.Name, err)
	}
	return joinCost(units, billionths), nil
}

// endUserNamed leaves out of a report by end user the requests that
// named none.
func endUserNamed(by string) string {
	if by == "user" {
		return ` AND end_user <> ''`
	}
	return ""
}

// spendReportSQL sums usage in [?1, ?2) by subject type by and bucket.
func spendReportSQL(by, bucket string) string {
	return `SELECT ` + spendColumns[by] + `, ` + spendBuckets[bucket] + `, count(*),
		coalesce(sum(prompt_tokens + completion_tokens), 0), ` + costSums + `, coalesce(sum(cost_estimated), 0)
		FROM usage_records WHERE at >= ? AND at < ?` + endUserNamed(by) + ` GROUP BY 1, 2 ORDER BY 2, 1`
}

// SpendReport sums usage in [f.From, f.Until) by subject and bucket, by
// bucket then subject in byte order.
func (db *DB) SpendReport(ctx context.Context, f weir.SpendReportFilter) ([]weir.SpendRow, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("report spend: %w", err)
	}
	return listAll(ctx, db, "spend", spendReportSQL(f.By, f.Bucket), func(row rowscan.Row) (weir.SpendRow, error) {
		var (
			r                 weir.SpendRow
			bucket            string
			units, billionths int64
		)
		if err := row.Scan(&r.Subject, &bucket, &r.Requests, &r.Tokens, &units, &billionths, &r.Estimated); err != nil {
			return r, err
		}
		r.Cost, r.Bucket = joinCost(units, billionths), f.From.UTC().Truncate(time.Microsecond)
		if bucket != "" {
			var err error
			if r.Bucket, err = parseTime(bucket); err != nil {
				return r, err
			}
		}
		return r, nil
	}, formatTime(f.From), formatTime(f.Until))
}
