-- API keys. The secret is never stored: only its hex SHA-256 (hash) and a
-- short prefix to recognise it. Durations are integer nanoseconds, as the
-- domain holds them (time.Duration), so that they come back exactly.

-- +goose Up
CREATE TABLE api_keys (
    id                 text        NOT NULL PRIMARY KEY CHECK (id <> ''),
    name               text        NOT NULL,
    prefix             text        NOT NULL,
    hash               text        NOT NULL UNIQUE CHECK (hash <> ''),
    group_name         text        NOT NULL,
    -- Public model names; empty allows every model.
    models             text[]      NOT NULL DEFAULT '{}',
    concurrency        bigint      NOT NULL DEFAULT 0,
    rpm                bigint      NOT NULL DEFAULT 0,
    tpm                bigint      NOT NULL DEFAULT 0,
    queue_limit        bigint      NOT NULL DEFAULT 0,
    max_wait_ns        bigint      NOT NULL DEFAULT 0,
    lease_ttl_ns       bigint      NOT NULL DEFAULT 0,
    fairness_window_ns bigint      NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL,
    revoked_at         timestamptz
);

CREATE INDEX api_keys_created_at ON api_keys (created_at, id);

-- +goose Down
DROP TABLE api_keys;
