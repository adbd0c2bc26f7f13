package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

const usageColumns = `request_id, key_id, model, platform_model, endpoint,
	prompt_tokens, completion_tokens, waited_ns, latency_ns, status, outcome, at,
	group_name, cached_tokens, cost, cost_estimated, end_user, handoff`

// usageInsertSQL inserts a whole batch in one statement, one array
// parameter per column: a batch is one round trip and one plan, whatever
// its size. Rows are inserted in the batch's order (ord), so that seq
// follows it and, of copies of one request within the batch, the first is
// kept.
const usageInsertSQL = `INSERT INTO usage_records (` + usageColumns + `)
	SELECT request_id, key_id, model, platform_model, endpoint,
		prompt_tokens, completion_tokens, waited_ns, latency_ns, status, outcome, at,
		group_name, cached_tokens, cost, cost_estimated, end_user, handoff
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
		$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::timestamptz[],
		$13::text[], $14::bigint[], $15::bigint[], $16::boolean[], $17::text[], $18::text[])
		WITH ORDINALITY AS r(request_id, key_id, model, platform_model, endpoint,
			prompt_tokens, completion_tokens, waited_ns, latency_ns, status, outcome, at,
			group_name, cached_tokens, cost, cost_estimated, end_user, handoff, ord)
	ORDER BY ord
	ON CONFLICT (request_id) DO NOTHING`

// UsageInsert records a batch in one transaction: all of it or nothing.
// A row whose RequestID is already stored (or earlier in the batch) is
// skipped, so a flush retried after an unknown outcome counts once. The
// transaction first deletes the batch's reservations from the spend
// journal (reservationSettleSQL): a usage record settles its request's
// reservation.
func (db *DB) UsageInsert(ctx context.Context, batch []weir.Usage) error {
	if len(batch) == 0 {
		return nil
	}
	for i, u := range batch {
		if err := u.Validate(); err != nil {
			return fmt.Errorf("insert usage: row %d (request %q): %w", i, u.RequestID, err)
		}
	}
	n := len(batch)
	var (
		requestIDs, keyIDs, models, pms, endpoints, outcomes, groups = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prompt, completion, waited, latency, status, cached, cost = make([]int64, n), make([]int64, n),
			make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		at        = make([]time.Time, n)
		estimated = make([]bool, n)
		endUsers  = make([]string, n)
		handoffs  = make([]string, n)
	)
	for i, u := range batch {
		requestIDs[i], keyIDs[i], models[i], pms[i], endpoints[i], outcomes[i], groups[i] =
			u.RequestID, u.KeyID, u.Model, u.PlatformModel, u.Endpoint, u.Outcome, u.Group
		prompt[i], completion[i], waited[i], latency[i], status[i], cached[i], cost[i] =
			u.PromptTokens, u.CompletionTokens, int64(u.Waited), int64(u.Latency), int64(u.Status), u.CachedTokens, int64(u.Cost)
		at[i], estimated[i], endUsers[i], handoffs[i] = dbTime(u.At), u.CostEstimated, u.EndUser, u.Handoff
	}
	err := db.InTx(ctx, func(tx pgx.Tx) error {
		if err := settleTx(ctx, tx, requestIDs); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, usageInsertSQL, requestIDs, keyIDs, models, pms, endpoints,
			prompt, completion, waited, latency, status, outcomes, at, groups, cached, cost, estimated, endUsers, handoffs)
		return classify(err)
	})
	if err != nil {
		u := batch[0]
		return fmt.Errorf("insert usage: %d rows (from request %s, key %s): %w", n, u.RequestID, u.KeyID, err)
	}
	return nil
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
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.KeyID != "" {
		where = append(where, "key_id = "+arg(f.KeyID))
	}
	if !f.Since.IsZero() {
		where = append(where, "at >= "+arg(dbTime(f.Since)))
	}
	q := `SELECT ` + usageColumns + ` FROM usage_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY at DESC, seq DESC`
	if f.Limit > 0 {
		q += ` LIMIT ` + arg(f.Limit)
	}
	return listAll(ctx, db, "usage", q, scanUsage, args...)
}

// scanUsage reads one row of usageColumns.
func scanUsage(row rowscan.Row) (weir.Usage, error) {
	var (
		u                             weir.Usage
		waited, latency, status, cost int64
	)
	if err := row.Scan(&u.RequestID, &u.KeyID, &u.Model, &u.PlatformModel, &u.Endpoint,
		&u.PromptTokens, &u.CompletionTokens, &waited, &latency, &status, &u.Outcome, &u.At,
		&u.Group, &u.CachedTokens, &cost, &u.CostEstimated, &u.EndUser, &u.Handoff); err != nil {
		return weir.Usage{}, err
	}
	u.Waited, u.Latency, u.Status, u.At = time.Duration(waited), time.Duration(latency), int(status), u.At.UTC()
	u.Cost = weir.Money(cost)
	return u, nil
}

// UsageByKey sums the usage recorded since since, by key, in key id
// order, over the index on (at, seq).
func (db *DB) UsageByKey(ctx context.Context, since time.Time) ([]weir.KeyUsage, error) {
	return listAll(ctx, db, "usage by key", `SELECT key_id, count(*), count(*) FILTER (WHERE outcome <> 'ok'),
		coalesce(sum(prompt_tokens + completion_tokens), 0)::bigint, max(at)
		FROM usage_records WHERE at >= $1 GROUP BY key_id ORDER BY key_id`, scanKeyUsage, since)
}

func scanKeyUsage(row rowscan.Row) (weir.KeyUsage, error) {
	var u weir.KeyUsage
	err := row.Scan(&u.KeyID, &u.Requests, &u.Failed, &u.Tokens, &u.Last)
	u.Last = u.Last.UTC()
	return u, err
}
