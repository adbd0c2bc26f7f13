package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir/fleet"
)

// The fleet's node board (fleet.NodeBoard): a row per replica in
// weir_fleet_nodes, an unlogged table (migration 00011), whose served and
// nodes are jsonb.

// BoardPublish implements fleet.NodeBoard. Nodes nil is an empty list.
func (db *DB) BoardPublish(ctx context.Context, p *fleet.BoardPublishParams) error {
	nodes := []byte(p.Nodes)
	if nodes == nil {
		nodes = []byte("[]")
	}
	_, err := db.pool.Exec(ctx, `
		INSERT INTO weir_fleet_nodes (replica, addr, served, nodes, updated_at) VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (replica) DO UPDATE SET addr = EXCLUDED.addr, served = EXCLUDED.served, nodes = EXCLUDED.nodes, updated_at = now()`,
		p.Replica, p.Addr, []byte(p.Served), nodes)
	return classify(err)
}

// BoardLeave implements fleet.NodeBoard.
func (db *DB) BoardLeave(ctx context.Context, replica string) error {
	_, err := db.pool.Exec(ctx, `DELETE FROM weir_fleet_nodes WHERE replica = $1`, replica)
	return err
}

// BoardRead implements fleet.NodeBoard.
func (db *DB) BoardRead(ctx context.Context, p *fleet.BoardReadParams) ([]fleet.BoardOffer, error) {
	rows, err := db.pool.Query(ctx, `
		SELECT replica, addr, served, nodes, floor(extract(epoch FROM now() - updated_at) * 1000000)::bigint
		FROM weir_fleet_nodes
		WHERE replica <> $1 AND updated_at > now() - $2 * interval '1 microsecond'
		ORDER BY replica`, p.Except, micros(p.TTL))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (fleet.BoardOffer, error) {
		var o fleet.BoardOffer
		var served, nodes []byte
		var age int64
		err := row.Scan(&o.Replica, &o.Addr, &served, &nodes, &age)
		o.Served, o.Nodes = served, nodes
		o.Age = time.Duration(age) * time.Microsecond
		return o, err
	})
}
