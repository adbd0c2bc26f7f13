-- Callback URLs that answered 410 Gone.
--
-- callback_gone_at is when a receiver answered 410 Gone to an event of the
-- task: no later event of the task is sent to its callback URL (which
-- never changes). NULL while the receiver has not said so. Set once
-- (TaskCallbackGone); the first time stays.

-- +goose Up
ALTER TABLE tasks ADD COLUMN callback_gone_at TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN callback_gone_at;
