package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/weir-gateway/weir"
)

var _ weir.ResponseStore = (*DB)(nil)

// ResponseBind stores b in place of a binding of its response id, having
// removed the bindings expired by its creation.
func (db *DB) ResponseBind(ctx context.Context, b weir.ResponseBinding) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("bind response %s: %w", b.ResponseID, err)
	}
	created := formatTime(b.CreatedAt)
	if _, err := db.write.ExecContext(ctx, `DELETE FROM response_bindings WHERE expires_at <= ?`, created); err != nil {
		return fmt.Errorf("bind response %s: remove the expired: %w", b.ResponseID, classify(err))
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO response_bindings (response_id, platform, key_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (response_id) DO UPDATE SET
			platform = excluded.platform, key_id = excluded.key_id, created_at = excluded.created_at, expires_at = excluded.expires_at`,
		b.ResponseID, b.Platform, b.KeyID, created, formatTime(b.ExpiresAt))
	if err != nil {
		return fmt.Errorf("bind response %s: %w", b.ResponseID, classify(err))
	}
	return nil
}

// ResponseBindingGet finds the binding of p.ResponseID unless it expired
// by p.Now.
func (db *DB) ResponseBindingGet(ctx context.Context, p *weir.ResponseBindingGetParams) (weir.ResponseBinding, error) {
	var (
		b                weir.ResponseBinding
		created, expires string
	)
	err := db.read.QueryRowContext(ctx, `SELECT response_id, platform, key_id, created_at, expires_at
		FROM response_bindings WHERE response_id = ? AND expires_at > ?`, p.ResponseID, formatTime(p.Now)).
		Scan(&b.ResponseID, &b.Platform, &b.KeyID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return weir.ResponseBinding{}, fmt.Errorf("load response binding %s: %w", p.ResponseID, weir.ErrNotFound)
	}
	if err != nil {
		return weir.ResponseBinding{}, fmt.Errorf("load response binding %s: %w", p.ResponseID, classify(err))
	}
	if b.CreatedAt, err = parseTime(created); err != nil {
		return weir.ResponseBinding{}, fmt.Errorf("response binding %s: %w", p.ResponseID, err)
	}
	if b.ExpiresAt, err = parseTime(expires); err != nil {
		return weir.ResponseBinding{}, fmt.Errorf("response binding %s: %w", p.ResponseID, err)
	}
	return b, nil
}

// ResponseUnbind removes the binding of id, if there is one.
func (db *DB) ResponseUnbind(ctx context.Context, id string) error {
	if _, err := db.write.ExecContext(ctx, `DELETE FROM response_bindings WHERE response_id = ?`, id); err != nil {
		return fmt.Errorf("unbind response %s: %w", id, classify(err))
	}
	return nil
}
