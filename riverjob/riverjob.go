// Package riverjob is what Weir does with River's jobs beyond River's
// client: bringing River's tables up to date, and making jobs that a dead
// runner left running available again at once. Both stores (sqlite,
// postgres) use it through River's driver for their database, so the two
// do the same thing in one place; storetest.ExerciseJobs pins it. On the
// embedded store it also carries River's notices in the process
// (InProcess), and wakes a queue when a job River would find only by a
// fetch poll is due (Waker), so that an idle process is not woken to poll;
// and it stops River's client while the database holds no job for it
// (Sleeper), since even an idle client wakes every 50ms.
package riverjob

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

// Store is what Migrate needs of a store: River's driver on its
// database, and its transactions.
type Store[TTx any] interface {
	RiverDriver() riverdriver.Driver[TTx]
	InTx(ctx context.Context, fn func(tx TTx) error) error
}

// Migrate brings River's tables on s's database up to date: it applies
// River's migrations not yet applied, on River's own migration line
// (rivermigrate) beside the store's. On PostgreSQL it holds an advisory
// lock of the schema's own meanwhile, so that replicas starting together
// on a new database take turns instead of one failing on the other's
// half-made tables; on SQLite, callers in the process take turns. The task service
// calls it at start; a store's Open leaves River's tables to it, since
// only a process that runs tasks needs them.
func Migrate[TTx any](ctx context.Context, s Store[TTx]) error {
	d := s.RiverDriver()
	m, err := rivermigrate.New(d, nil)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	up := func() error {
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("apply migrations: %w", err)
		}
		return nil
	}
	if d.DatabaseName() != "postgres" {
		// A SQLite database belongs to one process (weir serve locks
		// it): taking turns within the process is enough.
		sqliteMigrations.Lock()
		defer sqliteMigrations.Unlock()
		return up()
	}
	// The transaction only holds the lock: the migrations run beside it,
	// on the pool's other connections, each as River applies it (one of
	// them adds an enum value that a later statement uses, which
	// PostgreSQL refuses within one transaction).
	return s.InTx(ctx, func(tx TTx) error {
		if err := d.UnwrapExecutor(tx).Exec(ctx, migrateLockSQL); err != nil {
			return fmt.Errorf("lock the schema's migrations: %w", err)
		}
		return up()
	})
}

// sqliteMigrations serializes Migrate on SQLite databases.
var sqliteMigrations sync.Mutex

// migrateLockSQL takes, until the transaction ends, the advisory lock of
// River's migrations on the current schema: the same for every process
// on the schema, another for each schema (so tests on schemas of their
// own do not wait for each other).
const migrateLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('weir river migrations ' || coalesce(current_schema(), ''), 0))`

// batch is how many running jobs one round of Reclaim reads.
const batch = 1000

// ReclaimParams says which running jobs Reclaim takes back.
type ReclaimParams struct {
	// Kinds are the job kinds taken back; jobs of other kinds are left.
	Kinds []string
	// Client, if set, takes back only the jobs whose latest attempt is
	// that River client's (river.Config.ID, the last of attempted_by);
	// empty takes back every running job of Kinds.
	Client string
	// Why is recorded in each job's errors, for its latest attempt.
	Why string
	// Now is the horizon: only jobs attempted before it are taken back.
	Now time.Time
}

// Reclaim makes the running jobs that p names available again at once,
// recording p.Why in their errors, and returns how many it changed. It is
// River's rescue without the wait for RescueStuckJobsAfter. The attempt a
// job was in stays counted. Only jobs attempted before p.Now, and only if
// still running, are changed (River's rescue is a compare-and-set on
// both), so a job another client fetched meanwhile is left alone.
//
// No public River API makes a running job available (JobRetry leaves
// running jobs alone), so this uses River's driver executor, which River
// does not promise to keep stable; storetest.ExerciseJobs pins what it
// does on both databases.
func Reclaim[TTx any](ctx context.Context, d riverdriver.Driver[TTx], p ReclaimParams) (int, error) {
	exec := d.GetExecutor()
	// River compares attempted_at with the horizon (on SQLite as text, in
	// UTC).
	horizon := p.Now.UTC()
	reclaimed := 0
	for after := int64(0); ; {
		jobs, err := exec.JobGetStuck(ctx, &riverdriver.JobGetStuckParams{AfterID: after, Max: batch, StuckHorizon: horizon})
		if err != nil {
			return reclaimed, fmt.Errorf("list jobs left running: %w", err)
		}
		rescue := riverdriver.JobRescueManyParams{StuckHorizon: horizon}
		for _, j := range jobs {
			after = j.ID
			if !slices.Contains(p.Kinds, j.Kind) || !attemptedBy(j, p.Client) {
				continue
			}
			e, err := json.Marshal(rivertype.AttemptError{At: horizon, Attempt: max(j.Attempt, 0), Error: p.Why})
			if err != nil {
				return reclaimed, err
			}
			rescue.ID = append(rescue.ID, j.ID)
			rescue.Error = append(rescue.Error, e)
			rescue.FinalizedAt = append(rescue.FinalizedAt, nil)
			rescue.ScheduledAt = append(rescue.ScheduledAt, horizon)
			rescue.State = append(rescue.State, string(rivertype.JobStateAvailable))
		}
		if len(rescue.ID) > 0 {
			if _, err := exec.JobRescueMany(ctx, &rescue); err != nil {
				return reclaimed, fmt.Errorf("reclaim jobs left running: %w", err)
			}
			reclaimed += len(rescue.ID)
		}
		if len(jobs) < batch {
			return reclaimed, nil
		}
	}
}

// attemptedBy reports whether j's latest attempt is client's, or client
// is empty.
func attemptedBy(j *rivertype.JobRow, client string) bool {
	return client == "" || len(j.AttemptedBy) > 0 && j.AttemptedBy[len(j.AttemptedBy)-1] == client
}

// What Reclaim records in a job's errors, by why it was taken back.
const (
	// WhyRestarted: the only runner of the database started again.
	WhyRestarted = "the process running this job stopped mid-step; reclaimed when it started again"
	// WhyFenced: the replica running the job was declared gone.
	WhyFenced = "the replica running this job was declared gone mid-step; reclaimed for the others"
)
