-- End users (weir.Usage.EndUser): the customer of the operator's app a
-- request named (its user, safety_identifier or metadata.user_id), ''
-- none, in each usage record and each reservation of the spend journal,
-- so that a recovered reservation counts against its end user too. Rows
-- made before name none. The index serves spend by end user over a
-- window of time, as usage_records_group_at does by group.
--
-- budgets may have end users for subjects ('user', an end user's id or
-- '*' for every end user apart): SQLite cannot change a CHECK, so the
-- table is made again with the same rows.

-- +goose Up
ALTER TABLE usage_records ADD COLUMN end_user TEXT NOT NULL DEFAULT '';
ALTER TABLE spend_reservations ADD COLUMN end_user TEXT NOT NULL DEFAULT '';
CREATE INDEX usage_records_end_user_at ON usage_records (end_user, at);

CREATE TABLE budgets_next (
    id            TEXT    PRIMARY KEY CHECK (id <> ''),
    subject_type  TEXT    NOT NULL CHECK (subject_type IN ('key', 'group', 'model', 'platform_model', 'user')),
    subject_name  TEXT    NOT NULL CHECK (subject_name <> ''),
    amount        INTEGER NOT NULL CHECK (amount > 0),
    window_unit   TEXT    NOT NULL CHECK (window_unit IN ('', 'day', 'week', 'month')),
    window_every_s INTEGER NOT NULL CHECK (window_every_s >= 0),
    window_zone   TEXT    NOT NULL DEFAULT '',
    window_anchor TEXT,
    mode          TEXT    NOT NULL CHECK (mode IN ('hard', 'soft', 'shadow')),
    alerts        TEXT    NOT NULL DEFAULT '',
    created_at    TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL,
    UNIQUE (subject_type, subject_name, window_unit, window_every_s)
) STRICT;
INSERT INTO budgets_next SELECT * FROM budgets;
DROP TABLE budgets;
ALTER TABLE budgets_next RENAME TO budgets;

-- +goose Down
CREATE TABLE budgets_prev (
    id            TEXT    PRIMARY KEY CHECK (id <> ''),
    subject_type  TEXT    NOT NULL CHECK (subject_type IN ('key', 'group', 'model', 'platform_model')),
    subject_name  TEXT    NOT NULL CHECK (subject_name <> ''),
    amount        INTEGER NOT NULL CHECK (amount > 0),
    window_unit   TEXT    NOT NULL CHECK (window_unit IN ('', 'day', 'week', 'month')),
    window_every_s INTEGER NOT NULL CHECK (window_every_s >= 0),
    window_zone   TEXT    NOT NULL DEFAULT '',
    window_anchor TEXT,
    mode          TEXT    NOT NULL CHECK (mode IN ('hard', 'soft', 'shadow')),
    alerts        TEXT    NOT NULL DEFAULT '',
    created_at    TEXT    NOT NULL,
    updated_at    TEXT    NOT NULL,
    UNIQUE (subject_type, subject_name, window_unit, window_every_s)
) STRICT;
INSERT INTO budgets_prev SELECT * FROM budgets WHERE subject_type <> 'user';
DROP TABLE budgets;
ALTER TABLE budgets_prev RENAME TO budgets;
DROP INDEX usage_records_end_user_at;
ALTER TABLE spend_reservations DROP COLUMN end_user;
ALTER TABLE usage_records DROP COLUMN end_user;
