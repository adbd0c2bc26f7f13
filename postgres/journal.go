package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
)

// reservationInsertSQL journals a whole batch in one statement, one array
// parameter per column, skipping the reservations whose request is
// journaled already (or earlier in the batch: the first is kept) or has a
// usage record.
const reservationInsertSQL = `INSERT INTO spend_reservations
		(request_id, key_id, group_name, model, platform_model, estimate, at, end_user)
	SELECT request_id, key_id, group_name, model, platform_model, estimate, at, end_user
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::timestamptz[], $8::text[])
		WITH ORDINALITY AS r(request_id, key_id, group_name, model, platform_model, estimate, at, end_user, ord)
	WHERE NOT EXISTS (SELECT 1 FROM usage_records u WHERE u.request_id = r.request_id)
	ORDER BY ord
	ON CONFLICT (request_id) DO NOTHING`

// SpendReserve journals a batch in one statement: all of it or nothing.
// A reservation whose request is journaled already (or earlier in the
// batch), or has a usage record, is skipped: the first is kept, and a
// request already ended needs none.
func (db *DB) SpendReserve(ctx context.Context, batch []weir.Reservation) error {
	if len(batch) == 0 {
		return nil
	}
	for i, r := range batch {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("journal reservations: row %d (request %q): %w", i, r.RequestID, err)
		}
	}
	n := len(batch)
	var (
		requestIDs, keyIDs, groups, models, pms = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n)
		estimates = make([]int64, n)
		at        = make([]time.Time, n)
		endUsers  = make([]string, n)
	)
	for i, r := range batch {
		requestIDs[i], keyIDs[i], groups[i], models[i], pms[i] = r.RequestID, r.KeyID, r.Group, r.Model, r.PlatformModel
		estimates[i], at[i], endUsers[i] = int64(r.Estimate), dbTime(r.At), r.EndUser
	}
	if _, err := db.pool.Exec(ctx, reservationInsertSQL, requestIDs, keyIDs, groups, models, pms, estimates, at, endUsers); err != nil {
		r := batch[0]
		return fmt.Errorf("journal reservations: %d rows (from request %s, key %s): %w", n, r.RequestID, r.KeyID, classify(err))
	}
	return nil
}

// reservationSettleSQL deletes the reservations of a batch of usage. It
// runs before the batch's insert, in its transaction: both this and
// SpendRecover lock a reservation before they write its usage record,
// so neither waits for the other while holding what the other wants.
const reservationSettleSQL = `DELETE FROM spend_reservations WHERE request_id = ANY($1::text[])`

// spendRecoverSQL counts, in one statement, up to $2 reservations made
// before $1, oldest first: it deletes them and records each as an
// interrupted request that cost its estimate, unless its request has a
// usage record already, and returns how many it deleted. SKIP LOCKED
// leaves to another replica's recovery the rows it has taken, and to a
// flush the rows its usage insert is settling. The insert reads the
// deletion's rows, so the deletion (and its locks) comes first.
const spendRecoverSQL = `WITH picked AS (
		SELECT request_id FROM spend_reservations WHERE at < $1
		ORDER BY at, request_id LIMIT $2
		FOR UPDATE SKIP LOCKED
	), gone AS (
		DELETE FROM spend_reservations s USING picked p WHERE s.request_id = p.request_id
		RETURNING s.request_id, s.key_id, s.group_name, s.model, s.platform_model, s.estimate, s.at, s.end_user
	), counted AS (
		INSERT INTO usage_records (` + usageColumns + `)
		SELECT request_id, key_id, model, platform_model, '', 0, 0, 0, 0, 0, $3, at,
			group_name, 0, estimate, true, end_user, ''
		FROM gone ORDER BY at, request_id
		ON CONFLICT (request_id) DO NOTHING
	)
	SELECT count(*) FROM gone`

// SpendRecover records up to p.Limit reservations made before p.Before,
// oldest first, as interrupted requests that cost their estimate (a
// request's usage record already stored wins), deletes them, and returns
// how many it deleted: one statement. Replicas may recover at once: each
// reservation is counted by one of them.
func (db *DB) SpendRecover(ctx context.Context, p *weir.SpendRecoverParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("recover reservations: %w", err)
	}
	var n int64
	if err := db.pool.QueryRow(ctx, spendRecoverSQL, dbTime(p.Before), p.Limit, weir.OutcomeInterrupted).Scan(&n); err != nil {
		return 0, fmt.Errorf("recover reservations: %w", classify(err))
	}
	return int(n), nil
}

// settleTx deletes, in tx, the reservations of the requests in
// requestIDs: their usage records settle them.
func settleTx(ctx context.Context, tx pgx.Tx, requestIDs []string) error {
	if _, err := tx.Exec(ctx, reservationSettleSQL, requestIDs); err != nil {
		return fmt.Errorf("settle reservations: %w", classify(err))
	}
	return nil
}
