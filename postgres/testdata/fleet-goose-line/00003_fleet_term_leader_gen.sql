-- The generation of the replica that holds the term.

-- +goose Up

-- leader_gen is the leader's registration (weir_fleet_replicas.gen) when
-- it took the term, 0 if it had none: a restarted replica of the same id,
-- registered anew with a greater generation, takes the term of its dead
-- predecessor at once instead of waiting out its expiry.
ALTER TABLE weir_fleet_term ADD COLUMN leader_gen bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE weir_fleet_term DROP COLUMN leader_gen;
