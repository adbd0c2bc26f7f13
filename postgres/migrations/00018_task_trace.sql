-- The trace context of the request that submitted a task.
--
-- trace_parent is that request's W3C traceparent, '' if it was not
-- traced: the task's later spans (its wait, each job attempt, each
-- callback delivery) join its trace, in any process and after a
-- restart. Set when the task is created and never changed.

-- +goose Up
ALTER TABLE tasks ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tasks DROP COLUMN trace_parent;
