-- The spend journal (weir.Reservation): the estimated cost of each request
-- admitted and not yet ended, in billionths of the currency (weir.Money).
-- A request's usage record deletes its row in the same transaction; a row
-- left by a process that died is turned into a usage record at its
-- estimate (Store.SpendRecover), oldest first, by the index on (at,
-- request_id). Times are as in usage_records, whose text order is time
-- order. key_id references api_keys as usage_records does, so that what is
-- journaled can always be recorded; the table holds only requests in
-- flight, so the foreign key needs no index of its own.

-- +goose Up
CREATE TABLE spend_reservations (
    request_id     TEXT    NOT NULL PRIMARY KEY CHECK (request_id <> ''),
    key_id         TEXT    NOT NULL REFERENCES api_keys (id),
    group_name     TEXT    NOT NULL,
    model          TEXT    NOT NULL,
    platform_model TEXT    NOT NULL,
    estimate       INTEGER NOT NULL CHECK (estimate >= 0),
    at             TEXT    NOT NULL
) STRICT;

CREATE INDEX spend_reservations_at ON spend_reservations (at, request_id);

-- +goose Down
DROP TABLE spend_reservations;
