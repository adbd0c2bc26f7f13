-- Asynchronous tasks (weir.Task): the same table as the SQLite store's
-- after its migrations 00003 to 00007, in one step.
--
-- seq is the submission order, from an identity column: a number is never
-- handed out twice, even after the newest task is deleted, which keeps
-- paging by seq (TaskFilter.AfterSeq) and admission order (priority, then
-- seq) stable for the life of the database. Numbers are taken when a task
-- is inserted, not when it commits, so concurrent submissions may become
-- visible out of seq order; nothing here relies on it.
--
-- input and result are bytea: the bytes the service gave, returned as they
-- were (the service, not the store, checks that they are JSON; jsonb would
-- reformat them). Read them in psql with convert_from(input, 'UTF8'), or
-- as JSON with convert_from(input, 'UTF8')::jsonb ->> 'prompt'. result is
-- NULL until the upstream answers.
--
-- Strings the domain leaves empty are stored empty, except
-- idempotency_key and fingerprint, which are NULL when not given, so that
-- the UNIQUE (key_id, idempotency_key) constraint does not join tasks
-- submitted without one (NULLs are distinct). admitted_at, finished_at,
-- deadline, deleted_at and callback_gone_at are NULL while unset.
-- candidate is -1 (or any value the service chooses) until the task is
-- admitted.
--
-- fingerprint is the hex SHA-256 of the request that made the task
-- (weir.Task.Fingerprint): a submission that reuses a task's idempotency
-- key with another fingerprint is refused by the API.
--
-- deleted_at is set when the client deletes a finished task: the row
-- stays, so that its idempotency key stays taken and a late worker step
-- still finds a terminal task, but the API answers 404 for it and listings
-- leave it out. callback_gone_at is when the callback URL answered 410
-- Gone; set once.
--
-- callback_events are the weir.TaskEvent names the task asked for beyond
-- the terminal ones; NULL for none.
--
-- A terminal status (succeeded, failed, cancelled, expired) is never
-- left: the store's compare-and-set update refuses to match one.

-- +goose Up
CREATE TABLE tasks (
    seq              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               text        NOT NULL UNIQUE CHECK (id <> ''),
    key_id           text        NOT NULL REFERENCES api_keys (id),
    kind             text        NOT NULL,
    model            text        NOT NULL,
    input            bytea       NOT NULL,
    priority         integer     NOT NULL,
    status           text        NOT NULL CHECK (status IN
                         ('queued', 'admitted', 'running', 'succeeded', 'failed', 'cancelled', 'expired')),
    platform_model   text        NOT NULL DEFAULT '',
    candidate        bigint      NOT NULL DEFAULT 0,
    progress         bigint      NOT NULL DEFAULT 0,
    upstream_id      text        NOT NULL DEFAULT '',
    result           bytea,
    error_code       text        NOT NULL DEFAULT '',
    error_message    text        NOT NULL DEFAULT '',
    callback_url     text        NOT NULL DEFAULT '',
    idempotency_key  text        CHECK (idempotency_key <> ''),
    attempts         bigint      NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at       timestamptz NOT NULL,
    admitted_at      timestamptz,
    finished_at      timestamptz,
    deadline         timestamptz,
    fingerprint      text        CHECK (fingerprint <> ''),
    deleted_at       timestamptz,
    callback_events  text[]      CHECK (cardinality(callback_events) > 0),
    callback_gone_at timestamptz,
    -- Also the index the foreign key wants on its child column.
    UNIQUE (key_id, idempotency_key)
);

-- Listings are in seq order (TaskStore.TaskList), so the listing indexes
-- end in seq: a listing of one status or one key reads its rows in order
-- and a page costs its own size, never a sort of everything after it.
--
-- Recovery at start-up: the queued tasks (and the few admitted and
-- running ones) in submission order.
CREATE INDEX tasks_status_seq ON tasks (status, seq);
-- A key's own tasks in submission order (GET /v1/tasks).
CREATE INDEX tasks_key_seq ON tasks (key_id, seq);
-- One API's tasks of a key (GET /v1/videos).
CREATE INDEX tasks_key_kind_seq ON tasks (key_id, kind, seq);
-- The reaper: queued tasks whose deadline has passed.
CREATE INDEX tasks_status_deadline ON tasks (status, deadline);
-- The purge of finished tasks (TaskPurge): the oldest finished first,
-- without reading the tasks that have not finished.
CREATE INDEX tasks_finished_at ON tasks (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP TABLE tasks;
