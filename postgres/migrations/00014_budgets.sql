-- Budgets set through the admin API and the CLI (weir.Budget; the config
-- file's are the catalog's): an amount in billionths of the currency
-- (weir.Money) that a subject may spend per window. A calendar window has
-- its unit and zone ('' is UTC), every_s 0 and no anchor; a rolling one
-- has unit '', its period in seconds and its anchor. A subject has one
-- budget per window length (unit, or period), so a day's and a month's
-- may stand side by side. alerts are the thresholds in percent, ascending.
-- Every replica of a fleet reads them, so a budget raised through one
-- holds on all.
--
-- budget_alerts records each alert sent, one per budget, window (by its
-- start) and threshold, so that one replica of a fleet sends it. It has
-- no foreign key: the config file's budgets alert too.
--
-- Names and ids are collated "C" so that the listing order is byte by
-- byte, as in the SQLite store.

-- +goose Up
CREATE TABLE budgets (
    id             text        COLLATE "C" PRIMARY KEY CHECK (id <> ''),
    subject_type   text        COLLATE "C" NOT NULL CHECK (subject_type IN ('key', 'group', 'model', 'platform_model')),
    subject_name   text        COLLATE "C" NOT NULL CHECK (subject_name <> ''),
    amount         bigint      NOT NULL CHECK (amount > 0),
    window_unit    text        NOT NULL CHECK (window_unit IN ('', 'day', 'week', 'month')),
    window_every_s bigint      NOT NULL CHECK (window_every_s >= 0),
    window_zone    text        NOT NULL DEFAULT '',
    window_anchor  timestamptz,
    mode           text        NOT NULL CHECK (mode IN ('hard', 'soft', 'shadow')),
    alerts         integer[]   NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    UNIQUE (subject_type, subject_name, window_unit, window_every_s)
);

CREATE TABLE budget_alerts (
    budget_id   text        NOT NULL,
    window_from timestamptz NOT NULL,
    threshold   integer     NOT NULL CHECK (threshold BETWEEN 1 AND 1000),
    sent_at     timestamptz NOT NULL,
    PRIMARY KEY (budget_id, window_from, threshold)
);

-- +goose Down
DROP TABLE budget_alerts;
DROP TABLE budgets;
