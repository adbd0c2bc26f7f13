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

var _ weir.NodeStore = (*DB)(nil)

const nodeColumns = `id, name, prefix, hash, created_at, revoked_at`

// NodeCreate stores a new node. A node that fails Validate is
// weir.ErrInvalid; a taken ID, Name or Hash is weir.ErrConflict.
func (db *DB) NodeCreate(ctx context.Context, n weir.Node) error {
	if err := n.Validate(); err != nil {
		return fmt.Errorf("create node %q: %w", n.ID, err)
	}
	_, err := db.pool.Exec(ctx, `INSERT INTO nodes (`+nodeColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		n.ID, n.Name, n.Prefix, n.Hash, dbTime(n.CreatedAt), nullTime(n.RevokedAt))
	if err != nil {
		return fmt.Errorf("create node %s (%q): %w", n.ID, n.Name, classify(err))
	}
	return nil
}

// NodeByHash finds a node by the hash of its token, revoked or not.
func (db *DB) NodeByHash(ctx context.Context, hash string) (weir.Node, error) {
	n, err := scanNode(db.pool.QueryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE hash = $1`, hash))
	if err != nil {
		return weir.Node{}, fmt.Errorf("load node by hash: %w", err)
	}
	return n, nil
}

// NodeByID finds a node by its ID, revoked or not.
func (db *DB) NodeByID(ctx context.Context, id string) (weir.Node, error) {
	n, err := scanNode(db.pool.QueryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE id = $1`, id))
	if err != nil {
		return weir.Node{}, fmt.Errorf("load node %s: %w", id, err)
	}
	return n, nil
}

// NodeList returns every node by name, in byte order (the column's "C"
// collation).
func (db *DB) NodeList(ctx context.Context) ([]weir.Node, error) {
	return listAll(ctx, db, "nodes", `SELECT `+nodeColumns+` FROM nodes ORDER BY name`, scanNode)
}

// NodeRevoke marks a node revoked at the given time. Revoking a revoked
// node succeeds and keeps the first time.
func (db *DB) NodeRevoke(ctx context.Context, p *weir.NodeRevokeParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("revoke node %s: %w", p.ID, err)
	}
	return db.revoke(ctx, "nodes", "node", p.ID, p.At)
}

// scanNode reads one row of nodeColumns; no row is weir.ErrNotFound.
func scanNode(row rowscan.Row) (weir.Node, error) {
	var (
		n       weir.Node
		revoked *time.Time
	)
	err := row.Scan(&n.ID, &n.Name, &n.Prefix, &n.Hash, &n.CreatedAt, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return weir.Node{}, weir.ErrNotFound
	}
	if err != nil {
		return weir.Node{}, err
	}
	n.CreatedAt, n.RevokedAt = n.CreatedAt.UTC(), fromNullTime(revoked)
	return n, nil
}
