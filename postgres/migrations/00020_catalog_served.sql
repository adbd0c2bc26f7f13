-- The catalog version each registered replica serves, so that a
-- publication keeps it while pruning old versions (postgres/catalog.go):
-- the newest catalogKept versions are kept, and any a registered replica
-- still reports. Additive: a replica of an older release writes nothing
-- here (0, no version), and keeps working beside a newer one.

-- +goose Up
ALTER TABLE weir_fleet_replicas
    ADD COLUMN IF NOT EXISTS catalog_version bigint NOT NULL DEFAULT 0 CHECK (catalog_version >= 0);

-- +goose Down
ALTER TABLE weir_fleet_replicas DROP COLUMN IF EXISTS catalog_version;
