package task

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
)

// reclaimBatch is how many jobs one round of reclaim reads.
const reclaimBatch = 1000

// reclaim makes the jobs that an earlier run of this process left running
// — it was killed mid-step — available again at once. River's rescuer
// would do the same, but only once a job has looked running for
// RescueAfter (a minute at least), and a task's job spends most of its
// life running: it waits for its next poll in process (see follow). It is
// only right where no other process runs this store's jobs (SoleRunner):
// a running job is then certainly an orphan. Like a rescue, it counts as
// an attempt, and it is recorded in the job's errors.
func (s *Service) reclaim(ctx context.Context) (int, error) {
	exec := riversqlite.New(s.store.SQL()).GetExecutor()
	// River compares attempted_at with the horizon as text, in UTC; every
	// job running now was attempted before the process started.
	horizon := time.Now().UTC()
	kinds := map[string]bool{RunArgs{}.Kind(): true, WebhookArgs{}.Kind(): true}
	reclaimed := 0
	for after := int64(0); ; {
		jobs, err := exec.JobGetStuck(ctx, &riverdriver.JobGetStuckParams{AfterID: after, Max: reclaimBatch, StuckHorizon: horizon})
		if err != nil {
			return reclaimed, fmt.Errorf("list jobs left running: %w", err)
		}
		p := riverdriver.JobRescueManyParams{StuckHorizon: horizon}
		for _, j := range jobs {
			after = j.ID
			if !kinds[j.Kind] {
				continue
			}
			e, err := json.Marshal(rivertype.AttemptError{
				At: horizon, Attempt: max(j.Attempt, 0),
				Error: "the process running this job stopped mid-step; reclaimed when it started again",
			})
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
