package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

// reclaimBatch is how many jobs one round of JobReclaimRunning reads.
const reclaimBatch = 1000

// reclaimError is the error recorded in each job JobReclaimRunning makes
// available again.
const reclaimError = "the process running this job stopped mid-step; reclaimed when it started again"

// RiverDriver returns River's pgx driver on the pool, so that a
// transaction from InTx carries a task's change and its job together.
func (db *DB) RiverDriver() riverdriver.Driver[pgx.Tx] { return db.river }

// RiverMigrate brings River's tables up to date: it applies River's
// migrations not yet applied, on River's own migration line
// (rivermigrate) beside Weir's, in the schema the DSN's search_path
// names. Open leaves them to it, since only a process that runs tasks
// needs them.
func (db *DB) RiverMigrate(ctx context.Context) error {
	m, err := rivermigrate.New(db.river, nil)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// JobReclaimRunning makes every job of the given kinds that is marked
// running available again at once, recording in its errors that its
// process stopped mid-step, and returns how many it changed. It is River's
// rescue without the wait for RescueStuckJobsAfter, and right only where
// no process is running this database's jobs: on PostgreSQL, where other
// replicas may be running theirs, a replica must not call it (task.Config
// SoleRunner false), and River's rescue takes the jobs of a dead one back.
// The attempt a job was in stays counted.
//
// No public River API makes a running job available (JobRetry leaves
// running jobs alone), so this uses River's driver executor, which River
// does not promise to keep stable; TestJobReclaimRunning pins what it does.
func (db *DB) JobReclaimRunning(ctx context.Context, kinds []string) (int, error) {
	exec := db.river.GetExecutor()
	// Every job running now was attempted before now.
	horizon := time.Now().UTC()
	reclaimed := 0
	for after := int64(0); ; {
		jobs, err := exec.JobGetStuck(ctx, &riverdriver.JobGetStuckParams{AfterID: after, Max: reclaimBatch, StuckHorizon: horizon})
		if err != nil {
			return reclaimed, fmt.Errorf("list jobs left running: %w", err)
		}
		p := riverdriver.JobRescueManyParams{StuckHorizon: horizon}
		for _, j := range jobs {
			after = j.ID
			if !slices.Contains(kinds, j.Kind) {
				continue
			}
			e, err := json.Marshal(rivertype.AttemptError{At: horizon, Attempt: max(j.Attempt, 0), Error: reclaimError})
			if err != nil {
				return reclaimed, err
			}
			p.ID = append(p.ID, j.ID)
			p.Error = append(p.Error, e)
			p.FinalizedAt = append(p.FinalizedAt, nil)
			p.ScheduledAt = append(p.ScheduledAt, horizon)
			p.State = append(p.State, string(rivertype.JobStateAvailable))
		}
		if len(p.ID) > 0 {
			if _, err := exec.JobRescueMany(ctx, &p); err != nil {
				return reclaimed, fmt.Errorf("reclaim jobs left running: %w", err)
			}
			reclaimed += len(p.ID)
		}
		if len(jobs) < reclaimBatch {
			return reclaimed, nil
		}
	}
}
