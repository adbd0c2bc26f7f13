-- What was set at run time for a scope beside the catalog
-- (weir.Override): an operator's drain of a platform model (kind drain)
-- or limit on a scope (kind limit, limit_value), or the pause an
-- upstream asked for (kind pause, until ends_at). One of each kind per
-- scope; ends_at is NULL but for a pause. Times are as in api_keys, whose
-- text order is time order. scope is compared byte by byte (BINARY),
-- which is also the listing order.

-- +goose Up
CREATE TABLE scope_overrides (
    scope       TEXT    NOT NULL CHECK (scope <> ''),
    kind        TEXT    NOT NULL CHECK (kind IN ('drain', 'limit', 'pause')),
    limit_value INTEGER NOT NULL DEFAULT 0 CHECK (limit_value >= 0),
    ends_at     TEXT,
    set_at      TEXT    NOT NULL,
    PRIMARY KEY (scope, kind)
) STRICT;

-- +goose Down
DROP TABLE scope_overrides;
