-- What a repeated submission is compared with, and deleted videos.
--
-- fingerprint is the hex SHA-256 of the request that made the task (kind,
-- model, canonical input and callback URL, as the API computes it;
-- weir.Task.Fingerprint). A submission that reuses a task's idempotency
-- key with another fingerprint is refused by the API. Tasks stored before
-- this migration have none (NULL), which matches any request.
--
-- deleted_at is set when the client deletes a finished task (DELETE
-- /v1/videos/{id}): the row stays, so that its idempotency key stays taken
-- and a late worker step still finds a terminal task, but the API answers
-- 404 for it and listings leave it out. NULL while not deleted. Only a
-- terminal task is deleted, and a deleted one is never changed again (it
-- is terminal, which the compare-and-set update never matches).

-- +goose Up
ALTER TABLE tasks ADD COLUMN fingerprint TEXT CHECK (fingerprint <> '');
ALTER TABLE tasks ADD COLUMN deleted_at TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN deleted_at;
ALTER TABLE tasks DROP COLUMN fingerprint;
