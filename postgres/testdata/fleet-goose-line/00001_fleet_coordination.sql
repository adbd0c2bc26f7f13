-- The fleet's election and liveness. Every time in these tables is
-- PostgreSQL's own (now()); no replica's wall clock is ever written here.

-- +goose Up

-- The one term: who leads (leader, addr) under which epoch, until when.
-- Epoch 0 with an expiry in the past is "no term yet". Only a campaign
-- raises the epoch, and only once expires_at <= now().
CREATE TABLE weir_fleet_term (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch      bigint      NOT NULL CHECK (epoch >= 0),
    leader     text        NOT NULL,
    addr       text        NOT NULL,
    expires_at timestamptz NOT NULL
);
INSERT INTO weir_fleet_term (epoch, leader, addr, expires_at)
VALUES (0, '', '', 'epoch');

-- Generations come from one sequence, so a replica id registered again,
-- even after its row was forgotten, never gets a generation it had before.
CREATE SEQUENCE weir_fleet_replica_gen AS bigint;

CREATE TABLE weir_fleet_replicas (
    id           text        PRIMARY KEY CHECK (id <> ''),
    gen          bigint      NOT NULL CHECK (gen > 0),
    addr         text        NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
CREATE INDEX weir_fleet_replicas_heartbeat ON weir_fleet_replicas (heartbeat_at);

-- A new epoch or an ended term (resigned: expires_at moved back) is
-- announced in the updating transaction itself. The channel is named
-- after the table's schema, so fleets in two schemas of one database do
-- not wake each other; the listener computes the same name (listenChannelSQL
-- in fleet/elect_listen.go).
-- +goose StatementBegin
CREATE FUNCTION weir_fleet_term_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('weir_fleet_term_' || to_hex(hashtext(TG_TABLE_SCHEMA::text)), NEW.epoch::text);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER weir_fleet_term_notify
AFTER UPDATE ON weir_fleet_term
FOR EACH ROW
WHEN (NEW.epoch <> OLD.epoch OR NEW.expires_at < OLD.expires_at)
EXECUTE FUNCTION weir_fleet_term_notify();

-- +goose Down
DROP TRIGGER weir_fleet_term_notify ON weir_fleet_term;
DROP FUNCTION weir_fleet_term_notify();
DROP TABLE weir_fleet_replicas;
DROP SEQUENCE weir_fleet_replica_gen;
DROP TABLE weir_fleet_term;
