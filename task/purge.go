package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/weir-gateway/weir"
)

// purgeBatch is how many tasks one purge transaction removes: small
// enough that the store's one writer is never held long.
const purgeBatch = 1000

// purgeEvery is how often finished tasks past their retention, and
// expired response bindings, are purged.
const purgeEvery = time.Hour

// PurgeArgs is the periodic River job that removes finished tasks kept
// longer than Config.Retention, and the response bindings that expired
// (BindingPurger). River runs periodic jobs on its leader only, so with
// several replicas one of them purges.
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

// Work purges in batches until none is left or the job's time is up:
// the tasks, then the bindings (which a failure of the former does not
// hold up).
func (w *purgeWorker) Work(ctx context.Context, job *river.Job[PurgeArgs]) error {
	_, err := w.s.purge(ctx)
	_, berr := w.s.purgeBindings(ctx)
	return errors.Join(err, berr)
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

// purgeBindings removes the response bindings expired by now, in
// batches, and returns how many it removed; none if the store keeps no
// bindings.
func (s *Service) purgeBindings(ctx context.Context) (int, error) {
	if s.bindings == nil {
		return 0, nil
	}
	now := s.clock.Now()
	total := 0
	for {
		n, err := s.bindings.ResponseBindingsPurge(ctx, &weir.ResponseBindingsPurgeParams{ExpiredBy: now, Limit: s.purgeBatch})
		total += n
		if err != nil {
			return total, fmt.Errorf("purge response bindings expired by %s: %w", now.Format(time.RFC3339), err)
		}
		if n < s.purgeBatch {
			if total > 0 {
				s.logger.Info("expired response bindings purged", "bindings", total, "expired_by", now)
			}
			return total, nil
		}
	}
}
