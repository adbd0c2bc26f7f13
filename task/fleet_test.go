package task

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/sqlite"
)

// TestFleetSubmitOnAnotherReplica: tasks submitted on replica b are
// admitted by the ledger of a, which leads, and run once each; the
// workers scope is never exceeded across the fleet; a task waiting in
// a's term has its queue position asked through b.
func TestFleetSubmitOnAnotherReplica(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 10 * time.Second}}, Workers: 2}, "a", "b")
	fb.elect(t, "a")
	var tasks []weir.Task
	for range 3 {
		tasks = append(tasks, fb.submit(t, "b"))
	}
	// Without the clock moving, two run and the third waits for a
	// worker.
	waitFor(t, "two tasks running", func() bool {
		return fb.get(t, tasks[0].ID).Status == weir.TaskRunning && fb.get(t, tasks[1].ID).Status == weir.TaskRunning
	})
	waitFor(t, "the third queued in the leader's term", func() bool {
		_, ok := fb.node("b").service().Position(t.Context(), tasks[2].ID)
		return ok
	})
	if p, _ := fb.node("b").service().Position(t.Context(), tasks[2].ID); p.Scope != WorkersScope || p.Ahead != 0 {
		t.Errorf("the third task's position %+v; want first in line for %s", p, WorkersScope)
	}
	if st := fb.scope(t, "b", WorkersScope); st.Used != 2 || st.Config.Limit != 2 {
		t.Errorf("workers scope: %d used of %d; want 2 of 2", st.Used, st.Config.Limit)
	}
	if got := fb.get(t, tasks[2].ID); got.Status != weir.TaskQueued {
		t.Fatalf("third task %s; want queued", got.Status)
	}
	for _, tk := range tasks {
		if got := fb.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
			t.Fatalf("task %+v; want succeeded", got)
		}
	}
	up := fb.up["vid/a"]
	if st := up.srv.Stats(); st.JobsSubmitted != 3 || st.PeakJobsRunning != 2 {
		t.Errorf("upstream: %d jobs, %d at most at once; want 3, 2", st.JobsSubmitted, st.PeakJobsRunning)
	}
	for _, tk := range tasks {
		if j := up.jobByKey(t, tk.ID); j.Submits != 1 {
			t.Errorf("task %s submitted %d times; want once", tk.ID, j.Submits)
		}
	}
	waitFor(t, "every lease released", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// TestFleetCancelOnAnotherReplica: b cancels a task that waits in a's
// term, which takes it out of the queue, and one that runs, whose lease
// a's ledger releases and whose upstream job is cancelled.
func TestFleetCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}}, Workers: 1}, "a", "b")
	fb.elect(t, "a")
	running := fb.submit(t, "a")
	waiting := fb.submit(t, "b")
	waitFor(t, "one running", func() bool { return fb.get(t, running.ID).Status == weir.TaskRunning })
	waitFor(t, "one queued", func() bool { return fb.scope(t, "b", WorkersScope).Queued == 1 })
	b := fb.node("b").service()

	got, err := b.Cancel(t.Context(), waiting.ID)
	if err != nil || got.Status != weir.TaskCancelled {
		t.Fatalf("Cancel of the queued task = %s, %v; want cancelled", got.Status, err)
	}
	waitFor(t, "the waiter gone from a's term", func() bool { return fb.scope(t, "b", WorkersScope).Queued == 0 })
	if _, ok := b.Position(t.Context(), waiting.ID); ok {
		t.Error("the cancelled task still has a queue position")
	}

	if got, err := b.Cancel(t.Context(), running.ID); err != nil || got.Status != weir.TaskCancelled {
		t.Fatalf("Cancel of the running task = %s, %v; want cancelled", got.Status, err)
	}
	waitFor(t, "the running task's lease released", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
	if n := fb.up["vid/a"].srv.Stats().JobsCancelled; n != 1 {
		t.Errorf("%d upstream jobs cancelled; want 1", n)
	}
	// The capacity serves the next task.
	next := fb.submit(t, "b")
	waitFor(t, "the next task running", func() bool { return fb.get(t, next.ID).Status == weir.TaskRunning })
}

// TestFleetLeaderChange: when b takes the lead from a, b's ledger
// recovers from the store: the running task's lease, counted once, and
// the queued tasks in their order; then everything completes, once.
func TestFleetLeaderChange(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 10 * time.Second}}, Workers: 1}, "a", "b")
	fb.elect(t, "a")
	// On one replica, so that their notices reach the leader in order.
	first := fb.submit(t, "b")
	second := fb.submit(t, "b")
	third := fb.submit(t, "b")
	waitFor(t, "the first running", func() bool { return fb.get(t, first.ID).Status == weir.TaskRunning })
	waitFor(t, "two queued", func() bool { return fb.scope(t, "a", WorkersScope).Queued == 2 })

	fb.elect(t, "b")
	waitFor(t, "b's ledger recovered", func() bool {
		// Until b's task service leads, its term has no workers scope.
		st, err := fb.node("a").e.Scope(t.Context(), WorkersScope)
		if errors.Is(err, admission.ErrUnknownScope) {
			return false
		} else if err != nil {
			t.Fatalf("Scope(%s) on a: %v", WorkersScope, err)
		}
		return st.Used == 1 && st.Queued == 2
	})
	for i, id := range []string{second.ID, third.ID} {
		if p, ok := fb.node("a").service().Position(t.Context(), id); !ok || p.Ahead != i {
			t.Errorf("queued task %d under b: %+v, %v; want %d ahead", i+2, p, ok, i)
		}
	}
	if st := fb.scope(t, "b", WorkersScope); st.Used != 1 || st.Leases != 1 {
		t.Errorf("workers scope under b: %d used in %d leases; want the running task's one", st.Used, st.Leases)
	}
	for _, tk := range []weir.Task{first, second, third} {
		if got := fb.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
			t.Fatalf("task %+v; want succeeded", got)
		}
	}
	up := fb.up["vid/a"]
	var keys []string
	for _, j := range up.srv.Jobs() {
		keys = append(keys, j.IdempotencyKey)
		if j.Submits != 1 {
			t.Errorf("upstream job of %s submitted %d times; want once", j.IdempotencyKey, j.Submits)
		}
	}
	if want := []string{first.ID, second.ID, third.ID}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("upstream jobs in the order %v; want %v", keys, want)
	}
	if st := up.srv.Stats(); st.PeakJobsRunning != 1 {
		t.Errorf("%d jobs at once with one worker in the fleet", st.PeakJobsRunning)
	}
	waitFor(t, "every lease released", func() bool { return fb.scope(t, "b", WorkersScope).Used == 0 })
}

// TestFleetReplicaRestart: a replica that restarts (a new process: a new
// fleet engine and task service) doubles nothing: the leader's term
// still holds one lease and the same waiters, and every task runs once.
func TestFleetReplicaRestart(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 10 * time.Second}}, Workers: 1}, "a", "b")
	fb.elect(t, "a")
	tasks := []weir.Task{fb.submit(t, "b"), fb.submit(t, "b"), fb.submit(t, "a")}
	waitFor(t, "one running, two queued", func() bool {
		running := 0
		for _, tk := range tasks {
			if fb.get(t, tk.ID).Status == weir.TaskRunning {
				running++
			}
		}
		st := fb.scope(t, "a", WorkersScope)
		return running == 1 && st.Used == 1 && st.Queued == 2
	})
	old := fb.node("b")
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	if err := old.service().Stop(ctx); err != nil {
		t.Fatal(err)
	}
	old.e.Close()
	restarted := fb.addNode(t, "b", 2)
	if st := fb.scope(t, "b", WorkersScope); st.Used != 1 || st.Queued != 2 {
		t.Errorf("after b restarted: %d used, %d queued; want 1, 2", st.Used, st.Queued)
	}
	// A task submitted on the restarted replica joins the line.
	tasks = append(tasks, fb.submit(t, "b"))
	waitFor(t, "the new task queued", func() bool { _, ok := restarted.service().Position(t.Context(), tasks[3].ID); return ok })
	for _, tk := range tasks {
		if got := fb.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
			t.Fatalf("task %+v; want succeeded", got)
		}
	}
	if st := fb.up["vid/a"].srv.Stats(); st.JobsSubmitted != 4 || st.PeakJobsRunning != 1 {
		t.Errorf("upstream: %d jobs, %d at most at once; want 4, 1", st.JobsSubmitted, st.PeakJobsRunning)
	}
}

// TestFleetPollFindsLostNotices: notices that never arrive — a replica
// whose notices are lost — are made up for by the leader's poll: a
// submitted task is queued, and a cancelled one leaves the queue.
func TestFleetPollFindsLostNotices(t *testing.T) {
	t.Parallel()
	// Jobs outlast the polls' moves of the clock.
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 24 * time.Hour}}, Workers: 1}, "a", "b")
	fb.elect(t, "a")
	// Submitted on b, the running task is heard by a's listener after the
	// resync of its first LISTEN, which would otherwise find the task
	// whose notice is lost.
	waitFor(t, "a to listen", func() bool { return fb.node("a").store.listening.Load() >= 1 })
	running := fb.submit(t, "b")
	waitFor(t, "one running", func() bool { return fb.get(t, running.ID).Status == weir.TaskRunning })
	fb.node("b").store.mute.Store(true)
	lost := fb.submit(t, "b")
	if st := fb.scope(t, "a", WorkersScope); st.Queued != 0 {
		t.Fatalf("%d queued before the poll; want none (the notice was lost)", st.Queued)
	}
	fb.poll()
	waitFor(t, "the poll to queue the task", func() bool { return fb.scope(t, "a", WorkersScope).Queued == 1 })
	if got, err := fb.node("b").service().Cancel(t.Context(), lost.ID); err != nil || got.Status != weir.TaskCancelled {
		t.Fatalf("Cancel = %s, %v", got.Status, err)
	}
	if st := fb.scope(t, "a", WorkersScope); st.Queued != 1 {
		t.Fatalf("%d queued before the poll; want the cancelled task's waiter still there", st.Queued)
	}
	fb.poll()
	waitFor(t, "the poll to take the cancelled task out", func() bool { return fb.scope(t, "a", WorkersScope).Queued == 0 })
	if got := fb.get(t, running.ID); got.Status != weir.TaskRunning {
		t.Errorf("the running task %s after the polls; want still running", got.Status)
	}
	if st := fb.scope(t, "a", WorkersScope); st.Used != 1 {
		t.Errorf("%d used after the polls; want the running task's lease, still held", st.Used)
	}
}

// TestFleetResyncAfterReconnect: a leader whose listener lost
// notices reads everything again when it listens again, without waiting
// for its poll.
func TestFleetResyncAfterReconnect(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}}, Workers: 2}, "a", "b")
	fb.elect(t, "a")
	a := fb.node("a")
	// The resync of a's first LISTEN would find the task below: let it
	// happen first. A task heard and admitted shows it has, since the
	// ledger resyncs before it handles the notices that came.
	waitFor(t, "a to listen", func() bool { return a.store.listening.Load() >= 1 })
	heard := fb.submit(t, "b")
	waitFor(t, "a heard task to run", func() bool { return fb.get(t, heard.ID).Status == weir.TaskRunning })
	a.store.deaf.Store(true)
	tk := fb.submit(t, "b")
	waitFor(t, "a's listener to miss the notice", func() bool { return a.store.dropped.Load() >= 1 })
	if got := fb.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task %s with its notice lost; want queued", got.Status)
	}
	a.store.deaf.Store(false)
	a.store.reconnected()
	waitFor(t, "the resync to admit the task", func() bool { return fb.get(t, tk.ID).Status == weir.TaskRunning })
}

// TestFleetReclaimFrom: the job of a task whose replica died mid-step is
// taken over at once when the fleet forgets that replica (ReclaimFrom),
// rather than after RescueAfter, and the task ends without a second
// upstream job.
func TestFleetReclaimFrom(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 30 * time.Second}},
		Config: Config{RescueAfter: time.Hour}}, "a", "b")
	fb.elect(t, "a")
	tk := fb.submit(t, "b")
	fb.driveTo(t, tk.ID, weir.TaskRunning)
	// The job between two steps, made to look taken by replica "gone"
	// when it died.
	var job int64
	fb.drive(t, "the task's job taken by a replica that dies", func() bool {
		err := fb.db.Pool().QueryRow(t.Context(), `UPDATE river_job SET state = 'running', attempt = attempt + 1,
			attempted_at = now(), attempted_by = array_append(coalesce(attempted_by, '{}'), 'gone')
			WHERE kind = $1 AND args->>'task_id' = $2 AND state IN ('available', 'scheduled', 'retryable') RETURNING id`,
			RunArgs{}.Kind(), tk.ID).Scan(&job)
		if errors.Is(err, pgx.ErrNoRows) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	a := fb.node("a").service()
	if _, err := a.ReclaimFrom(t.Context(), "a"); err == nil {
		t.Error("ReclaimFrom of the running replica itself: no error")
	}
	// The leader forgets "gone": the service hears it from the fleet
	// and reclaims its job.
	fb.node("a").feed.Publish(admission.LeadEvent{Kind: admission.ReplicaForgotten, Replica: "gone"})
	if got := fb.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Fatalf("task %+v; want succeeded", got)
	}
	if j := fb.up["vid/a"].jobByKey(t, tk.ID); j.Submits != 1 {
		t.Errorf("upstream job submitted %d times; want once", j.Submits)
	}
	var errs []rivertype.AttemptError
	if err := fb.db.Pool().QueryRow(t.Context(), `SELECT errors FROM river_job WHERE id = $1`, job).Scan(&errs); err != nil {
		t.Fatal(err)
	}
	if len(errs) == 0 || !strings.Contains(errs[len(errs)-1].Error, "declared gone") {
		t.Errorf("job errors %+v; want the reclaim recorded", errs)
	}
	waitFor(t, "the lease released", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// unfenced is PostgreSQL's store without its fence (Fencer).
type unfenced struct {
	Store[pgx.Tx]
	Notifier
	JobReclaimer
}

// TestFleetNeeds: fleet mode refuses a store that cannot tell the
// replicas of a change (SQLite's), one that cannot fence a commit by the
// fleet's term, a replica without an id, and SoleRunner.
func TestFleetNeeds(t *testing.T) {
	t.Parallel()
	lite, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	engine := admission.NewMemory(admission.Options{})
	defer engine.Close()
	var feed admission.LeadFeed
	_, err = New(Config{Replica: "a"}, Deps[*sql.Tx]{Store: lite, Engine: engine, Planner: &testPlanner{}, Leadership: &feed})
	if err == nil || !strings.Contains(err.Error(), "fleet mode needs a store that notifies") {
		t.Errorf("New in fleet mode on SQLite: %v; want the store refused", err)
	}
	pg, err := postgres.Open(t.Context(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	_, err = New(Config{Replica: "a"}, Deps[pgx.Tx]{Store: unfenced{pg, pg, pg}, Engine: engine, Planner: &testPlanner{}, Leadership: &feed})
	if err == nil || !strings.Contains(err.Error(), "task.Fencer") {
		t.Errorf("New in fleet mode on a store without a fence: %v; want the store refused", err)
	}
	for _, cfg := range []Config{{}, {Replica: "a", SoleRunner: true}} {
		if _, err := New(cfg, Deps[pgx.Tx]{Store: pg, Engine: engine, Planner: &testPlanner{}, Leadership: &feed}); err == nil {
			t.Errorf("New(%+v) on PostgreSQL: no error", cfg)
		}
	}
	s, err := New(Config{Replica: "a"}, Deps[pgx.Tx]{Store: pg, Engine: engine, Planner: &testPlanner{}, Leadership: &feed})
	if err != nil {
		t.Fatalf("New in fleet mode on PostgreSQL: %v", err)
	}
	if _, err := s.ReclaimFrom(t.Context(), ""); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("ReclaimFrom of no replica: %v; want ErrInvalid", err)
	}
}

// TestFleetDeposedLeaderCommitsNothing: a leader whose term has passed
// in the store (paused past it, say) but who has not heard yet decides
// admissions in its engine, but its commits are refused by the store's
// fence (TermFenceTx) inside their transactions: the task stays queued,
// no job is inserted, the lease goes back, and the next leader admits
// the task, once.
func TestFleetDeposedLeaderCommitsNothing(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Workers: 1}, "a", "b")
	fb.elect(t, "a")
	a := fb.node("a")
	a.deposed.Store(true)
	tk := fb.submit(t, "b")
	waitFor(t, "a's commit refused and its lease back", func() bool {
		return a.fenced.Load() > 0 && fb.scope(t, "b", WorkersScope).Used == 0
	})
	if got := a.fencedEpoch.Load(); got != 1 {
		t.Errorf("Fence asked for epoch %d; want the term's, 1", got)
	}
	if got := fb.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task after a refused commit: %s; want queued", got.Status)
	}
	if n := fb.up["vid/a"].srv.Stats().JobsSubmitted; n != 0 {
		t.Fatalf("%d upstream jobs after a refused commit; want 0", n)
	}

	fb.elect(t, "b")
	if got := fb.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Fatalf("task under b: %+v; want succeeded", got)
	}
	if j := fb.up["vid/a"].jobByKey(t, tk.ID); j.Submits != 1 {
		t.Errorf("task submitted upstream %d times; want once", j.Submits)
	}
}

// TestFleetEndedReleasedDuringCommit: the lease of a task that ended
// goes back while a commit of admissions is still under way, not once
// it is done: the ledger's read of an ended task waits for no commit.
func TestFleetEndedReleasedDuringCommit(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Workers: 2}, "a", "b")
	fb.elect(t, "a")
	a := fb.node("a")
	first := fb.submit(t, "b")
	waitFor(t, "the first task running", func() bool { return fb.get(t, first.ID).Status == weir.TaskRunning })

	g := newFenceGate()
	a.gate.Store(g)
	var opened sync.Once
	open := func() {
		a.gate.Store(nil)
		opened.Do(func() { close(g.open) })
	}
	// A failed test lets the commit go, for the services to stop.
	t.Cleanup(open)
	second := fb.submit(t, "b")
	select {
	case <-g.entered:
	case <-time.After(waitBound):
		t.Fatal("the second task's commit did not begin")
	}
	if got := fb.scope(t, "b", WorkersScope).Used; got != 2 {
		t.Fatalf("workers scope used %d with both tasks admitted; want 2", got)
	}
	fb.driveTo(t, first.ID, weir.TaskSucceeded)
	waitFor(t, "the first task's lease back while the second's commit waits", func() bool {
		return fb.scope(t, "b", WorkersScope).Used == 1
	})
	if got := fb.get(t, second.ID); got.Status != weir.TaskQueued {
		t.Fatalf("second task %s while its commit waits; want queued", got.Status)
	}

	open()
	fb.driveTo(t, second.ID, weir.TaskSucceeded)
	waitFor(t, "every lease back", func() bool { return fb.scope(t, "b", WorkersScope).Used == 0 })
}

// TestFleetLeaderHearsItsOwnEndsInProcess: a task that ends on the
// replica that leads gives its lease back with no notice through the
// store (the leader's are muted here).
func TestFleetLeaderHearsItsOwnEndsInProcess(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Workers: 1}, "a")
	fb.elect(t, "a")
	a := fb.node("a")
	waitFor(t, "a to listen", func() bool { return a.store.listening.Load() >= 1 })
	tk := fb.submit(t, "a")
	waitFor(t, "the task running", func() bool { return fb.get(t, tk.ID).Status == weir.TaskRunning })
	a.store.mute.Store(true)
	fb.driveTo(t, tk.ID, weir.TaskSucceeded)
	waitFor(t, "the lease back", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// TestFleetEndNeedsNoTransaction: a task with no callback ends in one
// statement, in no transaction of the service's (there is no event's
// job to insert with it), and its lease goes back.
func TestFleetEndNeedsNoTransaction(t *testing.T) {
	t.Parallel()
	// The job outlasts the test: only the end below ends the task.
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 24 * time.Hour}}, Workers: 1}, "a", "b")
	fb.elect(t, "a")
	b := fb.node("b")
	waitFor(t, "a to listen", func() bool { return fb.node("a").store.listening.Load() >= 1 })
	tk := fb.submit(t, "a")
	waitFor(t, "the task running", func() bool { return fb.get(t, tk.ID).Status == weir.TaskRunning })
	txs := b.store.txs.Load()
	if err := b.service().finishRunning(t.Context(), fb.get(t, tk.ID), weir.TaskUpdate{Status: weir.TaskFailed, ErrorCode: "test"}); err != nil {
		t.Fatal(err)
	}
	if n := b.store.txs.Load() - txs; n != 0 {
		t.Errorf("the end took %d transactions; want none", n)
	}
	if got := fb.get(t, tk.ID); got.Status != weir.TaskFailed {
		t.Errorf("task %s; want failed", got.Status)
	}
	waitFor(t, "the lease back", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// TestFleetSubmitAfterThePollAdmittedIt: a task submitted to the leader
// whose create has committed, but whose own enqueue comes only after the
// ledger's poll found it queued and it was admitted, is not admitted a
// second time: it holds one lease, given back at its end.
func TestFleetSubmitAfterThePollAdmittedIt(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Workers: 2}, "a")
	fb.elect(t, "a")
	a := fb.node("a")
	// fb.poll moves the clock to the armed poll's time: it must be armed.
	waitFor(t, "the first poll armed", func() bool { return fb.clock.polls.Load() >= 1 })
	held := make(chan string, 1)
	resume := make(chan struct{})
	hold := func(id string) {
		held <- id
		<-resume
	}
	a.store.created.Store(&hold)
	submitted := make(chan weir.Task, 1)
	go func() { submitted <- fb.submit(t, "a") }()
	var id string
	select {
	case id = <-held:
	case <-time.After(waitBound):
		t.Fatal("the task was not created")
	}
	a.store.created.Store(nil)
	fb.poll()
	waitFor(t, "the task admitted by the poll", func() bool { return fb.get(t, id).Status != weir.TaskQueued })
	close(resume)
	<-submitted
	if got := fb.scope(t, "a", WorkersScope).Used; got != 1 {
		t.Errorf("workers scope used %d once the submission enqueued the admitted task; want 1", got)
	}
	fb.driveTo(t, id, weir.TaskSucceeded)
	waitFor(t, "every lease back", func() bool { return fb.scope(t, "a", WorkersScope).Used == 0 })
}

// TestFleetAdmissionCommitsWhileThePollReads: the leader's poll reads
// the store without holding the dispatcher's commits: a task submitted
// while the poll's read is held is admitted, and the poll, which read
// the store before that commit, neither gives back nor doubles its
// lease.
func TestFleetAdmissionCommitsWhileThePollReads(t *testing.T) {
	t.Parallel()
	// The job outlasts the test: the lease is held throughout.
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 24 * time.Hour}}, Workers: 2}, "a")
	fb.elect(t, "a")
	a := fb.node("a")
	waitFor(t, "a to listen", func() bool { return a.store.listening.Load() >= 1 })
	waitFor(t, "the fleet term ready", func() bool { return a.service().current() != nil })
	listed := make(chan struct{}, 1)
	resume := make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release)
	hold := func() {
		listed <- struct{}{}
		<-resume
	}
	a.store.listed.Store(&hold)
	fb.poll()
	select {
	case <-listed:
	case <-time.After(waitBound):
		t.Fatal("the poll did not read the store")
	}
	tk := fb.submit(t, "a")
	waitFor(t, "the task admitted while the poll's read is held", func() bool { return fb.get(t, tk.ID).Status != weir.TaskQueued })
	// The ledger arms its next poll once the held one has acted.
	armed := fb.clock.polls.Load()
	a.store.listed.Store(nil)
	release()
	waitFor(t, "the held poll done", func() bool { return fb.clock.polls.Load() > armed })
	if got := fb.get(t, tk.ID).Status; got.Terminal() {
		t.Fatalf("task %s; want it admitted or running", got)
	}
	if got := fb.scope(t, "a", WorkersScope).Used; got != 1 {
		t.Errorf("workers scope used %d after the poll that read the task before its commit; want 1", got)
	}
}

// TestFleetPollReadsWholeOnlyWhatItActsOn: the leader's poll reads the
// tasks that have not ended as their states, and whole only the task it
// acts on: a queued task whose notice was lost, which it queues; not
// the running task whose lease it holds, nor the queued ones it has
// waiters for.
func TestFleetPollReadsWholeOnlyWhatItActsOn(t *testing.T) {
	t.Parallel()
	// The job outlasts the test: its lease is held throughout, and the
	// tasks after it wait.
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 24 * time.Hour}}, Workers: 1}, "a", "b")
	fb.elect(t, "a")
	a := fb.node("a")
	waitFor(t, "a to listen", func() bool { return a.store.listening.Load() >= 1 })
	waitFor(t, "the fleet term ready", func() bool { return a.service().current() != nil })
	running := fb.submit(t, "a")
	waitFor(t, "one running", func() bool { return fb.get(t, running.ID).Status == weir.TaskRunning })
	for range 3 {
		fb.submit(t, "a")
	}
	waitFor(t, "three waiting", func() bool { return fb.scope(t, "a", WorkersScope).Queued == 3 })
	fb.node("b").store.mute.Store(true)
	lost := fb.submit(t, "b")
	armed := fb.clock.polls.Load()
	read := a.store.wholeReads.Load()
	fb.poll()
	waitFor(t, "the poll done", func() bool { return fb.clock.polls.Load() > armed })
	if st := fb.scope(t, "a", WorkersScope); st.Queued != 4 || st.Used != 1 {
		t.Errorf("workers scope %d queued, %d used after the poll; want 4 (the lost task's too), 1", st.Queued, st.Used)
	}
	if got := fb.get(t, lost.ID); got.Status != weir.TaskQueued {
		t.Errorf("the lost task %s; want queued", got.Status)
	}
	if n := a.store.wholeReads.Load() - read; n != 1 {
		t.Errorf("the poll read %d tasks whole; want 1, the task its notice was lost of", n)
	}
}

// TestFleetPollPacedByItsCost: a poll that takes long puts the next one
// off by pollPace times as long, beyond what FleetPoll says.
func TestFleetPollPacedByItsCost(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{}, "a")
	fb.elect(t, "a")
	a := fb.node("a")
	// Recovered, and the first poll armed: the next read of the store
	// is the poll's.
	waitFor(t, "a to listen", func() bool { return a.store.listening.Load() >= 1 })
	waitFor(t, "the first poll armed", func() bool { return fb.clock.polls.Load() >= 1 })
	// The poll's read takes an hour of the fake clock. So does any read
	// from its time on: a read the listener's start asked for may run
	// just before the poll's, and it is the poll's that must be slow.
	due := *fb.clock.pollAt.Load()
	slow := func() {
		if !fb.clock.Now().Before(due) {
			fb.clock.Advance(fleetTestPoll)
		}
	}
	a.store.statesListed.Store(&slow)
	t.Cleanup(func() { a.store.statesListed.Store(nil) })
	fb.poll()
	waitFor(t, "the next poll put off by ten times the last one's hour", func() bool {
		return time.Duration(fb.clock.longest.Load()) >= pollPace*fleetTestPoll
	})
}

// TestFleetAdmissionCommitsWhileANoticeIsRead: the leader reads the
// tasks of the notices it hears without holding the dispatcher's
// commits: a task submitted while that read is held is admitted, and
// the task heard of is queued and admitted once the read is let go.
func TestFleetAdmissionCommitsWhileANoticeIsRead(t *testing.T) {
	t.Parallel()
	// The jobs outlast the test: the leases are held throughout.
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 24 * time.Hour}}, Workers: 2}, "a", "b")
	fb.elect(t, "a")
	a := fb.node("a")
	waitFor(t, "a to listen", func() bool { return a.store.listening.Load() >= 1 })
	waitFor(t, "the fleet term ready", func() bool { return a.service().current() != nil })
	fb.node("b").store.mute.Store(true)
	heard := fb.submit(t, "b")
	reading := make(chan struct{}, 1)
	resume := make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release)
	hold := func(ids []string) {
		if slices.Contains(ids, heard.ID) {
			reading <- struct{}{}
			<-resume
		}
	}
	a.store.got.Store(&hold)
	a.store.hear(string(noticeQueued), heard.ID)
	select {
	case <-reading:
	case <-time.After(waitBound):
		t.Fatal("the ledger did not read the task it heard of")
	}
	tk := fb.submit(t, "a")
	waitFor(t, "the task admitted while the notice's read is held", func() bool { return fb.get(t, tk.ID).Status != weir.TaskQueued })
	a.store.got.Store(nil)
	release()
	waitFor(t, "the task heard of admitted", func() bool { return fb.get(t, heard.ID).Status != weir.TaskQueued })
	if got := fb.scope(t, "a", WorkersScope).Used; got != 2 {
		t.Errorf("workers scope used %d; want 2, a lease for each task", got)
	}
}

// TestFleetFollowReadsItsTaskOnlyWhenANoticeMayBeMissed: a worker
// following a running task on a fleet polls its upstream job without
// reading the task from the store first while its replica hears every
// notice (a cancel elsewhere ends its wait: TestFleetCancelOnAnotherReplica);
// after its listener connects again, or a cancel is heard, the next poll
// reads the task first.
func TestFleetFollowReadsItsTaskOnlyWhenANoticeMayBeMissed(t *testing.T) {
	t.Parallel()
	// Polls every second, five to an execution of the job (holdFor).
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 24 * time.Hour}}, Workers: 1,
		Config: Config{PollMin: time.Second, PollMax: time.Second}}, "a", "b")
	fb.elect(t, "a")
	for _, id := range []string{"a", "b"} {
		waitFor(t, id+" to listen", func() bool { return fb.node(id).store.listening.Load() >= 1 })
	}
	tk := fb.submit(t, "b")
	waitFor(t, "the task running", func() bool { return fb.get(t, tk.ID).Status == weir.TaskRunning })
	var reads atomic.Int64
	count := func(ids []string) {
		if slices.Contains(ids, tk.ID) {
			reads.Add(1)
		}
	}
	for _, id := range []string{"a", "b"} {
		fb.node(id).store.got.Store(&count)
	}
	polls := func() int64 { return fb.up["vid/a"].srv.Stats().JobPolls }
	fb.drive(t, "three polls", func() bool { return polls() >= 3 })
	if n := reads.Load(); n != 0 {
		t.Fatalf("%d reads of the task over three polls with every notice heard; want none", n)
	}
	for _, id := range []string{"a", "b"} {
		fb.node(id).store.reconnected()
	}
	fb.drive(t, "a fourth poll", func() bool { return polls() >= 4 })
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads of the task by the poll after the listeners connected again; want 1", n)
	}
	// A cancel of another task: one heard before this task's run was
	// known would have ended nothing.
	for _, id := range []string{"a", "b"} {
		fb.node(id).store.hear(string(noticeCancelled), "task_other")
	}
	fb.drive(t, "a fifth poll", func() bool { return polls() >= 5 })
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads of the task after a cancel was heard; want 2", n)
	}
	if got := fb.get(t, tk.ID); got.Status != weir.TaskRunning {
		t.Errorf("task %s; want still running", got.Status)
	}
}

// TestFleetSubmissionNotWaitingForItsNotice: a task submitted to a
// replica that does not lead is answered once it is stored, while its
// notice to the leader has not gone out; the notice, when it does, queues
// it there.
func TestFleetSubmissionNotWaitingForItsNotice(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Workers: 1}, "a", "b")
	fb.elect(t, "a")
	waitFor(t, "a to listen", func() bool { return fb.node("a").store.listening.Load() >= 1 })
	release := fb.holdNotices(t, "b")
	tk := weir.Task{KeyID: fb.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"a heron at dawn","seconds":"4"}`)}
	submitted := make(chan error, 1)
	go func() {
		_, err := fb.node("b").service().Submit(t.Context(), &tk)
		submitted <- err
	}()
	select {
	case err := <-submitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitBound):
		t.Fatal("the submission waited for its notice")
	}
	if got := fb.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task %s with its notice held; want queued", got.Status)
	}
	release()
	fb.driveTo(t, tk.ID, weir.TaskSucceeded)
}
