package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

// listAll runs query with args on the read pool and scans each row with
// scan; its errors say "list <what>".
func listAll[T any](ctx context.Context, db *DB, what, query string, scan func(rowscan.Row) (T, error), args ...any) ([]T, error) {
	rows, err := db.read.QueryContext(ctx, query, args...)
	return scanAll(what, rows, err, scan)
}

// listStmt is listAll of a statement prepare made.
func listStmt[T any](ctx context.Context, stmt *sql.Stmt, what string, scan func(rowscan.Row) (T, error), args ...any) ([]T, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	return scanAll(what, rows, err, scan)
}

// scanAll scans rows, the answer of a query that failed with err or
// not, and closes them.
func scanAll[T any](what string, rows *sql.Rows, err error, scan func(rowscan.Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	defer rows.Close()
	out, err := rowscan.Append(nil, rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return out, nil
}

// revoke marks row id of table (api_keys, nodes) revoked at at, which
// the caller has validated, keeping the first time if it was already; its
// errors say "revoke <what> <id>".
func (db *DB) revoke(ctx context.Context, table, what, id string, at time.Time) error {
	res, err := db.write.ExecContext(ctx,
		`UPDATE `+table+` SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, formatTime(at), id)
	if err != nil {
		return fmt.Errorf("revoke %s %s: %w", what, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("revoke %s %s: %w", what, id, err)
	}
	if n == 0 {
		return fmt.Errorf("revoke %s %s: %w", what, id, weir.ErrNotFound)
	}
	return nil
}
