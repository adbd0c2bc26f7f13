-- API keys. The secret is never stored: only its hex SHA-256 (hash) and a
-- short prefix to recognise it. Times are UTC text with a fixed microsecond
-- precision ("2006-01-02T15:04:05.000000Z"), so they sort as text; durations
-- are integer nanoseconds.

-- +goose Up
CREATE TABLE api_keys (
    id                 TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    name               TEXT    NOT NULL,
    prefix             TEXT    NOT NULL,
    hash               TEXT    NOT NULL UNIQUE CHECK (hash <> ''),
    group_name         TEXT    NOT NULL,
    -- JSON array of public model names; [] allows every model.
    models             TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(models)),
    concurrency        INTEGER NOT NULL DEFAULT 0,
    rpm                INTEGER NOT NULL DEFAULT 0,
    tpm                INTEGER NOT NULL DEFAULT 0,
    queue_limit        INTEGER NOT NULL DEFAULT 0,
    max_wait_ns        INTEGER NOT NULL DEFAULT 0,
    lease_ttl_ns       INTEGER NOT NULL DEFAULT 0,
    fairness_window_ns INTEGER NOT NULL DEFAULT 0,
    created_at         TEXT    NOT NULL,
    revoked_at         TEXT
) STRICT;

CREATE INDEX api_keys_created_at ON api_keys (created_at, id);

-- +goose Down
DROP TABLE api_keys;
