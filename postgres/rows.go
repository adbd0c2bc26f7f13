package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

// listAll runs query with args and scans each row with scan; its errors
// say "list <what>".
func listAll[T any](ctx context.Context, db *DB, what, query string, scan func(rowscan.Row) (T, error), args ...any) ([]T, error) {
	rows, err := db.pool.Query(ctx, query, args...)
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
	tag, err := db.pool.Exec(ctx,
		`UPDATE `+table+` SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2`, dbTime(at), id)
	if err != nil {
		return fmt.Errorf("revoke %s %s: %w", what, id, classify(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke %s %s: %w", what, id, weir.ErrNotFound)
	}
	return nil
}
