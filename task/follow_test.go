package task

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/sqlite"
)

// timerClock is a fake clock that says when a timer is set, so a test can
// wait for the service to start waiting rather than sleep.
type timerClock struct {
	*clock.Fake
	set chan time.Duration
}

func (c *timerClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Fake.AfterFunc(d, f)
	c.set <- d
	return t
}

// scriptedJob is an upstream with one job that runs evenly from start for
// length, as the fake clock tells, and records its polls and cancels.
type scriptedJob struct {
	clock  clock.Clock
	start  time.Time
	length time.Duration

	// failUntil: polls before this much has elapsed answer 503.
	failUntil time.Duration
	// submitTakes, if set, is how long a submit takes on the fake
	// clock; the job starts submitStarts into it. pollTakes is how long
	// a poll's answer takes after the job's state was read.
	submitTakes, submitStarts, pollTakes time.Duration

	// endless: the job reads 99% from its length on, and never ends.
	endless bool

	mu        sync.Mutex
	polls     []time.Duration // elapsed at each poll
	cancelled bool
}

func (j *scriptedJob) Submit(context.Context, provider.AsyncCall) (provider.Job, error) {
	if j.submitTakes > 0 {
		j.mu.Lock()
		j.start = j.clock.Now().Add(j.submitStarts)
		j.mu.Unlock()
		j.clock.(*timerClock).Advance(j.submitTakes)
	}
	return provider.Job{ID: "job_1", Status: provider.JobRunning}, nil
}

func (j *scriptedJob) Poll(_ context.Context, id string) (provider.Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.clock.Now().Sub(j.start)
	j.polls = append(j.polls, e)
	if j.pollTakes > 0 {
		defer j.clock.(*timerClock).Advance(j.pollTakes)
	}
	if e < j.failUntil {
		return provider.Job{}, &provider.Error{Status: http.StatusServiceUnavailable, Body: []byte(`{"error":{"message":"overloaded"}}`)}
	}
	if j.cancelled {
		return provider.Job{ID: id, Status: provider.JobFailed}, nil
	}
	if e >= j.length && !j.endless {
		return provider.Job{ID: id, Status: provider.JobSucceeded, Progress: 100, Raw: []byte(`{"id":"job_1","status":"completed"}`)}, nil
	}
	return provider.Job{ID: id, Status: provider.JobRunning, Progress: min(int(e*100/j.length), 99)}, nil
}

func (j *scriptedJob) Content(context.Context, string, string) (*http.Response, error) {
	return nil, errors.New("no content")
}

func (j *scriptedJob) Cancel(context.Context, string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cancelled = true
	return nil
}

type onePlatform struct{ adapter provider.AsyncAdapter }

func (p onePlatform) Plan(context.Context, weir.Task) ([]admission.Candidate, error) {
	return []admission.Candidate{{Needs: []admission.Need{{Scope: "pm:vid/sora", Amount: 1}}}}, nil
}

func (p onePlatform) Target(pm string, _ weir.RunMode) (Target, bool) {
	return Target{PlatformModel: pm, Upstream: "sora-2", Adapter: p.adapter}, pm == "vid/sora"
}

// followRig is a service whose one task runs upstream (submitted at the
// clock's start, its lease held), with follow not yet called.
type followRig struct {
	s      *Service
	db     *sqlite.DB
	clk    *timerClock
	job    *scriptedJob
	eng    *admission.Memory
	task   weir.Task
	runJob *river.Job[RunArgs]
}

func newFollowRig(t *testing.T, length time.Duration) *followRig {
	t.Helper()
	return newJobRig(t, length, true)
}

// newJobRig is newFollowRig's, with the task admitted and not yet
// submitted unless submitted.
func newJobRig(t *testing.T, length time.Duration, submitted bool) *followRig {
	t.Helper()
	ctx := t.Context()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := &timerClock{Fake: clock.NewFake(start), set: make(chan time.Duration, 16)}
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.KeyCreate(ctx, weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: start}); err != nil {
		t.Fatal(err)
	}
	eng := admission.NewMemory(admission.Options{})
	t.Cleanup(eng.Close)
	for _, sc := range []string{"pm:vid/sora", WorkersScope} {
		if err := eng.SetScope(ctx, sc, admission.ScopeConfig{Limit: 1, LeaseTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	job := &scriptedJob{clock: clk, start: start, length: length}
	s, err := New(Config{Clock: clk}, Deps[*sql.Tx]{Store: db, Engine: eng, Planner: onePlatform{job}})
	if err != nil {
		t.Fatal(err)
	}
	close(s.ready)
	tk := weir.Task{ID: "task_1", KeyID: "key_1", Kind: "video", Model: "sora", Input: []byte(`{"prompt":"p"}`),
		Status: weir.TaskQueued, Candidate: -1, CreatedAt: start}
	if _, err := db.TaskCreate(ctx, &tk); err != nil {
		t.Fatal(err)
	}
	toRunning := weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskRunning,
		PlatformModel: "vid/sora", Candidate: ptr(0), UpstreamID: "job_1", AdmittedAt: start}
	if !submitted {
		toRunning.Status, toRunning.UpstreamID = weir.TaskAdmitted, ""
	}
	if ok, err := db.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: tk.ID, Update: toRunning}); !ok || err != nil {
		t.Fatalf("task to %s: %v %v", toRunning.Status, ok, err)
	}
	if tk, err = db.TaskGet(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.holdLease(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if submitted {
		s.runs[tk.ID] = newRun(start, start.Add(s.cfg.PollMin), 0, start)
	}
	return &followRig{s: s, db: db, clk: clk, job: job, eng: eng, task: tk,
		runJob: &river.Job[RunArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: 5}, Args: RunArgs{TaskID: tk.ID}}}
}

// follow runs follow in the background; its result arrives on the channel.
func (r *followRig) follow(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	target, _ := r.s.planner.Target("vid/sora", "")
	go func() { done <- r.s.follow(ctx, r.task, target, r.runJob, 0) }()
	return done
}

// used is how much of the platform model's scope is held.
func (r *followRig) used(t *testing.T) int64 {
	st, err := r.eng.Scope(t.Context(), "pm:vid/sora")
	if err != nil {
		t.Fatal(err)
	}
	return st.Used
}

func TestFollowPollsWhenProgressSaysTheJobMayHaveEnded(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 2*time.Second)
	done := r.follow(t.Context())
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("follow: %v", err)
			}
			got, err := r.s.store.TaskGet(t.Context(), r.task.ID)
			if err != nil || got.Status != weir.TaskSucceeded || got.Progress != 100 {
				t.Fatalf("task after follow: %+v %v; want succeeded at 100%%", got, err)
			}
			if n := r.used(t); n != 0 {
				t.Errorf("%d of the platform model's capacity still held after the task ended", n)
			}
			polls := r.job.polls
			late := polls[len(polls)-1] - r.job.length
			if len(polls) > 5 || late < 0 || late > pollFloor {
				t.Errorf("polls at %v: want at most 5, the last within %s of the job's end (2s)", polls, pollFloor)
			}
			return
		case d := <-r.clk.set:
			if d > r.s.holdFor() {
				t.Fatalf("follow waits %s in process, more than holdFor %s", d, r.s.holdFor())
			}
			r.clk.Advance(d)
		case <-time.After(10 * time.Second):
			t.Fatalf("follow neither waited nor returned; polls so far %v", r.job.polls)
		}
	}
}

// A submit that takes long (a slow upstream, a busy machine) does not
// make the end be seen late: the job's progress is timed from when the
// submit returned, the latest the job may have started, not from when
// it was sent.
func TestSubmitTimesTheJobFromItsReturn(t *testing.T) {
	t.Parallel()
	r := newJobRig(t, 2*time.Second, false)
	r.job.submitTakes, r.job.submitStarts = 300*time.Millisecond, 100*time.Millisecond
	target, _ := r.s.planner.Target("vid/sora", "")
	done := make(chan error, 1)
	go func() { done <- r.s.submit(t.Context(), r.task, target, r.runJob, 0) }()
	if err := r.advance(t, "submit", done, nil); err != nil {
		t.Fatalf("submit: %v", err)
	}
	polls := r.job.polls
	late := polls[len(polls)-1] - r.job.length
	if late < 0 || late > 2*pollFloor {
		t.Errorf("polls at %v of the job's 2s: the last %s late, want at most %s", polls, late, 2*pollFloor)
	}
}

// advance moves the rig's clock by each wait the service sets, calling
// before (if not nil) with it first, until done answers, and returns
// done's error; it fails the test if neither comes within 10 s. what
// names the call that waits.
func (r *followRig) advance(t *testing.T, what string, done <-chan error, before func(d time.Duration)) error {
	t.Helper()
	for {
		select {
		case err := <-done:
			return err
		case d := <-r.clk.set:
			if before != nil {
				before(d)
			}
			r.clk.Advance(d)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s neither waited nor returned; polls so far %v", what, r.job.polls)
		}
	}
}

// Slow answers to polls do not make the end be seen late: progress is
// timed from when each poll was sent.
func TestFollowTimesProgressFromThePollsSending(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 2*time.Second)
	r.job.pollTakes = 200 * time.Millisecond
	if err := r.advance(t, "follow", r.follow(t.Context()), nil); err != nil {
		t.Fatalf("follow: %v", err)
	}
	// The poll that may see the end goes when the answer before it
	// comes: within a poll's answer and the window's steps of the end.
	polls := r.job.polls
	late, want := polls[len(polls)-1]-r.job.length, r.job.pollTakes+2*pollFloor
	if late < 0 || late > want {
		t.Errorf("polls at %v of the job's 2s: the last %s late, want at most %s", polls, late, want)
	}
}

// Polls near the job's estimated end come closer together than PollMin;
// their progress is stored at most once per PollMin, and the end as it
// comes.
func TestFollowStoresProgressAtMostEveryPollMin(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 2*time.Second)
	stored, storedAt := 0, time.Time{}
	var changes []time.Duration
	err := r.advance(t, "follow", r.follow(t.Context()), func(time.Duration) {
		// follow waits: what it stored is committed.
		got, err := r.s.store.TaskGet(t.Context(), r.task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if now := r.clk.Now(); got.Progress != stored {
			if !storedAt.IsZero() && now.Sub(storedAt) < r.s.cfg.PollMin {
				t.Errorf("progress stored %s after the last store (%d then %d), want at least PollMin %s", now.Sub(storedAt), stored, got.Progress, r.s.cfg.PollMin)
			}
			stored, storedAt = got.Progress, now
			changes = append(changes, now.Sub(r.job.start))
		}
	})
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	if len(changes) == 0 || len(r.job.polls) < 4 {
		t.Fatalf("progress stored at %v over polls at %v: want it stored while running, with polls near the end", changes, r.job.polls)
	}
}

// storedProgress follows the rig's stored progress at each wait of
// follow: changes gets the job's elapsed time at each change, and check
// (if not nil) is called with the progress stored for the wait from now
// on for d.
func (r *followRig) storedProgress(t *testing.T, changes *[]time.Duration, check func(stored int, now time.Time, d time.Duration)) func(time.Duration) {
	stored := 0
	return func(d time.Duration) {
		// follow waits: what it stored is committed.
		got, err := r.s.store.TaskGet(t.Context(), r.task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Progress != stored {
			stored = got.Progress
			*changes = append(*changes, r.clk.Now().Sub(r.job.start))
		}
		if check != nil {
			check(stored, r.clk.Now(), d)
		}
	}
}

// The polls of a job's last moments come closer together than PollMin:
// their readings are left to the next poll, and so to the end's write.
// A 2s job's progress is stored once while it runs, at the first poll.
func TestFollowLeavesTheLastReadingsToTheEnd(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 2*time.Second)
	var changes []time.Duration
	if err := r.advance(t, "follow", r.follow(t.Context()), r.storedProgress(t, &changes, nil)); err != nil {
		t.Fatalf("follow: %v", err)
	}
	got, err := r.s.store.TaskGet(t.Context(), r.task.ID)
	if err != nil || got.Status != weir.TaskSucceeded || got.Progress != 100 {
		t.Fatalf("task after follow: %+v %v; want succeeded at 100%%", got, err)
	}
	if len(changes) != 1 || len(r.job.polls) < 4 {
		t.Errorf("progress stored at %v over polls at %v: want it stored once, at the first poll, the last readings with the end", changes, r.job.polls)
	}
}

// A reading left to the next poll is stored within PollMin of when it
// was read, or a later one is: a job stuck at 99%, polled at a doubling
// step past its end's window, shows 99% within PollMin of the first
// poll that read it.
func TestFollowStoresALeftReadingWithinPollMin(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 2*time.Second)
	r.job.endless = true
	var changes []time.Duration
	check := func(stored int, now time.Time, d time.Duration) {
		// Every poll read by the wait's end, less PollMin, is stored.
		until := now.Add(d - r.s.cfg.PollMin).Sub(r.job.start)
		for _, e := range r.job.polls {
			if p := min(int(e*100/r.job.length), 99); e <= until && p > stored {
				t.Errorf("progress %d stored until %s, but a poll at %s read %d", stored, until+r.s.cfg.PollMin, e, p)
			}
		}
	}
	err := r.advance(t, "follow", r.follow(t.Context()), r.storedProgress(t, &changes, check))
	if _, ok := errors.AsType[*river.JobSnoozeError](err); !ok {
		t.Fatalf("follow of an endless job: %v, want a snooze", err)
	}
	if len(r.job.polls) < 6 {
		t.Errorf("polls at %v: want those of the end's window and past it", r.job.polls)
	}
}

func TestFollowEndsAtOnceWhenCancelled(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, time.Hour)
	r.s.runs[r.task.ID].next = r.clk.Now().Add(3 * time.Second) // due within holdFor: waited in process
	done := r.follow(t.Context())
	<-r.clk.set // follow waits for its next poll
	if _, err := r.s.Cancel(t.Context(), r.task.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("follow after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow still waiting for its next poll after the task was cancelled (the clock never moved)")
	}
	if !r.job.cancelled {
		t.Error("the upstream job was not cancelled")
	}
	if n := r.used(t); n != 0 {
		t.Errorf("%d of the platform model's capacity still held after cancel", n)
	}
}

func TestFollowSnoozesWhenStopping(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, time.Hour)
	r.s.runs[r.task.ID].next = r.clk.Now().Add(3 * time.Second)
	done := r.follow(t.Context())
	<-r.clk.set
	close(r.s.stopping)
	var snooze *river.JobSnoozeError
	select {
	case err := <-done:
		if !errors.As(err, &snooze) {
			t.Fatalf("follow on stop returned %v, want a snooze", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow still waiting after Stop began")
	}
	if n := r.used(t); n != 1 {
		t.Errorf("stopping changed the task's lease (%d held): a stop must leave it for the next start", n)
	}
}

func TestFollowSnoozesForAFarPoll(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, time.Hour)
	r.s.runs[r.task.ID].next = r.clk.Now().Add(time.Minute)
	var snooze *river.JobSnoozeError
	if err := <-r.follow(t.Context()); !errors.As(err, &snooze) || snooze.Duration >= time.Minute || snooze.Duration < time.Minute-time.Second {
		t.Fatalf("follow with its next poll a minute off returned %v, want a snooze a little short of a minute", err)
	}
}

// runFollow plays River for the rig's job: it runs follow, moves the fake
// clock through each wait in process and each snooze, and runs follow
// again after a snooze, until follow returns anything but a snooze.
func (r *followRig) runFollow(t *testing.T) error {
	t.Helper()
	for {
		done := r.follow(t.Context())
		for waiting := true; waiting; {
			select {
			case err := <-done:
				var snooze *river.JobSnoozeError
				if !errors.As(err, &snooze) {
					return err
				}
				r.clk.Advance(snooze.Duration)
				waiting = false
			case d := <-r.clk.set:
				r.clk.Advance(d)
			case <-time.After(10 * time.Second):
				t.Fatalf("follow neither waited nor returned; polls so far %v", r.job.polls)
			}
		}
	}
}

func TestFollowWaitsOutAnUpstreamOutage(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 10*time.Minute)
	r.job.failUntil = 8 * time.Minute // polls fail for 8 minutes of the job's 10
	if err := r.runFollow(t); err != nil {
		t.Fatalf("follow through an 8-minute outage: %v, want the task followed to its end", err)
	}
	got, err := r.s.store.TaskGet(t.Context(), r.task.ID)
	if err != nil || got.Status != weir.TaskSucceeded {
		t.Fatalf("task after an outage: %+v %v; want succeeded", got, err)
	}
	failed := 0
	for _, e := range r.job.polls {
		if e < r.job.failUntil {
			failed++
		}
	}
	if failed > 25 {
		t.Errorf("%d polls during the 8-minute outage: want the wait to double (polls at %v)", failed, r.job.polls)
	}
}

func TestFollowGivesUpAfterALongOutage(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 10*time.Hour)
	r.job.failUntil = 10 * time.Hour
	err := r.runFollow(t)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusServiceUnavailable {
		t.Fatalf("follow after polls failed for hours returned %v, want the upstream's error for River to retry", err)
	}
	if e := r.job.polls[len(r.job.polls)-1]; e < pollOutage || e > pollOutage+2*time.Minute {
		t.Errorf("gave up polling after %s of failures, want just past %s", e, pollOutage)
	}
	if got, _ := r.s.store.TaskGet(t.Context(), r.task.ID); got.Status != weir.TaskRunning {
		t.Errorf("task %s after the outage, want still running (River's attempts decide)", got.Status)
	}
}

func TestFollowKeepsTheLeaseWhenTheEndCannotBeStored(t *testing.T) {
	t.Parallel()
	r := newFollowRig(t, 2*time.Second)
	// The store refuses to record the end, as a full disk would.
	db := r.db.SQL()
	if _, err := db.Exec(`CREATE TRIGGER refuse_end BEFORE UPDATE OF status ON tasks
		WHEN NEW.status = 'succeeded' BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END`); err != nil {
		t.Fatal(err)
	}
	if err := r.runFollow(t); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("follow with the end refused returned %v, want the store's error for River to retry", err)
	}
	if got, _ := r.s.store.TaskGet(t.Context(), r.task.ID); got.Status != weir.TaskRunning {
		t.Fatalf("task %s, want still running", got.Status)
	}
	if n := r.used(t); n != 1 {
		t.Fatalf("%d of the capacity held after a failed end, want the lease kept (1)", n)
	}
	// River's retry, once the store works again, ends it.
	if _, err := db.Exec(`DROP TRIGGER refuse_end`); err != nil {
		t.Fatal(err)
	}
	if err := r.runFollow(t); err != nil {
		t.Fatalf("follow on retry: %v", err)
	}
	if got, _ := r.s.store.TaskGet(t.Context(), r.task.ID); got.Status != weir.TaskSucceeded {
		t.Errorf("task %s after the retry, want succeeded", got.Status)
	}
	if n := r.used(t); n != 0 {
		t.Errorf("%d of the capacity held after the task ended", n)
	}
}
