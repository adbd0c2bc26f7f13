package task

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/weir-gateway/weir"
)

// purgeBatch is how many tasks one purge transaction removes: small
// enough that the store's one writer is never held long.
const purgeBatch = 1000

// purgeEvery is how often finished tasks past their retention are purged.
const purgeEvery = time.Hour

// PurgeArgs is the periodic River job that removes finished tasks kept
// longer than Config.Retention. River runs periodic jobs on its leader
// only, so with several replicas one of them purges.
type PurgeArgs struct{}

// Kind names the job.
func (PurgeArgs) Kind() string { return "weir_task_purge" }

func purgeJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(purgeEvery),
		func() (river.JobArgs, *river.InsertOpts) {
			return PurgeArgs{}, &river.InsertOpts{Queue: queueWebhooks, MaxAttempts: 1}
		},
		&river.PeriodicJobOpts{RunOnStart: true})
}

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	s *Service
}

// Work purges in batches until none is left or the job's time is up.
func (w *purgeWorker) Work(ctx context.Context, job *river.Job[PurgeArgs]) error {
	_, err := w.s.purge(ctx)
	return err
}

// purge removes the finished tasks older than the retention, in batches,
// and returns how many it removed.
func (s *Service) purge(ctx context.Context) (int, error) {
	before := s.clock.Now().Add(-s.cfg.Retention)
	total := 0
	for {
		n, err := s.store.TaskPurge(ctx, &weir.TaskPurgeParams{FinishedBefore: before, Limit: s.purgeBatch})
		total += n
		if err != nil {
			return total, fmt.Errorf("purge tasks finished before %s: %w", before.Format(time.RFC3339), err)
		}
		if n < s.purgeBatch {
			if total > 0 {
				s.logger.Info("finished tasks purged", "tasks", total, "finished_before", before)
			}
			return total, nil
		}
	}
}
