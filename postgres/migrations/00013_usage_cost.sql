-- What each request cost (weir.Usage): the key's group when it was made,
-- the prompt tokens read from the provider's prompt cache, the cost in
-- billionths of the operator's currency (weir.Money), and whether that
-- cost is the request's estimate because the upstream reported no usage.
-- Rows made before read as no group, nothing cached, free and measured.
-- The indexes serve spend by group, model and platform model over a
-- window of time; by key, usage_records_key_at already does.

-- +goose Up
ALTER TABLE usage_records
    ADD COLUMN group_name     text    NOT NULL DEFAULT '',
    ADD COLUMN cached_tokens  bigint  NOT NULL DEFAULT 0,
    ADD COLUMN cost           bigint  NOT NULL DEFAULT 0,
    ADD COLUMN cost_estimated boolean NOT NULL DEFAULT false;
CREATE INDEX usage_records_group_at ON usage_records (group_name, at);
CREATE INDEX usage_records_model_at ON usage_records (model, at);
CREATE INDEX usage_records_platform_model_at ON usage_records (platform_model, at);

-- +goose Down
DROP INDEX usage_records_platform_model_at;
DROP INDEX usage_records_model_at;
DROP INDEX usage_records_group_at;
ALTER TABLE usage_records
    DROP COLUMN cost_estimated,
    DROP COLUMN cost,
    DROP COLUMN cached_tokens,
    DROP COLUMN group_name;
