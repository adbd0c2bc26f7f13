-- Budgets set through the admin API and the CLI (weir.Budget; the config
-- file's are the catalog's): an amount in billionths of the currency
-- (weir.Money) that a subject may spend per window. A calendar window has
-- its unit and zone ('' is UTC), every_s 0 and no anchor; a rolling one
-- has unit '', its period in seconds and its anchor. A subject has one
-- budget per window length (unit, or period), so a day's and a month's
-- may stand side by side. alerts are the thresholds in percent, ascending,
-- comma-separated ('' none). Times are as in api_keys, whose text order
-- is time order; names compare byte by byte (BINARY), the listing order.
--
-- budget_alerts records each alert sent, one per budget, window (by its
-- start) and threshold, so that one replica of a fleet sends it. It has
-- no foreign key: the config file's budgets alert too.

-- +goose Up
CREATE TABLE budgets (
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

CREATE TABLE budget_alerts (
    budget_id   TEXT    NOT NULL,
    window_from TEXT    NOT NULL,
    threshold   INTEGER NOT NULL CHECK (threshold BETWEEN 1 AND 1000),
    sent_at     TEXT    NOT NULL,
    PRIMARY KEY (budget_id, window_from, threshold)
) STRICT;

-- +goose Down
DROP TABLE budget_alerts;
DROP TABLE budgets;
