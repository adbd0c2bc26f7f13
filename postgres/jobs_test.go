package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

type reclaimedArgs struct{}

func (reclaimedArgs) Kind() string { return "reclaimed" }

type otherArgs struct{}

func (otherArgs) Kind() string { return "other" }

// TestJobReclaimRunning pins what JobReclaimRunning does with River's
// tables, which it reaches through River's driver executor: a job of a
// named kind left running becomes available at once with its attempt kept
// and the reclaim in its errors; a running job of another kind, and a job
// of the kind that is not running, are untouched.
func TestJobReclaimRunning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTemp(t)
	client := newRiver(t, db)
	insert := func(args river.JobArgs, opts *river.InsertOpts) int64 {
		t.Helper()
		res, err := client.Insert(ctx, args, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	left := insert(reclaimedArgs{}, nil)
	other := insert(otherArgs{}, nil)
	later := time.Now().Add(time.Hour)
	waiting := insert(reclaimedArgs{}, &river.InsertOpts{ScheduledAt: later})
	// What a worker's fetch leaves behind when its process is killed.
	attempted := time.Now().Add(-time.Minute)
	for _, id := range []int64{left, other} {
		if _, err := db.Pool().Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
			attempted_at = $1, attempted_by = ARRAY['dead-client'] WHERE id = $2`, attempted, id); err != nil {
			t.Fatal(err)
		}
	}

	before := time.Now()
	n, err := db.JobReclaimRunning(ctx, []string{reclaimedArgs{}.Kind()})
	if err != nil || n != 1 {
		t.Fatalf("JobReclaimRunning = %d, %v; want 1 job", n, err)
	}
	job, err := client.JobGet(ctx, left)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != rivertype.JobStateAvailable || job.ScheduledAt.After(time.Now()) || job.ScheduledAt.Before(before.Add(-time.Second)) {
		t.Errorf("reclaimed job %s scheduled at %s, want available now (%s)", job.State, job.ScheduledAt, before)
	}
	if job.Attempt != 1 {
		t.Errorf("reclaimed job at attempt %d, want its attempt kept (1)", job.Attempt)
	}
	if len(job.Errors) != 1 || job.Errors[0].Attempt != 1 || !strings.Contains(job.Errors[0].Error, "stopped mid-step") {
		t.Errorf("reclaimed job's errors %+v, want one for attempt 1 saying its process stopped", job.Errors)
	}
	if job, err := client.JobGet(ctx, other); err != nil || job.State != rivertype.JobStateRunning || len(job.Errors) != 0 {
		t.Errorf("running job of another kind: %+v, %v; want still running, no errors", job, err)
	}
	if job, err := client.JobGet(ctx, waiting); err != nil || job.State != rivertype.JobStateScheduled || job.ScheduledAt.Sub(later).Abs() > time.Microsecond {
		t.Errorf("scheduled job of the kind: %+v, %v; want untouched, at %s", job, err, later)
	}
	if n, err := db.JobReclaimRunning(ctx, []string{reclaimedArgs{}.Kind()}); err != nil || n != 0 {
		t.Errorf("second JobReclaimRunning = %d, %v; want nothing left to reclaim", n, err)
	}
}

// TestJobReclaimAttemptedBy: only the running jobs of the named kinds
// whose latest attempt is the named client's become available; a job
// that client attempted earlier but another client runs now, and a job
// of another client, stay running.
func TestJobReclaimAttemptedBy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTemp(t)
	client := newRiver(t, db)
	running := func(args river.JobArgs, attemptedBy ...string) int64 {
		t.Helper()
		res, err := client.Insert(ctx, args, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool().Exec(ctx, `UPDATE river_job SET state = 'running', attempt = $1,
			attempted_at = now() - interval '1 second', attempted_by = $2 WHERE id = $3`, len(attemptedBy), attemptedBy, res.Job.ID); err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	dead := running(reclaimedArgs{}, "live", "dead")
	takenOver := running(reclaimedArgs{}, "dead", "live")
	live := running(reclaimedArgs{}, "live")
	deadOther := running(otherArgs{}, "dead")

	n, err := db.JobReclaimAttemptedBy(ctx, "dead", []string{reclaimedArgs{}.Kind()})
	if err != nil || n != 1 {
		t.Fatalf("JobReclaimAttemptedBy = %d, %v; want 1 job", n, err)
	}
	job, err := client.JobGet(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != rivertype.JobStateAvailable || job.ScheduledAt.After(time.Now()) || job.Attempt != 2 {
		t.Errorf("the dead client's job: %s at attempt %d, scheduled %s; want available now, its attempt kept", job.State, job.Attempt, job.ScheduledAt)
	}
	if len(job.Errors) != 1 || !strings.Contains(job.Errors[0].Error, "declared gone") {
		t.Errorf("the dead client's job's errors %+v; want one saying its replica was declared gone", job.Errors)
	}
	for _, id := range []int64{takenOver, live, deadOther} {
		if job, err := client.JobGet(ctx, id); err != nil || job.State != rivertype.JobStateRunning {
			t.Errorf("job %d: %+v, %v; want still running", id, job, err)
		}
	}
	if _, err := db.JobReclaimAttemptedBy(ctx, "", []string{reclaimedArgs{}.Kind()}); err == nil {
		t.Error("JobReclaimAttemptedBy of no client: no error")
	}
}
