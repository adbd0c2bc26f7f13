-- A key's limits in shadow (weir.Limits.Shadow): judged on every request
-- but enforced nowhere, so that a new limit can be tried safely. 0 or 1;
-- 0 for the keys made before: enforced, as they were.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0 CHECK (shadow IN (0, 1));

-- +goose Down
ALTER TABLE api_keys DROP COLUMN shadow;
