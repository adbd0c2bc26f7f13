-- Edge nodes (weir.Node): machines with GPUs of their own that dial in
-- to the gateway with a node token. The token is never stored: only its
-- hex SHA-256 (hash), by which the node is found when it connects, and a
-- short prefix to recognise it. Names are unique among all nodes, revoked
-- ones included, compared byte by byte (SQLite's BINARY collation), which
-- is also the listing order. Times are as in api_keys; revoked_at is NULL
-- while the node is active.

-- +goose Up
CREATE TABLE nodes (
    id         TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
    name       TEXT NOT NULL CHECK (name <> ''),
    prefix     TEXT NOT NULL,
    hash       TEXT NOT NULL CHECK (hash <> ''),
    created_at TEXT NOT NULL,
    revoked_at TEXT
) STRICT;

CREATE UNIQUE INDEX nodes_hash ON nodes (hash);
CREATE UNIQUE INDEX nodes_name ON nodes (name);

-- +goose Down
DROP TABLE nodes;
