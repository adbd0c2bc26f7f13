-- The edge nodes that dialed each replica, for the other replicas to
-- offer and relay runs to (fleet.NodeBoard; postgres/board.go). A row is
-- the replica's whole offer, written again every board interval; a row
-- older than the board's TTL (by PostgreSQL's clock) is a replica gone,
-- and is not read. Soft state, rewritten every second: unlogged, so that
-- it costs no WAL (after a crash of PostgreSQL, or on a standby promoted,
-- it is empty until the replicas write it again, a second later). Made
-- only where it is missing: see 00008.

-- +goose Up
CREATE UNLOGGED TABLE IF NOT EXISTS weir_fleet_nodes (
    replica    text        PRIMARY KEY CHECK (replica <> ''),
    addr       text        NOT NULL,
    served     jsonb       NOT NULL,
    -- nodes is the replica's admin view of its nodes (/admin/nodes), so
    -- that every replica can show the whole fleet's.
    nodes      jsonb       NOT NULL DEFAULT '[]',
    updated_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS weir_fleet_nodes;
