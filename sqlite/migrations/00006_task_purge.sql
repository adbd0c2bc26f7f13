-- The purge of finished tasks (TaskPurge): the oldest finished first,
-- without reading the tasks that have not finished.

-- +goose Up
CREATE INDEX tasks_finished_at ON tasks (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX tasks_finished_at;
