-- The indexes that serve spend by group and by end user (SpendSum) hold
-- only the rows that name one: a budget's subject always names one, and
-- most requests name none (a key in no group, a client that names no
-- user), whose entries were work for every insert and read by no query.
-- SpendSum's queries say group_name <> '' (end_user <> '') for SQLite to
-- use them.

-- +goose Up
DROP INDEX usage_records_group_at;
CREATE INDEX usage_records_group_at ON usage_records (group_name, at) WHERE group_name <> '';
DROP INDEX usage_records_end_user_at;
CREATE INDEX usage_records_end_user_at ON usage_records (end_user, at) WHERE end_user <> '';

-- +goose Down
DROP INDEX usage_records_end_user_at;
CREATE INDEX usage_records_end_user_at ON usage_records (end_user, at);
DROP INDEX usage_records_group_at;
CREATE INDEX usage_records_group_at ON usage_records (group_name, at);
