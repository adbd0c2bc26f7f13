-- The run mode of a task.
--
-- run_mode is how the task runs: '' for production, 'simulation' where the
-- platform model's simulator answers its upstream calls. Set when the task
-- is created; it never changes.

-- +goose Up
ALTER TABLE tasks ADD COLUMN run_mode text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tasks DROP COLUMN run_mode;
