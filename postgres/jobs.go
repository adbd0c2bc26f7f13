package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/weir-gateway/weir"
)

// reclaimBatch is how many jobs one round of JobReclaimRunning reads.
const reclaimBatch = 1000

// reclaimError is the error recorded in each job JobReclaimRunning makes
// available again.
const reclaimError = "the process running this job stopped mid-step; reclaimed when it started again"

// reclaimFromError is the error recorded in each job
// JobReclaimAttemptedBy makes available again.
const reclaimFromError = "the replica running this job was declared gone mid-step; reclaimed for the others"

// RiverDriver returns River's pgx driver on the pool, so that a
// transaction from InTx carries a task's change and its job together.
func (db *DB) RiverDriver() riverdriver.Driver[pgx.Tx] { return db.river }

// JobReclaimRunning makes every job of the given kinds that is marked
// running available again at once, recording in its errors that its
// process stopped mid-step, and returns how many it changed. It is River's
// rescue without the wait for RescueStuckJobsAfter, and right only where
// no process is running this database's jobs: on PostgreSQL, where other
// replicas may be running theirs, a replica must not call it (task.Config
// SoleRunner false); JobReclaimAttemptedBy takes back one dead replica's.
// The attempt a job was in stays counted.
//
// No public River API makes a running job available (JobRetry leaves
// running jobs alone), so this uses River's driver executor, which River
// does not promise to keep stable; TestJobReclaimRunning pins what it does.
func (db *DB) JobReclaimRunning(ctx context.Context, kinds []string) (int, error) {
	return db.reclaim(ctx, kinds, reclaimError, func(*rivertype.JobRow) bool { return true })
}

// JobReclaimAttemptedBy makes every job of the given kinds that is marked
// running in an attempt of River's client client (river.Config.ID: the
// last of the job's attempted_by) available again at once, recording in
// its errors that its runner was declared gone, and returns how many it
// changed. It is for the fleet: when a replica's heartbeats have lapsed
// and it is fenced, its jobs go to the others at once rather than after
// RescueStuckJobsAfter. Only jobs attempted before the call are changed,
// and only if still running (River's rescue is a compare-and-set on
// both), so a job that another client has fetched meanwhile is left
// alone. The attempt a job was in stays counted.
func (db *DB) JobReclaimAttemptedBy(ctx context.Context, client string, kinds []string) (int, error) {
	if client == "" {
		return 0, fmt.Errorf("reclaim jobs: %w: no client id", weir.ErrInvalid)
	}
	return db.reclaim(ctx, kinds, reclaimFromError, func(j *rivertype.JobRow) bool {
		return len(j.AttemptedBy) > 0 && j.AttemptedBy[len(j.AttemptedBy)-1] == client
	})
}

// reclaim makes the running jobs of the given kinds that match available
// at once, with why in their errors, and returns how many it changed.
func (db *DB) reclaim(ctx context.Context, kinds []string, why string, match func(*rivertype.JobRow) bool) (int, error) {
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
			if !slices.Contains(kinds, j.Kind) || !match(j) {
				continue
			}
			e, err := json.Marshal(rivertype.AttemptError{At: horizon, Attempt: max(j.Attempt, 0), Error: why})
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
