-- End users (weir.Usage.EndUser): the customer of the operator's app a
-- request named (its user, safety_identifier or metadata.user_id), ''
-- none, in each usage record and each reservation of the spend journal,
-- so that a recovered reservation counts against its end user too. Rows
-- made before name none. The index serves spend by end user over a
-- window of time, as usage_records_group_at does by group. budgets may
-- have end users for subjects ('user', an end user's id or '*' for every
-- end user apart).

-- +goose Up
ALTER TABLE usage_records ADD COLUMN end_user text NOT NULL DEFAULT '';
ALTER TABLE spend_reservations ADD COLUMN end_user text NOT NULL DEFAULT '';
CREATE INDEX usage_records_end_user_at ON usage_records (end_user, at);
ALTER TABLE budgets DROP CONSTRAINT budgets_subject_type_check;
ALTER TABLE budgets ADD CONSTRAINT budgets_subject_type_check
    CHECK (subject_type IN ('key', 'group', 'model', 'platform_model', 'user'));

-- +goose Down
DELETE FROM budgets WHERE subject_type = 'user';
ALTER TABLE budgets DROP CONSTRAINT budgets_subject_type_check;
ALTER TABLE budgets ADD CONSTRAINT budgets_subject_type_check
    CHECK (subject_type IN ('key', 'group', 'model', 'platform_model'));
DROP INDEX usage_records_end_user_at;
ALTER TABLE spend_reservations DROP COLUMN end_user;
ALTER TABLE usage_records DROP COLUMN end_user;
