package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/riverjob"
)

// RiverDriver returns River's pgx driver on the pool, so that a
// transaction from InTx carries a task's change and its job together.
func (db *DB) RiverDriver() riverdriver.Driver[pgx.Tx] { return db.river }

// JobReclaimRunning makes every job of the given kinds that is marked
// running available again at once, recording in its errors that its
// process stopped mid-step, and returns how many it changed
// (riverjob.Reclaim). It is right only where no process is running this
// database's jobs: on PostgreSQL, where other replicas may be running
// theirs, a replica must not call it (task.Config SoleRunner false);
// JobReclaimAttemptedBy takes back one dead replica's.
func (db *DB) JobReclaimRunning(ctx context.Context, kinds []string) (int, error) {
	return riverjob.Reclaim(ctx, db.river, riverjob.ReclaimParams{Kinds: kinds, Why: riverjob.WhyRestarted, Now: time.Now()})
}

// JobReclaimAttemptedBy makes every job of the given kinds that is marked
// running in an attempt of River's client client (river.Config.ID: the
// last of the job's attempted_by) available again at once, recording in
// its errors that its runner was declared gone, and returns how many it
// changed. It is for the fleet: when a replica's heartbeats have lapsed
// and it is fenced, its jobs go to the others at once rather than after
// RescueStuckJobsAfter.
func (db *DB) JobReclaimAttemptedBy(ctx context.Context, client string, kinds []string) (int, error) {
	if client == "" {
		return 0, fmt.Errorf("reclaim jobs: %w: no client id", weir.ErrInvalid)
	}
	return riverjob.Reclaim(ctx, db.river, riverjob.ReclaimParams{Kinds: kinds, Client: client, Why: riverjob.WhyFenced, Now: time.Now()})
}
