package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/fastjson"
)

// reservationColumnCount is how many columns a reservation row has.
const reservationColumnCount = 8

// reservationInsertSQL journals rows reservations, skipping those whose
// request is journaled or recorded already; it is prepared for each size
// of insertStmts. SQLite names the columns of
// VALUES column1, column2, ...
func reservationInsertSQL(rows int) string {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?)`
	var b strings.Builder
	b.WriteString(`INSERT INTO spend_reservations (request_id, key_id, group_name, model, platform_model, estimate, at, end_user)
	SELECT * FROM (VALUES `)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(`) AS r WHERE NOT EXISTS (SELECT 1 FROM usage_records u WHERE u.request_id = r.column1)
	ON CONFLICT (request_id) DO NOTHING`)
	return b.String()
}

// reservationSettleSQL deletes the reservations of the request ids in a
// JSON array: the one statement a batch of usage needs, whatever its
// size.
const reservationSettleSQL = `DELETE FROM spend_reservations WHERE request_id IN (SELECT value FROM json_each(?))`

// SpendReserve journals a batch in one transaction: all of it or
// nothing. A reservation whose request is journaled already (or earlier
// in the batch), or has a usage record, is skipped: the first is kept,
// and a request already ended needs none.
func (db *DB) SpendReserve(ctx context.Context, batch []weir.Reservation) error {
	if len(batch) == 0 {
		return nil
	}
	for i, r := range batch {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("journal reservations: row %d (request %q): %w", i, r.RequestID, err)
		}
	}
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		args := make([]any, 0, reservationColumnCount*usageRowsPerInsert)
		var (
			shared sharedArgs
			times  timeTexts
			stmts  insertStmts
		)
		return eachChunk(len(batch), func(start, rows, k int) error {
			args = args[:0]
			times.reset()
			for _, r := range batch[start : start+rows] {
				times.add(r.At)
			}
			times.done()
			for i, r := range batch[start : start+rows] {
				args = append(args, r.RequestID, shared.arg(0, r.KeyID), shared.arg(1, r.Group),
					shared.arg(2, r.Model), shared.arg(3, r.PlatformModel), int64(r.Estimate), times.text(i), shared.arg(4, r.EndUser))
			}
			if _, err := db.reserve.inTx(ctx, tx, &stmts, k).ExecContext(ctx, args...); err != nil {
				r := batch[start]
				return fmt.Errorf("rows %d-%d (from request %s, key %s): %w",
					start, start+rows-1, r.RequestID, r.KeyID, classify(err))
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("journal reservations: %w", err)
	}
	return nil
}

// settleTx deletes, in tx, the reservations of batch's requests: their
// usage records settle them.
func (db *DB) settleTx(ctx context.Context, tx *sql.Tx, batch []weir.Usage) error {
	list := make([]byte, 0, 2+len(batch)*32)
	list = append(list, '[')
	for i, u := range batch {
		if i > 0 {
			list = append(list, ',')
		}
		list = fastjson.AppendString(list, u.RequestID)
	}
	list = append(list, ']')
	if _, err := tx.StmtContext(ctx, db.reserveSettle).ExecContext(ctx, string(list)); err != nil {
		return fmt.Errorf("settle reservations: %w", classify(err))
	}
	return nil
}

// spendRecoverPick selects the reservations one SpendRecover counts:
// made before ?1, at most ?2, oldest first, over the index on (at,
// request_id). Both statements of a recovery select them again; in its
// transaction, which holds the one write lock, they are the same rows.
const spendRecoverPick = `SELECT request_id FROM spend_reservations WHERE at < ?1
	ORDER BY at, request_id LIMIT ?2`

// SpendRecover records up to p.Limit reservations made before p.Before,
// oldest first, as interrupted requests that cost their estimate (a
// request's usage record already stored wins), deletes them, and returns
// how many it deleted: one transaction.
func (db *DB) SpendRecover(ctx context.Context, p *weir.SpendRecoverParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("recover reservations: %w", err)
	}
	var n int64
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		before := formatTime(p.Before)
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage_records (`+usageColumns+`)
			SELECT request_id, key_id, model, platform_model, '', 0, 0, 0, 0, 0, ?3, at,
				group_name, 0, estimate, 1, end_user, ''
			FROM spend_reservations WHERE request_id IN (`+spendRecoverPick+`)
			ORDER BY at, request_id
			ON CONFLICT (request_id) DO NOTHING`, before, p.Limit, weir.OutcomeInterrupted); err != nil {
			return fmt.Errorf("record: %w", classify(err))
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM spend_reservations WHERE request_id IN (`+spendRecoverPick+`)`,
			before, p.Limit)
		if err != nil {
			return fmt.Errorf("delete: %w", classify(err))
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("recover reservations: %w", err)
	}
	return int(n), nil
}
