-- The callback events a task asked for beyond the terminal ones, and a
-- listing index for one API's tasks of a key.
--
-- callback_events is a JSON array of weir.TaskEvent names (["progress"]),
-- NULL when the task asked for none: tasks stored before this migration
-- get only their terminal event, as before.
--
-- GET /v1/videos lists a key's videos, newest first by default; the index
-- reads them in seq order either way without the key's other tasks.

-- +goose Up
ALTER TABLE tasks ADD COLUMN callback_events TEXT
    CHECK (callback_events IS NULL OR (json_valid(callback_events) AND json_type(callback_events) = 'array'));
CREATE INDEX tasks_key_kind_seq ON tasks (key_id, kind, seq);

-- +goose Down
DROP INDEX tasks_key_kind_seq;
ALTER TABLE tasks DROP COLUMN callback_events;
