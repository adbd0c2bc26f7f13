package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/internal/rowscan"
)

const keyColumns = `id, name, prefix, hash, group_name, models,
	concurrency, rpm, tpm, queue_limit, max_wait_ns, lease_ttl_ns, fairness_window_ns,
	created_at, revoked_at, shadow`

// KeyCreate stores a new key. A taken ID or Hash is weir.ErrConflict.
func (db *DB) KeyCreate(ctx context.Context, k weir.APIKey) error {
	if err := k.Validate(); err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	models := k.Models
	if models == nil {
		models = []string{}
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO api_keys (`+keyColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		k.ID, k.Name, k.Prefix, k.Hash, k.Group, models,
		k.Concurrency, k.RPM, k.TPM, int64(k.QueueLimit),
		int64(k.MaxWait), int64(k.LeaseTTL), int64(k.FairnessWindow),
		dbTime(k.CreatedAt), nullTime(k.RevokedAt), k.Shadow)
	if err != nil {
		return fmt.Errorf("create key %s: %w", k.ID, classify(err))
	}
	return nil
}

// KeyByHash finds a key by the hash of its secret, revoked or not.
func (db *DB) KeyByHash(ctx context.Context, hash string) (weir.APIKey, error) {
	k, err := scanKey(db.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, hash))
	if err != nil {
		// The hash is not secret, but it is long and says nothing useful.
		return weir.APIKey{}, fmt.Errorf("load key by hash: %w", err)
	}
	return k, nil
}

// KeyByID finds a key by its ID, revoked or not.
func (db *DB) KeyByID(ctx context.Context, id string) (weir.APIKey, error) {
	k, err := scanKey(db.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = $1`, id))
	if err != nil {
		return weir.APIKey{}, fmt.Errorf("load key %s: %w", id, err)
	}
	return k, nil
}

// KeyList returns every key, by creation time, then ID.
func (db *DB) KeyList(ctx context.Context) ([]weir.APIKey, error) {
	return listAll(ctx, db, "keys", `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`, scanKey)
}

// KeyRevoke marks a key revoked at the given time. Revoking a revoked key
// succeeds and keeps the first time.
func (db *DB) KeyRevoke(ctx context.Context, p *weir.KeyRevokeParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("revoke key %s: %w", p.ID, err)
	}
	return db.revoke(ctx, "api_keys", "key", p.ID, p.At)
}

// scanKey reads one row of keyColumns; no row is weir.ErrNotFound.
func scanKey(row rowscan.Row) (weir.APIKey, error) {
	var (
		k                          weir.APIKey
		queueLimit                 int64
		maxWait, leaseTTL, fairWin int64
		revoked                    *time.Time
	)
	err := row.Scan(&k.ID, &k.Name, &k.Prefix, &k.Hash, &k.Group, &k.Models,
		&k.Concurrency, &k.RPM, &k.TPM, &queueLimit, &maxWait, &leaseTTL, &fairWin,
		&k.CreatedAt, &revoked, &k.Shadow)
	if errors.Is(err, pgx.ErrNoRows) {
		return weir.APIKey{}, weir.ErrNotFound
	}
	if err != nil {
		return weir.APIKey{}, err
	}
	k.QueueLimit = int(queueLimit)
	k.MaxWait, k.LeaseTTL, k.FairnessWindow = time.Duration(maxWait), time.Duration(leaseTTL), time.Duration(fairWin)
	if len(k.Models) == 0 {
		k.Models = nil
	}
	k.CreatedAt, k.RevokedAt = k.CreatedAt.UTC(), fromNullTime(revoked)
	return k, nil
}
