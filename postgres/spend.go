package postgres

import (
	"context"
	"fmt"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

var _ weir.SpendStore = (*DB)(nil)

// spendColumns are the usage_records column of each subject type.
var spendColumns = map[string]string{"key": "key_id", "group": "group_name", "model": "model", "platform_model": "platform_model", "user": "end_user"}

// costSum sums cost as numeric, which does not overflow, and saturates
// at the largest Money.
const costSum = `least(coalesce(sum(cost), 0), 9223372036854775807)::bigint`

// SpendSum is the cost of f.Subject's usage in [f.From, f.Until), over
// the index on its column and at.
func (db *DB) SpendSum(ctx context.Context, f weir.SpendFilter) (weir.Money, error) {
	if err := f.Validate(); err != nil {
		return 0, fmt.Errorf("sum spend: %w", err)
	}
	var cost int64
	err := db.pool.QueryRow(ctx, `SELECT `+costSum+` FROM usage_records
		WHERE `+spendColumns[f.Subject.Type]+` = $1 AND at >= $2 AND at < $3`,
		f.Subject.Name, dbTime(f.From), dbTime(f.Until)).Scan(&cost)
	if err != nil {
		return 0, fmt.Errorf("sum spend of %s %s: %w", f.Subject.Type, f.Subject.Name, classify(err))
	}
	return weir.Money(cost), nil
}

// endUserNamed leaves out of a report by end user the requests that
// named none.
func endUserNamed(by string) string {
	if by == "user" {
		return ` AND end_user <> ''`
	}
	return ""
}

// SpendReport sums usage in [f.From, f.Until) by subject and bucket (of
// UTC time), by bucket then subject in byte order.
func (db *DB) SpendReport(ctx context.Context, f weir.SpendReportFilter) ([]weir.SpendRow, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("report spend: %w", err)
	}
	bucket := `$1::timestamptz`
	if f.Bucket != "" {
		bucket = `date_trunc('` + f.Bucket + `', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`
	}
	col := spendColumns[f.By]
	q := `SELECT ` + col + `, ` + bucket + `, count(*),
		least(coalesce(sum(prompt_tokens::numeric + completion_tokens), 0), 9223372036854775807)::bigint,
		` + costSum + `, count(*) FILTER (WHERE cost_estimated)
		FROM usage_records WHERE at >= $1 AND at < $2` + endUserNamed(f.By) + ` GROUP BY 1, 2 ORDER BY 2, ` + col + ` COLLATE "C"`
	return listAll(ctx, db, "spend", q, func(row rowscan.Row) (weir.SpendRow, error) {
		var (
			r    weir.SpendRow
			cost int64
		)
		err := row.Scan(&r.Subject, &r.Bucket, &r.Requests, &r.Tokens, &cost, &r.Estimated)
		r.Cost, r.Bucket = weir.Money(cost), r.Bucket.UTC()
		return r, err
	}, dbTime(f.From), dbTime(f.Until))
}
