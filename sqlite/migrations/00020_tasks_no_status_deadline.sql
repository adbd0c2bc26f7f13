-- No query reads tasks by status and deadline: a queued task's deadline
-- is kept by the queue in memory (task/queue.go), loaded with the queued
-- tasks at recovery (tasks_status_seq). The index was work for every
-- insert and every status change. Older replicas of a fleet never read
-- it either.

-- +goose Up
DROP INDEX IF EXISTS tasks_status_deadline;

-- +goose Down
CREATE INDEX IF NOT EXISTS tasks_status_deadline ON tasks (status, deadline);
