package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/fleet"
)

// The fleet's coordination (fleet.Coordination) on PostgreSQL: its
// contract is in package fleet (coordination.go); how PostgreSQL keeps it
// is here.
//
// Who decides: one row, weir_fleet_term. A campaign locks the row first
// (SELECT … FOR UPDATE) and then updates it only where the contract lets
// it, in one batch, one implicit transaction: of any number of
// concurrent campaigners exactly one takes it, and a loser reads the
// winner's term rather than the expired one its snapshot held. A trigger
// NOTIFYs each new epoch and each resignation (expires_at moved back) in
// the updating transaction, on a channel named after the tables' schema
// (migration 00008), so that fleets in two schemas of one database do
// not wake each other.
//
// Fencing (fence.go): a fenced write (ReplicaForget; TermFenceTx in a
// task store transaction) locks the term row FOR KEY SHARE, which a
// campaign's FOR UPDATE waits for. Renewal is a plain update and does
// not wait for fenced writes. Keep fenced transactions short: a campaign
// waits for them.
//
// Every comparison of times — expiry, heartbeat age, a board offer's age
// — uses PostgreSQL's now(), and durations pass as whole microseconds,
// the resolution of timestamptz. Generations come from one sequence, so
// they only grow, across restarts and forgetting alike.

var (
	_ fleet.Coordination = (*DB)(nil)
	_ fleet.NodeBoard    = (*DB)(nil)
)

// micros passes a duration to SQL as whole microseconds.
func micros(d time.Duration) int64 { return d.Microseconds() }

// leftSQL is how long the term row has left, in microseconds, never below 0.
const leftSQL = `greatest(0, floor(extract(epoch FROM expires_at - now()) * 1000000))::bigint`

// errNoTermRow is the error for a schema whose term row is missing.
var errNoTermRow = errors.New("the term row is missing: the fleet's migrations have not run (postgres.Open runs them)")

// ReplicaRegister implements fleet.Registry. A registration that
// supersedes its id's older one keeps the greater catalog version: the
// versions a replica serves only grow (each run starts on the fleet's
// newest), and the new process may have recorded a newer one on the
// older row (CatalogServing) after it read the one it registers with.
func (db *DB) ReplicaRegister(ctx context.Context, p *fleet.ReplicaRegisterParams) (uint64, error) {
	if p.CatalogVersion < 0 {
		return 0, fmt.Errorf("%w: catalog version %d", weir.ErrInvalid, p.CatalogVersion)
	}
	var gen int64
	err := db.pool.QueryRow(ctx, `
		INSERT INTO weir_fleet_replicas AS r (id, gen, addr, workers, started_at, heartbeat_at, catalog_version)
		VALUES ($1, nextval('weir_fleet_replica_gen'), $2, $3, now(), now(), $4)
		ON CONFLICT (id) DO UPDATE
		SET gen = EXCLUDED.gen, addr = EXCLUDED.addr, workers = EXCLUDED.workers,
		    started_at = now(), heartbeat_at = now(),
		    catalog_version = greatest(r.catalog_version, EXCLUDED.catalog_version)
		WHERE r.gen < EXCLUDED.gen
		RETURNING gen`, p.ID, p.Addr, p.Workers, p.CatalogVersion).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fleet.ErrFenced
	}
	if err != nil {
		return 0, err
	}
	return uint64(gen), nil
}

// ReplicaHeartbeat implements fleet.Registry.
func (db *DB) ReplicaHeartbeat(ctx context.Context, id string, gen uint64) error {
	g, err := toInt64("generation", gen)
	if err != nil {
		return err
	}
	tag, err := db.pool.Exec(ctx, `UPDATE weir_fleet_replicas SET heartbeat_at = now() WHERE id = $1 AND gen = $2`, id, g)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fleet.ErrFenced
	}
	return nil
}

// ReplicaLeave implements fleet.Registry.
func (db *DB) ReplicaLeave(ctx context.Context, id string, gen uint64) error {
	g, err := toInt64("generation", gen)
	if err != nil {
		return err
	}
	_, err = db.pool.Exec(ctx, `DELETE FROM weir_fleet_replicas WHERE id = $1 AND gen = $2`, id, g)
	return err
}

// TermCampaign implements fleet.Election in one round trip: the row lock
// and the update go in one batch, one implicit transaction.
func (db *DB) TermCampaign(ctx context.Context, p *fleet.TermCampaignParams) (fleet.Term, bool, error) {
	gen, err := toInt64("generation", p.Gen)
	if err != nil {
		return fleet.Term{}, false, err
	}
	early := int64(-1) // no epoch is -1: a plain campaign takes no term early
	if p.TakeOver {
		if early, err = toInt64("epoch", p.Epoch); err != nil {
			return fleet.Term{}, false, err
		}
	}
	// The row lock comes first, for two reasons: a campaigner that loses
	// reads the winner's term rather than the expired one its snapshot
	// held, and FOR UPDATE waits for every fenced transaction (FOR KEY
	// SHARE), which the UPDATE's own weaker row lock would not.
	b := &pgx.Batch{}
	var cur fleet.Term
	var curEpoch, curLeft int64
	b.Queue(`SELECT epoch, leader, addr, ` + leftSQL + ` FROM weir_fleet_term FOR UPDATE`).
		QueryRow(func(row pgx.Row) error {
			return row.Scan(&curEpoch, &cur.Leader, &cur.Addr, &curLeft)
		})
	var won bool
	var newEpoch int64
	b.Queue(`
		UPDATE weir_fleet_term
		SET epoch = epoch + 1, leader = $1, addr = $2, expires_at = now() + $3 * interval '1 microsecond', leader_gen = $4
		WHERE expires_at <= now() OR (leader = $1 AND leader_gen < $4)
		   OR (epoch = $5 AND leader_gen > 0 AND NOT `+lifeHeldSQL("leader_gen")+`)
		RETURNING epoch`, p.Replica, p.Addr, micros(p.TTL), gen, early).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&newEpoch)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			won = err == nil
			return err
		})
	if err := db.pool.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = errNoTermRow
		}
		return fleet.Term{}, false, err
	}
	if won {
		return fleet.Term{Epoch: uint64(newEpoch), Leader: p.Replica, Addr: p.Addr, Left: p.TTL}, true, nil
	}
	cur.Epoch = uint64(curEpoch)
	cur.Left = time.Duration(curLeft) * time.Microsecond
	return cur, false, nil
}

// TermRenew implements fleet.Election.
func (db *DB) TermRenew(ctx context.Context, p *fleet.TermRenewParams) (bool, error) {
	e, err := toInt64("epoch", p.Epoch)
	if err != nil {
		return false, err
	}
	tag, err := db.pool.Exec(ctx, `
		UPDATE weir_fleet_term SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE epoch = $1 AND leader = $2 AND expires_at > now()`,
		e, p.Leader, micros(p.TTL))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// TermResign implements fleet.Election.
func (db *DB) TermResign(ctx context.Context, epoch uint64, leader string) error {
	e, err := toInt64("epoch", epoch)
	if err != nil {
		return err
	}
	_, err = db.pool.Exec(ctx, `
		UPDATE weir_fleet_term SET expires_at = now()
		WHERE epoch = $1 AND leader = $2 AND expires_at > now()`, e, leader)
	return err
}

// TermGet implements fleet.Election.
func (db *DB) TermGet(ctx context.Context) (fleet.Term, error) {
	var t fleet.Term
	var epoch, left int64
	err := db.pool.QueryRow(ctx, `SELECT epoch, leader, addr, `+leftSQL+` FROM weir_fleet_term`).
		Scan(&epoch, &t.Leader, &t.Addr, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return fleet.Term{}, errNoTermRow
	}
	if err != nil {
		return fleet.Term{}, err
	}
	t.Epoch = uint64(epoch)
	t.Left = time.Duration(left) * time.Microsecond
	return t, nil
}

// ReplicaList implements fleet.Liveness.
func (db *DB) ReplicaList(ctx context.Context, p *fleet.ReplicaListParams) ([]fleet.Replica, error) {
	where := `heartbeat_at > now() - $1 * interval '1 microsecond'`
	if p.Lapsed {
		where = `heartbeat_at <= now() - $1 * interval '1 microsecond'`
	}
	rows, err := db.pool.Query(ctx, `
		SELECT id, gen, addr, workers, floor(extract(epoch FROM now() - heartbeat_at) * 1000000)::bigint, `+lifeHeldSQL("gen")+`
		FROM weir_fleet_replicas WHERE `+where+` ORDER BY id`, micros(p.Timeout))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (fleet.Replica, error) {
		var r fleet.Replica
		var gen, age int64
		err := row.Scan(&r.ID, &gen, &r.Addr, &r.Workers, &age, &r.Session)
		r.Gen = uint64(gen)
		r.HeartbeatAge = time.Duration(age) * time.Microsecond
		return r, err
	})
}

// ReplicaForget implements fleet.Liveness: the fence and the delete are
// one statement.
func (db *DB) ReplicaForget(ctx context.Context, p *fleet.ReplicaForgetParams) (bool, error) {
	e, err := toInt64("epoch", p.Epoch)
	if err != nil {
		return false, err
	}
	g, err := toInt64("generation", p.Gen)
	if err != nil {
		return false, err
	}
	tag, err := db.pool.Exec(ctx, `
		DELETE FROM weir_fleet_replicas r
		USING (`+fenceSQL+`) AS fence
		WHERE r.id = $3 AND r.gen = $4
		  AND r.heartbeat_at <= now() - $5 * interval '1 microsecond'`,
		e, p.Leader, p.ID, g, micros(p.Timeout))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// SecretEnsure implements fleet.Secrets in two statements: a SELECT in
// the INSERT's own statement would not see a row that a concurrent first
// call committed while the INSERT waited for it.
func (db *DB) SecretEnsure(ctx context.Context, candidate string) (string, error) {
	if _, err := db.pool.Exec(ctx, `INSERT INTO weir_fleet_secret (secret) VALUES ($1)
		ON CONFLICT (singleton) DO NOTHING`, candidate); err != nil {
		return "", fmt.Errorf("make the fleet's secret: %w", err)
	}
	var secret string
	if err := db.pool.QueryRow(ctx, `SELECT secret FROM weir_fleet_secret`).Scan(&secret); err != nil {
		return "", fmt.Errorf("read the fleet's secret: %w", err)
	}
	return secret, nil
}
