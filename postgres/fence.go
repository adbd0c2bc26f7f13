package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The fleet leader's writes are fenced by its epoch: checked against the
// term's row (weir_fleet_term) in the same transaction, whose row lock
// (FOR KEY SHARE) a campaign's FOR UPDATE waits for, so that a write
// checked under epoch N commits before epoch N+1 can begin, or is
// refused.

// fenceSQL locks the term row against a campaign and yields a row only
// while $1 is the current, unexpired term and led by $2. The expiry is
// checked at the statement's own time: inside a longer transaction now()
// would be the transaction's start.
const fenceSQL = `SELECT 1 FROM weir_fleet_term
	WHERE epoch = $1 AND leader = $2 AND expires_at > statement_timestamp() FOR KEY SHARE`

// fenceOrFailSQL is fenceSQL as a statement that fails when the term has
// passed, so that in a pipeline the server runs nothing after it (SQL
// has no RAISE: it divides by the count of rows, 0 or 1). termPassed
// tells its failure.
const fenceOrFailSQL = `SELECT 1 / count(*)::int FROM (SELECT 1 FROM weir_fleet_term
	WHERE epoch = $1 AND leader = $2 AND expires_at > statement_timestamp() FOR KEY SHARE) AS term`

// termPassed reports whether err is fenceOrFailSQL's failure for a term
// that has passed.
func termPassed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22012" // division_by_zero
}

// toInt64 checks that an epoch or generation fits PostgreSQL's bigint.
func toInt64(what string, v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%s %d out of range", what, v)
	}
	return int64(v), nil
}

// TermFenceTx checks, inside tx, that epoch is still the current
// unexpired term and led by leader, and holds the term row so that no
// campaign can begin a new epoch until tx ends. It reports false when
// the term has passed: roll back. Call it in every transaction that
// writes on the fleet leader's behalf, before its writes (the task
// service does: task.Fencer).
func (db *DB) TermFenceTx(ctx context.Context, tx pgx.Tx, leader string, epoch uint64) (bool, error) {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return false, err
	}
	var one int
	err = tx.QueryRow(ctx, fenceSQL, e, leader).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fence epoch %d: %w", epoch, err)
	}
	return true, nil
}
