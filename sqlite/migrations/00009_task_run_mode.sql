-- The run mode of a task.
--
-- run_mode is how the task runs: '' for production, 'simulation' where the
-- platform model's simulator answers its upstream calls, 'acceptance' in
-- the scopes of the acceptance run run_id ('' in the other modes). Both
-- are set when the task is created and never change.

-- +goose Up
ALTER TABLE tasks ADD COLUMN run_mode TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN run_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tasks DROP COLUMN run_id;
ALTER TABLE tasks DROP COLUMN run_mode;
