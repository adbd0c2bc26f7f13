-- Edge nodes (weir.Node): machines with GPUs of their own that dial in
-- to the gateway with a node token. The token is never stored: only its
-- hex SHA-256 (hash), by which the node is found when it connects, and a
-- short prefix to recognise it. revoked_at is NULL while the node is
-- active.
--
-- name is unique among all nodes, revoked ones included. Its collation is
-- "C" so that uniqueness and the listing order are byte by byte, as in
-- the SQLite store, whatever the database's default collation: under a
-- linguistic one "a-b" and "ab" would sort differently, and
-- nondeterministic ones could even call distinct names equal.

-- +goose Up
CREATE TABLE nodes (
    id         text        NOT NULL PRIMARY KEY CHECK (id <> ''),
    name       text        COLLATE "C" NOT NULL CHECK (name <> ''),
    prefix     text        NOT NULL,
    hash       text        NOT NULL CHECK (hash <> ''),
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE UNIQUE INDEX nodes_hash ON nodes (hash);
CREATE UNIQUE INDEX nodes_name ON nodes (name);

-- +goose Down
DROP TABLE nodes;
