-- A key's limits in shadow (weir.Limits.Shadow): judged on every request
-- but enforced nowhere, so that a new limit can be tried safely; false
-- for the keys made before: enforced, as they were.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN shadow boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN shadow;
