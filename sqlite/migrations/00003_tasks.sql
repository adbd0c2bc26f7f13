-- Asynchronous tasks (weir.Task). seq is the submission order: AUTOINCREMENT
-- so that a number is never handed out twice, even after the newest task is
-- deleted, which keeps paging by seq (TaskFilter.AfterSeq) and admission
-- order (priority, then seq) stable for the life of the file.
--
-- input and result are BLOBs: the bytes the service gave, returned as they
-- were (the service, not the store, checks that they are JSON). Read them
-- in the sqlite3 shell with CAST(input AS TEXT); note that SQLite's JSON
-- functions take a BLOB for JSONB, so write json_extract(CAST(input AS
-- TEXT), '$.prompt'). result is NULL until the upstream answers.
--
-- Strings the domain leaves empty are stored empty, except
-- idempotency_key, which is NULL when not given so that the
-- UNIQUE (key_id, idempotency_key) constraint does not join tasks
-- submitted without one. Times are UTC text with a fixed microsecond
-- precision, as in api_keys; admitted_at, finished_at and deadline are
-- NULL while unset. candidate is -1 (or any value the service chooses)
-- until the task is admitted.
--
-- A terminal status (succeeded, failed, cancelled, expired) is never
-- left: the store's compare-and-set update refuses to match one.

-- +goose Up
CREATE TABLE tasks (
    seq             INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    id              TEXT    NOT NULL UNIQUE CHECK (id <> ''),
    key_id          TEXT    NOT NULL REFERENCES api_keys (id),
    kind            TEXT    NOT NULL,
    model           TEXT    NOT NULL,
    input           BLOB    NOT NULL,
    priority        INTEGER NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN
                        ('queued', 'admitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired')),
    platform_model  TEXT    NOT NULL DEFAULT '',
    candidate       INTEGER NOT NULL DEFAULT 0,
    progress        INTEGER NOT NULL DEFAULT 0,
    upstream_id     TEXT    NOT NULL DEFAULT '',
    result          BLOB,
    error_code      TEXT    NOT NULL DEFAULT '',
    error_message   TEXT    NOT NULL DEFAULT '',
    callback_url    TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    CHECK (idempotency_key <> ''),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at      TEXT    NOT NULL,
    admitted_at     TEXT,
    finished_at     TEXT,
    deadline        TEXT,
    -- Also the index the foreign key wants on its child column.
    UNIQUE (key_id, idempotency_key)
) STRICT;

-- Listings are in seq order (TaskStore.TaskList), so the listing indexes
-- end in seq: a listing of one status or one key reads its rows in order
-- and a page costs its own size, never a sort of everything after it.
--
-- Recovery at start-up: the queued tasks (and the few admitted and
-- running ones) in submission order. The engine orders waiters by
-- priority itself; an index on (status, priority DESC, seq) would make
-- this listing sort all 100,000 queued tasks, and paging through them
-- quadratic.
CREATE INDEX tasks_status_seq ON tasks (status, seq);
-- A key's own tasks in submission order (GET /v1/tasks).
CREATE INDEX tasks_key_seq ON tasks (key_id, seq);
-- The reaper: queued tasks whose deadline has passed.
CREATE INDEX tasks_status_deadline ON tasks (status, deadline);

-- +goose Down
DROP TABLE tasks;
