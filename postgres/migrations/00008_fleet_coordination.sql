-- The fleet's election and liveness (fleet.Coordination; postgres/coord.go).
-- Every time in these tables is PostgreSQL's own (now()); no replica's
-- wall clock is ever written here.
--
-- Migrations 00008 to 00011 are the fleet's tables. Databases migrated by
-- an earlier Weir have them already: there the fleet kept a goose line of
-- its own (table weir_fleet_goose_version, migrations 1 to 4), which these
-- four replace, in order. So each step makes only what is missing — IF
-- NOT EXISTS, or a check of the catalog — and on such a database changes
-- nothing, and goose records it as applied. weir_fleet_goose_version is
-- left as it is, so that a replica of the earlier version started during
-- a rolling upgrade finds its migrations applied; nothing here reads it.

-- +goose Up

-- The one term: who leads (leader, addr) under which epoch, until when.
-- Epoch 0 with an expiry in the past is "no term yet". Only a campaign
-- raises the epoch, and only once expires_at <= now().
CREATE TABLE IF NOT EXISTS weir_fleet_term (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch      bigint      NOT NULL CHECK (epoch >= 0),
    leader     text        NOT NULL,
    addr       text        NOT NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO weir_fleet_term (epoch, leader, addr, expires_at)
VALUES (0, '', '', 'epoch')
ON CONFLICT (singleton) DO NOTHING;

-- Generations come from one sequence, so a replica id registered again,
-- even after its row was forgotten, never gets a generation it had before.
CREATE SEQUENCE IF NOT EXISTS weir_fleet_replica_gen AS bigint;

CREATE TABLE IF NOT EXISTS weir_fleet_replicas (
    id           text        PRIMARY KEY CHECK (id <> ''),
    gen          bigint      NOT NULL CHECK (gen > 0),
    addr         text        NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS weir_fleet_replicas_heartbeat ON weir_fleet_replicas (heartbeat_at);

-- A new epoch or an ended term (resigned: expires_at moved back) is
-- announced in the updating transaction itself. The channel is named
-- after the table's schema, so fleets in two schemas of one database do
-- not wake each other; the listener computes the same name
-- (termChannelSQL in postgres/listen.go).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION weir_fleet_term_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('weir_fleet_term_' || to_hex(hashtext(TG_TABLE_SCHEMA::text)), NEW.epoch::text);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'weir_fleet_term_notify' AND tgrelid = 'weir_fleet_term'::regclass) THEN
        CREATE TRIGGER weir_fleet_term_notify
        AFTER UPDATE ON weir_fleet_term
        FOR EACH ROW
        WHEN (NEW.epoch <> OLD.epoch OR NEW.expires_at < OLD.expires_at)
        EXECUTE FUNCTION weir_fleet_term_notify();
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER IF EXISTS weir_fleet_term_notify ON weir_fleet_term;
DROP FUNCTION IF EXISTS weir_fleet_term_notify();
DROP TABLE IF EXISTS weir_fleet_replicas;
DROP SEQUENCE IF EXISTS weir_fleet_replica_gen;
DROP TABLE IF EXISTS weir_fleet_term;
