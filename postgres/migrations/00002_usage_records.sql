-- One row per request. seq is the insertion order, which breaks ties
-- between records with the same time (newest first in listings).
-- request_id is unique so that a retried flush does not count twice.

-- +goose Up
CREATE TABLE usage_records (
    seq               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id        text        NOT NULL UNIQUE CHECK (request_id <> ''),
    key_id            text        NOT NULL REFERENCES api_keys (id),
    model             text        NOT NULL,
    platform_model    text        NOT NULL,
    endpoint          text        NOT NULL,
    prompt_tokens     bigint      NOT NULL,
    completion_tokens bigint      NOT NULL,
    waited_ns         bigint      NOT NULL,
    latency_ns        bigint      NOT NULL,
    status            bigint      NOT NULL,
    outcome           text        NOT NULL,
    at                timestamptz NOT NULL
);

CREATE INDEX usage_records_at ON usage_records (at, seq);
-- Also the index the foreign key wants on its child column.
CREATE INDEX usage_records_key_at ON usage_records (key_id, at, seq);

-- +goose Down
DROP TABLE usage_records;
