-- The fleet's catalog (weir.CatalogVersion): each version published, the
-- newest being the one every replica serves. The document is the config
-- file's catalog sections with their environment references unresolved,
-- so the table holds no secret. Versions are numbered by the publisher
-- under a lock of the table (postgres/catalog.go), 1, 2, 3, …; old ones
-- are kept as the fleet's history of who published what and when.

-- +goose Up
CREATE TABLE catalog_versions (
    version      bigint      PRIMARY KEY CHECK (version > 0),
    hash         text        NOT NULL CHECK (hash <> ''),
    document     text        NOT NULL,
    published_by text        NOT NULL CHECK (published_by <> ''),
    published_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE catalog_versions;
