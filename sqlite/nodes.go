package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
	var revoked sql.NullString
	if !n.RevokedAt.IsZero() {
		revoked = sql.NullString{String: formatTime(n.RevokedAt), Valid: true}
	}
	_, err := db.write.ExecContext(ctx, `INSERT INTO nodes (`+nodeColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		n.ID, n.Name, n.Prefix, n.Hash, formatTime(n.CreatedAt), revoked)
	if err != nil {
		return fmt.Errorf("create node %s (%q): %w", n.ID, n.Name, classify(err))
	}
	return nil
}

// NodeByHash finds a node by the hash of its token, revoked or not.
func (db *DB) NodeByHash(ctx context.Context, hash string) (weir.Node, error) {
	n, err := scanNode(db.read.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE hash = ?`, hash))
	if err != nil {
		return weir.Node{}, fmt.Errorf("load node by hash: %w", err)
	}
	return n, nil
}

// NodeByID finds a node by its ID, revoked or not.
func (db *DB) NodeByID(ctx context.Context, id string) (weir.Node, error) {
	n, err := scanNode(db.read.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE id = ?`, id))
	if err != nil {
		return weir.Node{}, fmt.Errorf("load node %s: %w", id, err)
	}
	return n, nil
}

// NodeList returns every node by name, in byte order (the column's BINARY
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
		created string
		revoked sql.NullString
	)
	err := row.Scan(&n.ID, &n.Name, &n.Prefix, &n.Hash, &created, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return weir.Node{}, weir.ErrNotFound
	}
	if err != nil {
		return weir.Node{}, err
	}
	if n.CreatedAt, err = parseTime(created); err != nil {
		return weir.Node{}, fmt.Errorf("node %s: %w", n.ID, err)
	}
	if revoked.Valid {
		if n.RevokedAt, err = parseTime(revoked.String); err != nil {
			return weir.Node{}, fmt.Errorf("node %s: %w", n.ID, err)
		}
	}
	return n, nil
}
