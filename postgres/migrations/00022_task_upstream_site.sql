-- Where a task's upstream job was submitted.
--
-- upstream_site identifies the platform a task was submitted to (kind,
-- base URL, region, account or credential: who and where, never a
-- secret), '' before its submit. Recorded with upstream_id, it lets
-- the job be followed there to its end, after a restart too, once its
-- platform model was pointed at another platform or removed, as long as
-- the catalog still has that platform.

-- +goose Up
ALTER TABLE tasks ADD COLUMN upstream_site TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tasks DROP COLUMN upstream_site;
