package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/riverqueue/river/riverdriver"

	"github.com/weir-gateway/weir/riverjob"
)

// RiverDriver returns River's driver on the write connection, so that a
// transaction from InTx carries a task's change and its job together.
func (db *DB) RiverDriver() riverdriver.Driver[*sql.Tx] { return db.river }

// JobReclaimRunning makes every job of the given kinds that is marked
// running available again at once, recording in its errors that its
// process stopped mid-step, and returns how many it changed
// (riverjob.Reclaim). It is right only where no process is running this
// database's jobs: call it before River's client starts, in the only
// process that runs them.
func (db *DB) JobReclaimRunning(ctx context.Context, kinds []string) (int, error) {
	return riverjob.Reclaim(ctx, db.river, riverjob.ReclaimParams{Kinds: kinds, Why: riverjob.WhyRestarted, Now: time.Now()})
}
