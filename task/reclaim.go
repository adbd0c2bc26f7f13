package task

import "context"

// reclaim makes the jobs that an earlier run of this process left running
// — it was killed mid-step — available again at once. River's rescuer
// would do the same, but only once a job has looked running for
// RescueAfter (a minute at least), and a task's job spends most of its
// life running: it waits for its next poll in process (see follow). It is
// only right where no other process runs this store's jobs (SoleRunner):
// a running job is then certainly an orphan. Like a rescue, it counts as
// an attempt, and it is recorded in the job's errors. River has no public
// call that makes a running job available, so the store does it
// (Store.JobReclaimRunning), before River's client starts.
func (s *Service) reclaim(ctx context.Context) (int, error) {
	return s.river.reclaim(ctx, []string{RunArgs{}.Kind(), WebhookArgs{}.Kind()})
}
