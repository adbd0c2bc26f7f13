package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/weir-gateway/weir/task"
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
	t.Cleanup(func() { db.Close() })
	if err := task.MigrateRiver(ctx, db.RiverDriver()); err != nil {
		t.Fatal(err)
	}
	if err := task.MigrateRiver(ctx, db.RiverDriver()); err != nil {
		t.Fatalf("MigrateRiver on an up-to-date file: %v", err)
	}
	client, err := river.NewClient(db.RiverDriver(), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
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
	attempted := time.Now().Add(-time.Minute).UTC().Format("2006-01-02 15:04:05.000")
	for _, id := range []int64{left, other} {
		if _, err := db.SQL().ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
			attempted_at = ?, attempted_by = json('["dead-client"]') WHERE id = ?`, attempted, id); err != nil {
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
	if job, err := client.JobGet(ctx, waiting); err != nil || job.State != rivertype.JobStateScheduled || !job.ScheduledAt.Equal(later.UTC().Round(time.Millisecond)) {
		t.Errorf("scheduled job of the kind: %+v, %v; want untouched, at %s", job, err, later)
	}
	if n, err := db.JobReclaimRunning(ctx, []string{reclaimedArgs{}.Kind()}); err != nil || n != 0 {
		t.Errorf("second JobReclaimRunning = %d, %v; want nothing left to reclaim", n, err)
	}
}
