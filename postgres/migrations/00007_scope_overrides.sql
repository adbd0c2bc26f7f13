-- What was set at run time for a scope beside the catalog
-- (weir.Override): an operator's drain of a platform model (kind drain)
-- or limit on a scope (kind limit, limit_value), or the pause an
-- upstream asked for (kind pause, until ends_at). One of each kind per
-- scope; ends_at is NULL but for a pause. Every replica of a fleet reads
-- them, so that what one replica set holds, and is reported, on all.
--
-- scope's collation is "C" so that the listing order is byte by byte,
-- as in the SQLite store.

-- +goose Up
CREATE TABLE scope_overrides (
    scope       text        COLLATE "C" NOT NULL CHECK (scope <> ''),
    kind        text        NOT NULL CHECK (kind IN ('drain', 'limit', 'pause')),
    limit_value bigint      NOT NULL DEFAULT 0 CHECK (limit_value >= 0),
    ends_at     timestamptz,
    set_at      timestamptz NOT NULL,
    PRIMARY KEY (scope, kind)
);

-- +goose Down
DROP TABLE scope_overrides;
