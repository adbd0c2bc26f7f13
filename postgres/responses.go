package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
)

var _ weir.ResponseStore = (*DB)(nil)

// ResponseBind stores b in place of a binding of its response id.
func (db *DB) ResponseBind(ctx context.Context, b weir.ResponseBinding) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("bind response %s: %w", b.ResponseID, err)
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO response_bindings (response_id, platform, key_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (response_id) DO UPDATE SET
			platform = excluded.platform, key_id = excluded.key_id, created_at = excluded.created_at, expires_at = excluded.expires_at`,
		b.ResponseID, b.Platform, b.KeyID, dbTime(b.CreatedAt), dbTime(b.ExpiresAt))
	if err != nil {
		return fmt.Errorf("bind response %s: %w", b.ResponseID, classify(err))
	}
	return nil
}

// ResponseBindingGet finds the binding of p.ResponseID unless it expired
// by p.Now.
func (db *DB) ResponseBindingGet(ctx context.Context, p *weir.ResponseBindingGetParams) (weir.ResponseBinding, error) {
	var b weir.ResponseBinding
	err := db.pool.QueryRow(ctx, `SELECT response_id, platform, key_id, created_at, expires_at
		FROM response_bindings WHERE response_id = $1 AND expires_at > $2`, p.ResponseID, dbTime(p.Now)).
		Scan(&b.ResponseID, &b.Platform, &b.KeyID, &b.CreatedAt, &b.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return weir.ResponseBinding{}, fmt.Errorf("load response binding %s: %w", p.ResponseID, weir.ErrNotFound)
	}
	if err != nil {
		return weir.ResponseBinding{}, fmt.Errorf("load response binding %s: %w", p.ResponseID, classify(err))
	}
	b.CreatedAt, b.ExpiresAt = b.CreatedAt.UTC(), b.ExpiresAt.UTC()
	return b, nil
}

// ResponseUnbind removes the binding of id, if there is one.
func (db *DB) ResponseUnbind(ctx context.Context, id string) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM response_bindings WHERE response_id = $1`, id); err != nil {
		return fmt.Errorf("unbind response %s: %w", id, classify(err))
	}
	return nil
}

// responseBindingsPurgeSQL removes the earliest expired bindings, through
// the index on expires_at.
const responseBindingsPurgeSQL = `DELETE FROM response_bindings WHERE response_id IN (
	SELECT response_id FROM response_bindings WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`

// ResponseBindingsPurge removes up to p.Limit bindings expired by
// p.ExpiredBy, in one statement.
func (db *DB) ResponseBindingsPurge(ctx context.Context, p *weir.ResponseBindingsPurgeParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("purge response bindings: %w", err)
	}
	tag, err := db.pool.Exec(ctx, responseBindingsPurgeSQL, dbTime(p.ExpiredBy), p.Limit)
	if err != nil {
		return 0, fmt.Errorf("purge response bindings: %w", classify(err))
	}
	return int(tag.RowsAffected()), nil
}
