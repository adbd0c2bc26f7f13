-- What each replica brings to the fleet's task workers, and the secret
-- that authenticates replicas to each other when none is configured.
-- Each step makes only what is missing: see 00008.

-- +goose Up

-- workers is the replica's task worker count: the leader sets the
-- fleet's workers scope to the sum over live replicas.
ALTER TABLE weir_fleet_replicas
    ADD COLUMN IF NOT EXISTS workers integer NOT NULL DEFAULT 0 CHECK (workers >= 0);

-- One secret for the fleet, made by the first replica that needs it.
-- Whoever can read it can write the fleet's tables too: it adds nothing
-- a database credential does not already give.
CREATE TABLE IF NOT EXISTS weir_fleet_secret (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    secret    text    NOT NULL CHECK (length(secret) >= 32)
);

-- +goose Down
DROP TABLE IF EXISTS weir_fleet_secret;
ALTER TABLE weir_fleet_replicas DROP COLUMN IF EXISTS workers;
