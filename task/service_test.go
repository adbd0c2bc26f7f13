package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestRunToSuccess: a submitted task is planned, stored, admitted, run
// as one upstream job that it follows to its end, and stored succeeded
// with the upstream's object; its capacity is released and every
// transition counted.
func TestRunToSuccess(t *testing.T) {
	t.Parallel()
	m := &recordingMetrics{}
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: 3 * time.Second}},
		Config:    Config{Metrics: m},
	})
	tk := b.submit(t, s, nil)
	if !strings.HasPrefix(tk.ID, "task_") || tk.Status != weir.TaskQueued || tk.Candidate != -1 || !tk.CreatedAt.Equal(testStart) {
		t.Errorf("submitted task %+v: want a task_ id, queued, no candidate, created now", tk)
	}
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded || got.Progress != 100 || got.PlatformModel != "vid/a" || got.Candidate != 0 || got.UpstreamID == "" {
		t.Fatalf("task after its run: %+v; want succeeded at 100%% on vid/a", got)
	}
	var result struct{ ID, Status string }
	if err := json.Unmarshal(got.Result, &result); err != nil || result.ID != got.UpstreamID || result.Status != "completed" {
		t.Errorf("result %s (%v): want the upstream's completed job %s", got.Result, err, got.UpstreamID)
	}
	job := b.up["vid/a"].jobByKey(t, tk.ID)
	if job.ID != got.UpstreamID || job.Submits != 1 || job.Status != "completed" {
		t.Errorf("upstream job %+v: want the task's one job, submitted once, completed", job)
	}
	if ended := got.FinishedAt.Sub(testStart); ended < 3*time.Second || ended > 3*time.Second+pollFloor*10 {
		t.Errorf("task finished %s after its submit, want soon after its 3s job ended", ended)
	}
	b.waitReleased(t)
	b.endedMu.Lock()
	if len(b.ended) != 1 || b.ended[0].ID != tk.ID || b.ended[0].Status != weir.TaskSucceeded || b.ended[0].FinishedAt.Sub(got.FinishedAt).Abs() > time.Millisecond {
		t.Errorf("ended %+v: want the task, once, succeeded when it finished", b.ended)
	}
	b.endedMu.Unlock()
	polls := b.up["vid/a"].srv.Stats().JobPolls
	if polls > 8 {
		t.Errorf("%d polls of a 3s job, want a few (the schedule aims at its end)", polls)
	}
	if h := b.planner.reports(); len(h) == 0 || slices.ContainsFunc(h, func(r healthReport) bool { return !r.ok || r.pm != "vid/a" }) {
		t.Errorf("health reports %+v, want vid/a ok for every call", h)
	}
	trans, waited, ran := m.got()
	if want := []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning, weir.TaskSucceeded}; !slices.Equal(trans, want) || waited != 1 || ran != 1 {
		t.Errorf("metrics: transitions %v, waited %d, ran %d; want %v, 1, 1", trans, waited, ran, want)
	}
}

// TestRunRecordsProgress: while the upstream job runs, the stored
// task is running, its progress rising as the polls see it.
// TestJobRunsFromItsPlannersQueue: a task admitted to a platform model
// whose kind older builds cannot run has its job on the queue its
// Planner names (QueueRunV2), which such builds do not work, and runs
// from there; the others stay on River's default queue.
func TestJobRunsFromItsPlannersQueue(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {}, "vid/b": {}},
		Models:    map[string][]string{"old": {"vid/a"}, "new": {"vid/b"}},
	})
	b.planner.queues = map[string]string{"vid/b": QueueRunV2}
	old := b.submit(t, s, func(t *weir.Task) { t.Model = "old" })
	fresh := b.submit(t, s, func(t *weir.Task) { t.Model = "new" })
	for _, tk := range []weir.Task{old, fresh} {
		if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
			t.Fatalf("task %s: %+v; want succeeded", tk.Model, got)
		}
	}
	for _, c := range []struct {
		tk   weir.Task
		want string
	}{{old, river.QueueDefault}, {fresh, QueueRunV2}} {
		tk, want := c.tk, c.want
		var queue string
		if err := b.store.SQL().QueryRow(`SELECT queue FROM river_job WHERE kind = ? AND json_extract(args, '$.task_id') = ?`,
			RunArgs{}.Kind(), tk.ID).Scan(&queue); err != nil || queue != want {
			t.Errorf("the job of the %s model's task ran from queue %q (%v); want %q", tk.Model, queue, err, want)
		}
	}
}

func TestRunRecordsProgress(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 8 * time.Second}}})
	tk := b.submit(t, s, nil)
	var seen []int
	b.drive(t, "task to succeeded", func() bool {
		got := b.get(t, tk.ID)
		if got.Status == weir.TaskRunning && (len(seen) == 0 || seen[len(seen)-1] != got.Progress) {
			seen = append(seen, got.Progress)
		}
		return got.Status.Terminal()
	})
	if got := b.get(t, tk.ID); got.Status != weir.TaskSucceeded {
		t.Fatalf("task %s, want succeeded", got.Status)
	}
	between := 0
	for i, p := range seen {
		if i > 0 && p < seen[i-1] {
			t.Errorf("progress went back: %v", seen)
		}
		if p > 0 && p < 100 {
			between++
		}
	}
	if between < 2 {
		t.Errorf("progress seen while running: %v; want it recorded as it rose", seen)
	}
}

// TestRunUpstreamJobFails: a job that ends failed, with no attempts left,
// fails the task with the upstream's error.
func TestRunUpstreamJobFails(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second, JobFailureRate: 1}},
		Config:    Config{MaxAttempts: 1},
	})
	tk := b.submit(t, s, nil)
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskFailed || got.ErrorCode != "video_generation_failed" || got.ErrorMessage == "" || len(got.Result) == 0 {
		t.Fatalf("task %+v: want failed with the upstream's code and object", got)
	}
	if n := b.up["vid/a"].srv.Stats().JobsSubmitted; n != 1 {
		t.Errorf("%d upstream jobs, want 1 (no attempts left)", n)
	}
	b.waitReleased(t)
}

// TestRunBadInputFails: input that is not a JSON object fails the task
// when it is to be submitted, and nothing is sent upstream.
func TestRunBadInputFails(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{})
	tk := b.submit(t, s, func(tk *weir.Task) { tk.Input = []byte(`["not", "an object"]`) })
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskFailed || got.ErrorCode != "invalid_request" {
		t.Fatalf("task %+v: want failed invalid_request", got)
	}
	if n := b.up["vid/a"].srv.Stats().Requests; n != 0 {
		t.Errorf("%d requests upstream, want none", n)
	}
}

// TestSubmitRefusedPlanStoresNothing: a task the planner cannot serve is
// refused with its error, and nothing is stored.
func TestSubmitRefusedPlanStoresNothing(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{})
	tk := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "no-such-model", Input: []byte(`{}`)}
	created, err := s.Submit(t.Context(), &tk)
	if created || !errors.Is(err, errUnknownModel) {
		t.Fatalf("Submit of an unplannable task = %v, %v; want the planner's error", created, err)
	}
	if all, err := s.List(t.Context(), weir.TaskFilter{}); err != nil || len(all) != 0 {
		t.Errorf("tasks stored: %d (%v), want none", len(all), err)
	}
}

// TestSubmitIdempotent: a second submission with the key's idempotency
// key returns the first task, not created, and runs nothing twice.
func TestSubmitIdempotent(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{})
	first := b.submit(t, s, func(tk *weir.Task) { tk.IdempotencyKey = "idem-1" })
	again := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"x"}`), IdempotencyKey: "idem-1"}
	created, err := s.Submit(t.Context(), &again)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("second Submit = %v, %v, id %s; want the first task %s, not created", created, err, again.ID, first.ID)
	}
	b.driveTo(t, first.ID, weir.TaskSucceeded)
	if all, _ := s.List(t.Context(), weir.TaskFilter{}); len(all) != 1 {
		t.Errorf("%d tasks stored, want 1", len(all))
	}
	if st := b.up["vid/a"].srv.Stats(); st.JobsSubmitted != 1 {
		t.Errorf("%d upstream jobs, want 1", st.JobsSubmitted)
	}
}

// TestSubmitConcurrentStoredAndQueuedOnce: submissions that arrive
// together (their creates share the store's group commit) each get
// their own task's fate: every one accepted is stored and waits in the
// engine once; one the store refuses (a taken id) fails alone; two of
// one idempotency key get one task.
func TestSubmitConcurrentStoredAndQueuedOnce(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Limits: map[string]int64{"vid/a": 1}})
	defer b.hold(t, "vid/a", 1)()
	first := b.submit(t, s, nil)
	const n, taken, idemA, idemB = 16, 5, 9, 10
	tasks := make([]weir.Task, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		tasks[i] = weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"x"}`)}
		switch i {
		case taken:
			tasks[i].ID = first.ID
		case idemA, idemB:
			tasks[i].IdempotencyKey = "idem-1"
		}
		wg.Go(func() { created[i], errs[i] = s.Submit(t.Context(), &tasks[i]) })
	}
	wg.Wait()
	if !errors.Is(errs[taken], weir.ErrConflict) {
		t.Errorf("the submission of a taken id: %v, want weir.ErrConflict", errs[taken])
	}
	if created[idemA] == created[idemB] || tasks[idemA].ID != tasks[idemB].ID {
		t.Errorf("two submissions of one idempotency key: created %v and %v, tasks %s and %s; want one task, created once",
			created[idemA], created[idemB], tasks[idemA].ID, tasks[idemB].ID)
	}
	ids := map[string]bool{first.ID: true}
	for i := range n {
		if i == taken {
			continue
		}
		if errs[i] != nil || (!created[i] && i != idemA && i != idemB) {
			t.Errorf("submission %d = %v, %v; want created", i, created[i], errs[i])
		}
		ids[tasks[i].ID] = true
	}
	for id := range ids {
		if got := b.get(t, id); got.Status != weir.TaskQueued {
			t.Errorf("task %s stored %s, want queued", id, got.Status)
		}
		if _, ok := s.Position(t.Context(), id); !ok {
			t.Errorf("task %s is not waiting in the engine", id)
		}
	}
	if all, err := s.List(t.Context(), weir.TaskFilter{}); err != nil || len(all) != len(ids) {
		t.Errorf("%d tasks stored (%v), want %d", len(all), err, len(ids))
	}
	if st, err := b.engine.Scope(t.Context(), WorkersScope); err != nil || st.Queued != len(ids) {
		t.Errorf("the workers scope queues %d (%v), want each of the %d tasks once", st.Queued, err, len(ids))
	}
}

// TestSubmitDeadline: a task's deadline is its submission plus MaxWait;
// a caller's earlier deadline is kept, a later one cut to MaxWait.
func TestSubmitDeadline(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Config: Config{MaxWait: time.Hour}, Limits: map[string]int64{"vid/a": 1}})
	defer b.hold(t, "vid/a", 1)()
	for _, tc := range []struct {
		set, want time.Duration
	}{{0, time.Hour}, {10 * time.Minute, 10 * time.Minute}, {3 * time.Hour, time.Hour}} {
		tk := b.submit(t, s, func(tk *weir.Task) {
			if tc.set > 0 {
				tk.Deadline = testStart.Add(tc.set)
			}
		})
		if got := b.get(t, tk.ID).Deadline; !got.Equal(testStart.Add(tc.want)) {
			t.Errorf("deadline asked +%s: stored +%s, want +%s", tc.set, got.Sub(testStart), tc.want)
		}
	}
}

// TestSubmitQueueFull: a task that cannot wait (its only scope's queue is
// full) is stored failed with queue_full, and Submit says why.
func TestSubmitQueueFull(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{})
	if err := b.engine.SetScope(t.Context(), "pm:vid/a", admission.ScopeConfig{Limit: 1, QueueLimit: 1}); err != nil {
		t.Fatal(err)
	}
	defer b.hold(t, "vid/a", 1)()
	waiting := b.submit(t, s, nil)
	tk := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"x"}`)}
	created, err := s.Submit(t.Context(), &tk)
	if !created || !errors.Is(err, admission.ErrQueueFull) {
		t.Fatalf("Submit past the queue limit = %v, %v; want created and ErrQueueFull", created, err)
	}
	if tk.Status != weir.TaskFailed || tk.ErrorCode != "queue_full" || !strings.Contains(tk.ErrorMessage, "queue_limit 1") {
		t.Errorf("task returned %+v: want it failed queue_full, naming the limit", tk)
	}
	if got := b.get(t, tk.ID); got.Status != weir.TaskFailed {
		t.Errorf("stored task %s, want failed", got.Status)
	}
	if p, ok := s.Position(t.Context(), waiting.ID); !ok || p.Ahead != 0 || p.Scope != "pm:vid/a" {
		t.Errorf("Position of the waiting task = %+v, %v; want first on pm:vid/a", p, ok)
	}
	if _, ok := s.Position(t.Context(), tk.ID); ok {
		t.Error("the failed task has a queue position")
	}
}

// TestDispatcherAdmitsInOrder: tasks waiting for one platform's capacity
// are admitted and run in priority, then submission, order, one at a
// time, each admission committed with its River job.
func TestDispatcherAdmitsInOrder(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second}},
		Limits:    map[string]int64{"vid/a": 1},
	})
	release := b.hold(t, "vid/a", 1)
	low1 := b.submit(t, s, nil)
	low2 := b.submit(t, s, nil)
	high := b.submit(t, s, func(tk *weir.Task) { tk.Priority = 5 })
	for i, id := range []string{high.ID, low1.ID, low2.ID} {
		if p, ok := s.Position(t.Context(), id); !ok || p.Ahead != i {
			t.Errorf("position of task %d in order: %+v, %v; want %d ahead", i, p, ok, i)
		}
	}
	if got := b.get(t, low1.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task %s while the capacity is held, want queued", got.Status)
	}
	release()
	for _, id := range []string{high.ID, low1.ID, low2.ID} {
		b.driveTo(t, id, weir.TaskSucceeded)
	}
	keys := b.up["vid/a"].jobKeys()
	if want := []string{high.ID, low1.ID, low2.ID}; !slices.Equal(keys, want) {
		t.Errorf("upstream jobs in the order %v, want %v", keys, want)
	}
	if st := b.up["vid/a"].srv.Stats(); st.PeakJobsRunning != 1 {
		t.Errorf("%d jobs ran at once on a platform of capacity 1", st.PeakJobsRunning)
	}
	prev := b.get(t, high.ID)
	for _, id := range []string{low1.ID, low2.ID} {
		cur := b.get(t, id)
		if cur.AdmittedAt.Before(prev.FinishedAt) {
			t.Errorf("task %s admitted at +%s, before the one ahead ended (+%s)", id, cur.AdmittedAt.Sub(testStart), prev.FinishedAt.Sub(testStart))
		}
		prev = cur
	}
}

// TestExpiresAtMaxWait: a task still queued at its deadline expires, with
// a message saying so, and leaves the queue.
func TestExpiresAtMaxWait(t *testing.T) {
	t.Parallel()
	m := &recordingMetrics{}
	s, b := setup(t, setupOpts{Config: Config{MaxWait: time.Hour, Metrics: m}, Limits: map[string]int64{"vid/a": 1}})
	defer b.hold(t, "vid/a", 1)()
	tk := b.submit(t, s, nil)
	b.clock.Advance(time.Hour - time.Second)
	if got := b.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task %s a second before its deadline, want queued", got.Status)
	}
	b.clock.Advance(time.Second)
	got := b.driveTo(t, tk.ID, weir.TaskExpired)
	if got.ErrorCode != "expired" || !strings.Contains(got.ErrorMessage, "maximum wait (1h0m0s)") || !got.FinishedAt.Equal(testStart.Add(time.Hour)) {
		t.Errorf("expired task %+v: want code expired, its maximum wait named, finished at its deadline", got)
	}
	if _, ok := s.Position(t.Context(), tk.ID); ok {
		t.Error("the expired task still has a queue position")
	}
	// The transition is counted just after it is stored.
	waitFor(t, "the expiry counted", func() bool { trans, _, _ := m.got(); return len(trans) >= 2 })
	if trans, _, _ := m.got(); !slices.Equal(trans, []weir.TaskStatus{weir.TaskQueued, weir.TaskExpired}) {
		t.Errorf("transitions %v, want queued then expired", trans)
	}
}

// TestStopTwice: a second Stop returns at once with the first's result.
func TestStopTwice(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, setupOpts{NoStart: true})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		done := make(chan error, 1)
		go func() { done <- s.Stop(t.Context()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Stop %d: %v", i+1, err)
			}
		case <-time.After(waitBound):
			t.Fatalf("Stop %d did not return", i+1)
		}
	}
}

// TestExpiresAtOnceWithNoWaitLeft: a task whose deadline has already
// passed when it would queue — a max wait of 0 with the capacity taken —
// expires; it is not failed as if it had no candidate.
func TestExpiresAtOnceWithNoWaitLeft(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Limits: map[string]int64{"vid/a": 1}})
	defer b.hold(t, "vid/a", 1)()
	tk := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"x"}`), Deadline: testStart}
	created, err := s.Submit(t.Context(), &tk)
	if !created || !errors.Is(err, admission.ErrTimeout) {
		t.Fatalf("Submit with no wait left = %v, %v; want created and ErrTimeout", created, err)
	}
	if got := b.get(t, tk.ID); got.Status != weir.TaskExpired || got.ErrorCode != "expired" {
		t.Errorf("task %s %s (%s), want expired", got.Status, got.ErrorCode, got.ErrorMessage)
	}
}

// TestAdmissionCommitFailure: an admission whose commit fails (the store
// refuses it) gives its capacity back, and the task stays queued and
// queues again after admitRetry; once the store works, it runs.
func TestAdmissionCommitFailure(t *testing.T) {
	t.Parallel()
	logs := newLogCounter()
	m := &recordingMetrics{}
	s, b := setup(t, setupOpts{Logger: slog.New(logs), Config: Config{Metrics: m}})
	db := b.store.SQL()
	if _, err := db.Exec(`CREATE TRIGGER refuse_admit BEFORE UPDATE OF status ON tasks
		WHEN NEW.status = 'admitted' BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END`); err != nil {
		t.Fatal(err)
	}
	tk := b.submit(t, s, nil)
	const failed = "admission commit failed; tasks queue again"
	waitFor(t, "an admission commit to fail", func() bool { return m.dispatched("commit_failed") >= 1 })
	// It queues again after a wait, not in a busy loop.
	waitFor(t, "the task to wait before it queues again", func() bool { at, ok := b.clock.next(); return ok && at.Equal(testStart.Add(admitRetry)) })
	if n, logged := m.dispatched("commit_failed"), logs.count(failed); n != 1 || logged != 1 {
		t.Errorf("%d failed commits before the clock moved (%d logged), want 1", n, logged)
	}
	if got := b.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Fatalf("task %s after its admission failed to commit, want queued", got.Status)
	}
	b.waitReleased(t)
	b.clock.Advance(admitRetry)
	waitFor(t, "the commit to fail again", func() bool { return m.dispatched("commit_failed") >= 2 })
	if _, err := db.Exec(`DROP TRIGGER refuse_admit`); err != nil {
		t.Fatal(err)
	}
	b.driveTo(t, tk.ID, weir.TaskSucceeded)
	b.waitReleased(t)
	if n := b.up["vid/a"].srv.Stats().JobsSubmitted; n != 1 {
		t.Errorf("%d upstream jobs, want 1", n)
	}
}

// TestAdmissionCommitBacksOff: while the store keeps refusing
// admissions, a task queues again after a wait that doubles with each
// failure in a row (1 s, then about 2 s, then about 4 s, up to 30 s),
// not every second for ever. Each failure is counted; the log has the
// 1st, 5th, 7th and 10th.
func TestAdmissionCommitBacksOff(t *testing.T) {
	t.Parallel()
	logs := newLogCounter()
	m := &recordingMetrics{}
	s, b := setup(t, setupOpts{Logger: slog.New(logs), Config: Config{Metrics: m}})
	if _, err := b.store.SQL().Exec(`CREATE TRIGGER refuse_admit BEFORE UPDATE OF status ON tasks
		WHEN NEW.status = 'admitted' BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END`); err != nil {
		t.Fatal(err)
	}
	b.submit(t, s, nil)
	const failed = "admission commit failed; tasks queue again"
	waits := []time.Duration{admitRetry, 2 * admitRetry, 4 * admitRetry, 8 * admitRetry, 16 * admitRetry}
	for range 5 {
		waits = append(waits, admitRetryMax)
	}
	for i, want := range waits {
		waitFor(t, "an admission commit to fail", func() bool { return m.dispatched("commit_failed") >= i+1 })
		var wait time.Duration
		waitFor(t, "the task's wait before it queues again", func() bool {
			at, ok := b.clock.next()
			wait = at.Sub(b.clock.Now())
			return ok && wait > 0
		})
		if wait > want || wait < want-want/5 {
			t.Fatalf("failure %d: the task queues again after %s; want %s less at most a fifth", i+1, wait, want)
		}
		b.clock.Advance(wait)
	}
	if n := logs.count(failed); n != 4 {
		t.Errorf("%d of 10 failed commits logged, want 4 (the 1st, 5th, 7th and 10th)", n)
	}
}

// TestPoisonTaskFailsAlone: a task whose admission the store refuses
// while it takes the others' fails with dispatch_failed, alone; the other
// tasks run, and nothing queues again in a loop.
func TestPoisonTaskFailsAlone(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{})
	if _, err := b.store.SQL().Exec(`CREATE TRIGGER refuse_poison BEFORE UPDATE OF status ON tasks
		WHEN NEW.status = 'admitted' AND CAST(OLD.input AS TEXT) LIKE '%poison%' BEGIN SELECT RAISE(ABORT, 'corrupt row (test)'); END`); err != nil {
		t.Fatal(err)
	}
	poison := b.submit(t, s, func(tk *weir.Task) { tk.Input = []byte(`{"prompt":"poison","seconds":"4"}`) })
	good := b.submit(t, s, nil)
	// Alone, the poison task cannot be told from a store that is down:
	// it waits; once another commit went through, it is judged.
	deadline := time.Now().Add(waitBound)
	for b.get(t, poison.ID).Status == weir.TaskQueued {
		if time.Now().After(deadline) {
			t.Fatal("the poison task stayed queued")
		}
		if at, ok := b.clock.next(); ok {
			b.clock.Advance(at.Sub(b.clock.Now()))
		}
		time.Sleep(time.Millisecond)
	}
	if got := b.get(t, poison.ID); got.Status != weir.TaskFailed || got.ErrorCode != codeDispatchFailed {
		t.Fatalf("the poison task: %s %s (%s); want failed %s", got.Status, got.ErrorCode, got.ErrorMessage, codeDispatchFailed)
	}
	b.driveTo(t, good.ID, weir.TaskSucceeded)
	b.waitReleased(t)
}

// TestStopWithoutStart: a service that never started (its Start failed
// before it ran anything, say) stops at once.
func TestStopWithoutStart(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, setupOpts{NoStart: true})
	done := make(chan error, 1)
	go func() { done <- s.Stop(t.Context()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("Stop of a service never started: %v", err)
		}
	case <-time.After(waitBound):
		t.Fatal("Stop of a service never started did not return")
	}
}

// TestRequeueFailureDefersPassingTrouble: a task that cannot queue again
// for a passing reason (a full queue, the store failing) is tried again
// later, after a wait that grows, and stays queued; one whose trouble
// lasts (no candidate) fails; a shutdown leaves it as it is.
func TestRequeueFailureDefersPassingTrouble(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{NoStart: true})
	tk := weir.Task{ID: NewID("task"), KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"x"}`),
		Status: weir.TaskQueued, Candidate: -1, CreatedAt: testStart}
	if _, err := b.store.TaskCreate(t.Context(), &tk); err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	later := func(id string, d time.Duration) {
		if id != tk.ID {
			t.Errorf("later(%s), want %s", id, tk.ID)
		}
		waits = append(waits, d)
	}
	ctx := t.Context()
	s.requeueFailed(ctx, tk.ID, &admission.QueueFullError{Scope: "pm:vid/a"}, later)
	s.requeueFailed(ctx, tk.ID, errors.New("database is locked"), later)
	s.requeueFailed(ctx, tk.ID, admission.ErrClosed, later)
	if len(waits) != 2 || waits[0] != admitRetry || waits[1] <= waits[0] {
		t.Fatalf("waits %v; want admitRetry, then longer, and none for a shutdown", waits)
	}
	if got := b.get(t, tk.ID); got.Status != weir.TaskQueued {
		t.Fatalf("after passing trouble the task is %s; want queued", got.Status)
	}
	s.requeueFailed(ctx, tk.ID, fmt.Errorf("%w: its model is gone", admission.ErrNoCandidate), later)
	if got := b.get(t, tk.ID); got.Status != weir.TaskFailed || len(waits) != 2 {
		t.Errorf("after lasting trouble the task is %s (%d waits); want failed", got.Status, len(waits))
	}
}

// Alone, a task's job finds a River worker free while the ended task's
// execution still returns its own; in a fleet a replica runs at most its
// own workers; and River's bound on a queue's workers is never passed.
func TestRiverQueuesLeaveSlackAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		workers int
		solo    bool
		want    int
	}{
		{1000, true, 1125},
		{4, true, 5},
		{1000, false, 1000},
		{river.QueueNumWorkersMax, true, river.QueueNumWorkersMax},
	} {
		qs := riverQueues(Config{Workers: tc.workers}, tc.solo)
		for _, q := range []string{river.QueueDefault, QueueRunV2} {
			if got := qs[q].MaxWorkers; got != tc.want {
				t.Errorf("workers %d, solo %v: queue %s has %d River workers, want %d", tc.workers, tc.solo, q, got, tc.want)
			}
		}
	}
}
