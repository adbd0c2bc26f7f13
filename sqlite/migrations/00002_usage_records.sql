-- One row per request. seq is the insertion order, which breaks ties
-- between records with the same time (newest first in listings).
-- request_id is unique so that a retried flush does not count twice.

-- +goose Up
CREATE TABLE usage_records (
    seq               INTEGER NOT NULL PRIMARY KEY,
    request_id        TEXT    NOT NULL UNIQUE CHECK (request_id <> ''),
    key_id            TEXT    NOT NULL REFERENCES api_keys (id),
    model             TEXT    NOT NULL,
    platform_model    TEXT    NOT NULL,
    endpoint          TEXT    NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    waited_ns         INTEGER NOT NULL,
    latency_ns        INTEGER NOT NULL,
    status            INTEGER NOT NULL,
    outcome           TEXT    NOT NULL,
    at                TEXT    NOT NULL
) STRICT;

CREATE INDEX usage_records_at ON usage_records (at, seq);
-- Also the index the foreign key wants on its child column.
CREATE INDEX usage_records_key_at ON usage_records (key_id, at, seq);

-- +goose Down
DROP TABLE usage_records;
