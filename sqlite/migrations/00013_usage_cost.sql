-- What each request cost (weir.Usage): the key's group when it was made,
-- the prompt tokens read from the provider's prompt cache, the cost in
-- billionths of the operator's currency (weir.Money), and whether that
-- cost is the request's estimate because the upstream reported no usage
-- (0 or 1). Rows made before read as no group, nothing cached, free and
-- measured. The indexes serve spend by group, model and platform model
-- over a window of time; by key, usage_records_key_at already does.

-- +goose Up
ALTER TABLE usage_records ADD COLUMN group_name TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_records ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN cost INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN cost_estimated INTEGER NOT NULL DEFAULT 0 CHECK (cost_estimated IN (0, 1));
CREATE INDEX usage_records_group_at ON usage_records (group_name, at);
CREATE INDEX usage_records_model_at ON usage_records (model, at);
CREATE INDEX usage_records_platform_model_at ON usage_records (platform_model, at);

-- +goose Down
DROP INDEX usage_records_platform_model_at;
DROP INDEX usage_records_model_at;
DROP INDEX usage_records_group_at;
ALTER TABLE usage_records DROP COLUMN cost_estimated;
ALTER TABLE usage_records DROP COLUMN cost;
ALTER TABLE usage_records DROP COLUMN cached_tokens;
ALTER TABLE usage_records DROP COLUMN group_name;
