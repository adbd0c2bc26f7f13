package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/riverjob"
)

// JobStore is what ExerciseJobs needs of a store: River's driver on its
// database and its transactions, and the reclaim of the jobs a killed
// process left running.
type JobStore[TTx any] interface {
	riverjob.Store[TTx]
	JobReclaimRunning(ctx context.Context, kinds []string) (int, error)
}

// jobReclaimer is what a store shared by several replicas also does:
// take back one dead replica's jobs.
type jobReclaimer interface {
	JobReclaimAttemptedBy(ctx context.Context, client string, kinds []string) (int, error)
}

type reclaimedArgs struct{}

func (reclaimedArgs) Kind() string { return "storetest_reclaimed" }

type otherArgs struct{}

func (otherArgs) Kind() string { return "storetest_other" }

// ExerciseJobs runs the jobs suite against stores newStore makes: River's
// migrations apply, again as a no-op, and at once from several callers; JobReclaimRunning makes a
// job of a named kind left running available at once, its attempt kept and
// the reclaim in its errors, and leaves a running job of another kind and a
// scheduled job of the kind alone. A store that is also a jobReclaimer
// (JobReclaimAttemptedBy) takes back only the running jobs whose latest
// attempt is the named client's, refusing an empty client with
// weir.ErrInvalid.
//
// It reaches River's tables through River's client and driver only, so the
// same suite pins what riverjob does on every database.
func ExerciseJobs[TTx any](t *testing.T, newStore func(t *testing.T) JobStore[TTx]) {
	t.Run("MigrateAtOnce", func(t *testing.T) {
		t.Parallel()
		// Replicas starting together on a new database: each applies
		// River's migrations, none fails on another's.
		store := newStore(t)
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() { errs <- riverjob.Migrate(t.Context(), store) }()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Errorf("riverjob.Migrate beside three others: %v", err)
			}
		}
	})

	t.Run("ReclaimRunning", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		store := newStore(t)
		client, running := jobRig(t, store)
		left := insertJob(t, client, reclaimedArgs{}, nil)
		other := insertJob(t, client, otherArgs{}, nil)
		later := time.Now().Add(time.Hour)
		waiting := insertJob(t, client, reclaimedArgs{}, &river.InsertOpts{ScheduledAt: later})
		running(left, "dead-client")
		running(other, "dead-client")

		before := time.Now()
		n, err := store.JobReclaimRunning(ctx, []string{reclaimedArgs{}.Kind()})
		if err != nil || n != 1 {
			t.Fatalf("JobReclaimRunning = %d, %v; want 1 job", n, err)
		}
		job := getJob(t, client, left)
		if job.State != rivertype.JobStateAvailable || job.ScheduledAt.After(time.Now()) || job.ScheduledAt.Before(before.Add(-time.Second)) {
			t.Errorf("reclaimed job %s scheduled at %s, want available now (%s)", job.State, job.ScheduledAt, before)
		}
		if job.Attempt != 1 {
			t.Errorf("reclaimed job at attempt %d, want its attempt kept (1)", job.Attempt)
		}
		if len(job.Errors) != 1 || job.Errors[0].Attempt != 1 || job.Errors[0].Error != riverjob.WhyRestarted {
			t.Errorf("reclaimed job's errors %+v, want one for attempt 1 saying its process stopped", job.Errors)
		}
		if job := getJob(t, client, other); job.State != rivertype.JobStateRunning || len(job.Errors) != 0 {
			t.Errorf("running job of another kind: %s with errors %+v; want still running, no errors", job.State, job.Errors)
		}
		if job := getJob(t, client, waiting); job.State != rivertype.JobStateScheduled || job.ScheduledAt.Sub(later).Abs() > time.Millisecond {
			t.Errorf("scheduled job of the kind: %s at %s; want untouched, at %s", job.State, job.ScheduledAt, later)
		}
		if n, err := store.JobReclaimRunning(ctx, []string{reclaimedArgs{}.Kind()}); err != nil || n != 0 {
			t.Errorf("second JobReclaimRunning = %d, %v; want nothing left to reclaim", n, err)
		}
	})

	t.Run("ReclaimAttemptedBy", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		store := newStore(t)
		reclaimer, ok := store.(jobReclaimer)
		if !ok {
			t.Skip("the store runs jobs in one process only: it takes back no other runner's jobs")
		}
		client, running := jobRig(t, store)
		job := func(args river.JobArgs, attemptedBy ...string) int64 {
			id := insertJob(t, client, args, nil)
			running(id, attemptedBy...)
			return id
		}
		dead := job(reclaimedArgs{}, "live", "dead")
		takenOver := job(reclaimedArgs{}, "dead", "live")
		live := job(reclaimedArgs{}, "live")
		deadOther := job(otherArgs{}, "dead")

		n, err := reclaimer.JobReclaimAttemptedBy(ctx, "dead", []string{reclaimedArgs{}.Kind()})
		if err != nil || n != 1 {
			t.Fatalf("JobReclaimAttemptedBy = %d, %v; want 1 job", n, err)
		}
		got := getJob(t, client, dead)
		if got.State != rivertype.JobStateAvailable || got.ScheduledAt.After(time.Now()) || got.Attempt != 2 {
			t.Errorf("the dead client's job: %s at attempt %d, scheduled %s; want available now, its attempt kept", got.State, got.Attempt, got.ScheduledAt)
		}
		if len(got.Errors) != 1 || !strings.Contains(got.Errors[0].Error, "declared gone") {
			t.Errorf("the dead client's job's errors %+v; want one saying its replica was declared gone", got.Errors)
		}
		for _, id := range []int64{takenOver, live, deadOther} {
			if got := getJob(t, client, id); got.State != rivertype.JobStateRunning {
				t.Errorf("job %d: %s; want still running", id, got.State)
			}
		}
		if _, err := reclaimer.JobReclaimAttemptedBy(ctx, "", []string{reclaimedArgs{}.Kind()}); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("JobReclaimAttemptedBy of no client: %v; want weir.ErrInvalid", err)
		}
	})
}

// jobRig migrates River's tables on s (twice: the second must be a no-op)
// and returns a River client that inserts and reads jobs, and a function
// that marks a job as a worker's fetch leaves it when its process is
// killed: running, attempted a minute ago by the given clients in turn.
func jobRig[TTx any](t *testing.T, s JobStore[TTx]) (*river.Client[TTx], func(id int64, attemptedBy ...string)) {
	t.Helper()
	ctx := t.Context()
	d := s.RiverDriver()
	if err := riverjob.Migrate(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := riverjob.Migrate(ctx, s); err != nil {
		t.Fatalf("riverjob.Migrate on an up-to-date database: %v", err)
	}
	client, err := river.NewClient(d, &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	running := func(id int64, attemptedBy ...string) {
		t.Helper()
		at := time.Now().Add(-time.Minute).UTC()
		if _, err := d.GetExecutor().JobUpdateFull(ctx, &riverdriver.JobUpdateFullParams{
			ID:              id,
			StateDoUpdate:   true,
			State:           rivertype.JobStateRunning,
			AttemptDoUpdate: true, Attempt: max(len(attemptedBy), 1),
			AttemptedAtDoUpdate: true, AttemptedAt: &at,
			AttemptedByDoUpdate: true, AttemptedBy: attemptedBy,
		}); err != nil {
			t.Fatalf("mark job %d running: %v", id, err)
		}
	}
	return client, running
}

func insertJob[TTx any](t *testing.T, client *river.Client[TTx], args river.JobArgs, opts *river.InsertOpts) int64 {
	t.Helper()
	res, err := client.Insert(t.Context(), args, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func getJob[TTx any](t *testing.T, client *river.Client[TTx], id int64) *rivertype.JobRow {
	t.Helper()
	job, err := client.JobGet(t.Context(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return job
}
