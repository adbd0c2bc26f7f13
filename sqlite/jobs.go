package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
)

// reclaimBatch is how many jobs one round of JobReclaimRunning reads.
const reclaimBatch = 1000

// reclaimError is the error recorded in each job JobReclaimRunning makes
// available again.
const reclaimError = "the process running this job stopped mid-step; reclaimed when it started again"

// RiverDriver returns River's driver on the write connection, so that a
// transaction from InTx carries a task's change and its job together.
func (db *DB) RiverDriver() riverdriver.Driver[*sql.Tx] { return db.river }

// JobReclaimRunning makes every job of the given kinds that is marked
// running available again at once, recording in its errors that its
// process stopped mid-step, and returns how many it changed. It is River's
// rescue without the wait for RescueStuckJobsAfter, and right only where
// no process is running this database's jobs: call it before River's
// client starts, in the only process that runs them. The attempt a job
// was in stays counted.
//
// No public River API makes a running job available (JobRetry leaves
// running jobs alone), so this uses River's driver executor, which River
// does not promise to keep stable; TestJobReclaimRunning pins what it does.
func (db *DB) JobReclaimRunning(ctx context.Context, kinds []string) (int, error) {
	exec := db.river.GetExecutor()
	// River compares attempted_at with the horizon as text, in UTC; every
	// job running now was attempted before now.
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
