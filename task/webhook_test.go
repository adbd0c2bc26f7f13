package task

import (
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/riverjob"
	"github.com/weir-gateway/weir/sqlite"
	"github.com/weir-gateway/weir/webhook"
)

func TestProgressEventDue(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		last  int
		after time.Duration
		p     int
		want  bool
	}{
		{0, 5 * time.Second, 10, true},
		{0, 5 * time.Second, 9, false},                   // not 10 points yet
		{0, 5*time.Second - time.Millisecond, 50, false}, // too soon, however far
		{0, time.Hour, 99, true},
		{0, time.Hour, 100, false}, // the end is the terminal event's
		{35, 6 * time.Second, 45, true},
		{35, 6 * time.Second, 44, false},
		{50, 6 * time.Second, 30, false}, // progress that went back
	} {
		if got := progressEventDue(tc.last, t0, tc.p, t0.Add(tc.after)); got != tc.want {
			t.Errorf("progressEventDue(last %d, %s later, at %d) = %v, want %v", tc.last, tc.after, tc.p, got, tc.want)
		}
	}
}

// TestProgressEventsThrottled plays the poll schedule against jobs of
// several lengths, as follow does, and checks the events it would send:
// each at least progressEventStep points and progressEventGap after the
// one before (task.running counts as the first, at 0%), and a long job
// told of nearly every step. Progress is seen only by polls, which the
// poll schedule spaces by the job's expected end (up to PollMax), so an
// event may come a poll past its step.
func TestProgressEventsThrottled(t *testing.T) {
	t.Parallel()
	s := &Service{}
	s.cfg.defaults()
	task := weir.Task{ID: "task_1", CallbackEvents: []weir.TaskEvent{weir.TaskEventProgress}}
	for _, tc := range []struct {
		job      linearJob
		min, max int
	}{
		{linearJob{length: 4 * time.Second}, 0, 0},  // ends before the first gap
		{linearJob{length: 12 * time.Second}, 1, 2}, // few polls: the schedule aims at the end
		{linearJob{length: 3 * time.Minute}, 8, 9},  // polls 10s (5.5 points) apart
		{linearJob{length: 20 * time.Minute}, 9, 9}, // 10%, 20%... 90%
		{linearJob{length: time.Hour, stuck: 30 * time.Second}, 1, 9},
	} {
		start := time.Unix(1_700_000_000, 0)
		r := newRun(start, start.Add(s.cfg.PollMin), 0, start)
		var sent []int
		lastP, lastAt := 0, start
		for at := r.next; ; {
			done, p := tc.job.at(at.Sub(start))
			if done {
				break
			}
			if ev := progressEvent(task, r, p, at); ev != nil {
				if ev.Type != "task.progress" || ev.Status != weir.TaskRunning || *ev.Progress != p ||
					ev.EventID != "evt_task_1_progress_"+strconv.Itoa(p) || !ev.At.Equal(at) {
					t.Fatalf("event %+v at %d%%", ev, p)
				}
				if p-lastP < progressEventStep || at.Sub(lastAt) < progressEventGap {
					t.Errorf("job %+v: event at %d%%, %s after the one at %d%%", tc.job, p, at.Sub(lastAt), lastP)
				}
				r.told, r.toldAt = p, at
				lastP, lastAt = p, at
				sent = append(sent, p)
			}
			at = at.Add(s.nextPoll(r, p, at))
		}
		if len(sent) < tc.min || len(sent) > tc.max {
			t.Errorf("job %+v: %d progress events %v, want %d to %d", tc.job, len(sent), sent, tc.min, tc.max)
		}
	}
	// A task that did not ask for progress events gets none.
	r := newRun(time.Unix(0, 0), time.Time{}, 0, time.Unix(0, 0))
	if ev := progressEvent(weir.Task{ID: "task_2"}, r, 50, time.Unix(60, 0)); ev != nil {
		t.Errorf("progress event for a task that did not ask: %+v", ev)
	}
	if ev := runningEvent(weir.Task{ID: "task_2"}, 0, time.Unix(60, 0)); ev != nil {
		t.Errorf("running event for a task that did not ask: %+v", ev)
	}
}

// eventRig is a Service on a real SQLite file, with River's tables, a
// fake clock and a webhook sender allowed to reach a receiver in the test
// process; nothing runs (no engine, no workers).
type eventRig struct {
	s     *Service
	store *sqlite.DB
	clock *clock.Fake
	key   weir.APIKey
}

func newEventRig(t *testing.T) *eventRig {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := riverjob.Migrate(t.Context(), store); err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	hooks := Webhooks{Sender: webhook.NewSender(webhook.Config{AllowLoopback: true}), Signer: signer}
	fake := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	s, err := New(Config{Clock: fake}, Deps[*sql.Tx]{Store: store, Webhooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	key := weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: fake.Now()}
	if err := store.KeyCreate(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	return &eventRig{s: s, store: store, clock: fake, key: key}
}

// runningTask stores a running task with a callback asking for events.
func (g *eventRig) runningTask(t *testing.T, id, callback string, events ...weir.TaskEvent) weir.Task {
	t.Helper()
	task := weir.Task{ID: id, KeyID: g.key.ID, Kind: "task", Model: "sora-2", Input: []byte(`{}`),
		Status: weir.TaskRunning, UpstreamID: "up_" + id, CallbackURL: callback, CallbackEvents: events, CreatedAt: g.clock.Now()}
	if created, err := g.store.TaskCreate(t.Context(), &task); err != nil || !created {
		t.Fatalf("TaskCreate: %v, %v", created, err)
	}
	return task
}

// webhookJobs lists the webhook jobs in River's table, oldest first.
func webhookJobs(t *testing.T, db *sql.DB) []WebhookArgs {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT json(args) FROM river_job WHERE kind = ? ORDER BY id`, WebhookArgs{}.Kind())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []WebhookArgs
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var a WebhookArgs
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			t.Fatalf("webhook job args %s: %v", raw, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProgressEventInsertedWithUpdate: a progress event's job is inserted
// exactly when the update that caused it applies, in its transaction; a
// task without a callback gets no job, its update all the same.
func TestProgressEventInsertedWithUpdate(t *testing.T) {
	t.Parallel()
	g := newEventRig(t)
	ctx := t.Context()
	task := g.runningTask(t, "task_a", "https://hooks.example.com/weir", weir.TaskEventProgress)
	silent := g.runningTask(t, "task_b", "", weir.TaskEventProgress)
	r := newRun(g.clock.Now(), time.Time{}, 0, g.clock.Now())
	g.clock.Advance(6 * time.Second)
	running := []weir.TaskStatus{weir.TaskRunning}
	for _, tk := range []weir.Task{task, silent} {
		ev := progressEvent(tk, r, 30, g.clock.Now())
		if ev == nil {
			t.Fatal("no progress event due")
		}
		if ok, err := g.s.updateWithEvent(ctx, tk, weir.TaskUpdate{From: running, Status: weir.TaskRunning, Progress: ptr(30)}, ev); !ok || err != nil {
			t.Fatalf("updateWithEvent(%s) = %v, %v", tk.ID, ok, err)
		}
		if got, _ := g.store.TaskGet(ctx, tk.ID); got.Progress != 30 {
			t.Errorf("task %s progress %d after the update, want 30", tk.ID, got.Progress)
		}
	}
	jobs := webhookJobs(t, g.store.SQL())
	if len(jobs) != 1 || jobs[0].TaskID != task.ID || jobs[0].EventID != "evt_task_a_progress_30" ||
		jobs[0].Type != "task.progress" || *jobs[0].Progress != 30 || !jobs[0].At.Equal(g.clock.Now()) {
		t.Fatalf("webhook jobs %+v, want task_a's progress event at 30%%", jobs)
	}

	// An update that does not apply (the task was cancelled meanwhile)
	// inserts no event.
	if ok, err := g.s.finish(ctx, task, running, weir.TaskUpdate{Status: weir.TaskCancelled, ErrorCode: "cancelled", ErrorMessage: "by the client"}); !ok || err != nil {
		t.Fatalf("finish = %v, %v; want applied", ok, err)
	}
	g.clock.Advance(10 * time.Second)
	ev := progressEvent(task, r, 60, g.clock.Now())
	if ok, err := g.s.updateWithEvent(ctx, task, weir.TaskUpdate{From: running, Status: weir.TaskRunning, Progress: ptr(60)}, ev); ok || err != nil {
		t.Fatalf("updateWithEvent of a cancelled task = %v, %v; want false, nil", ok, err)
	}
	jobs = webhookJobs(t, g.store.SQL())
	if len(jobs) != 2 || jobs[1].EventID != "evt_task_a_cancelled" || jobs[1].Status != "" || jobs[1].Progress != nil {
		t.Fatalf("webhook jobs %+v, want the progress event and then only the terminal one", jobs)
	}
}

// TestProgressEventDeliveredAsItWas: a progress event delivered after its
// task ended still reports what it reported (running, its progress, no
// result), stamped with when it happened; the terminal event reports the
// task as it ended.
func TestProgressEventDeliveredAsItWas(t *testing.T) {
	t.Parallel()
	g := newEventRig(t)
	ctx := t.Context()
	got := make(chan []byte, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
	}))
	t.Cleanup(rcv.Close)
	task := g.runningTask(t, "task_c", rcv.URL+"/hook", weir.TaskEventProgress)
	r := newRun(g.clock.Now(), time.Time{}, 0, g.clock.Now())
	g.clock.Advance(7 * time.Second)
	eventAt := g.clock.Now()
	ev := progressEvent(task, r, 40, eventAt)
	if ok, err := g.s.updateWithEvent(ctx, task, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskRunning, Progress: ptr(40)}, ev); !ok || err != nil {
		t.Fatalf("updateWithEvent = %v, %v", ok, err)
	}
	g.clock.Advance(time.Minute)
	if ok, err := g.s.finish(ctx, task, []weir.TaskStatus{weir.TaskRunning},
		weir.TaskUpdate{Status: weir.TaskSucceeded, Progress: ptr(100), Result: []byte(`{"id":"up_task_c","status":"completed"}`)}); !ok || err != nil {
		t.Fatalf("finish = %v, %v; want applied", ok, err)
	}
	finishedAt := g.clock.Now()
	g.clock.Advance(time.Minute) // delivered later still

	w := &webhookWorker{s: g.s}
	for _, args := range webhookJobs(t, g.store.SQL()) {
		if err := w.Work(ctx, &river.Job[WebhookArgs]{Args: args}); err != nil {
			t.Fatalf("deliver %s: %v", args.EventID, err)
		}
	}
	var progress, terminal Event
	for i, dst := range []*Event{&progress, &terminal} {
		b := <-got // each delivery was received before its Work returned
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatalf("delivery %d: %v: %s", i, err, b)
		}
	}
	if progress.Type != "task.progress" || progress.Data.Status != weir.TaskRunning || progress.Data.Progress != 40 ||
		string(progress.Data.Result) != "null" || progress.Data.Error != nil || !progress.Timestamp.Equal(eventAt) {
		t.Errorf("progress event delivered after the end: %+v, want running at 40%% with no result, at %v", progress, eventAt)
	}
	if terminal.Type != "task.succeeded" || terminal.Data.Status != weir.TaskSucceeded || terminal.Data.Progress != 100 ||
		string(terminal.Data.Result) != `{"id":"up_task_c","status":"completed"}` || !terminal.Timestamp.Equal(finishedAt) {
		t.Errorf("terminal event: %+v, want the task as it ended, at %v", terminal, finishedAt)
	}
}

// hookMetrics records webhook attempt outcomes.
type hookMetrics struct {
	noMetrics
	mu       sync.Mutex
	outcomes []string
}

func (m *hookMetrics) WebhookAttempt(outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outcomes = append(m.outcomes, outcome)
}

func (m *hookMetrics) got() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.outcomes)
}

// TestGoneEndsDeliveryForTheTask: a receiver answering 410 to one event
// gets no later event of the task: one already queued is cancelled
// unsent, and none is queued after. Each counts as gone.
func TestGoneEndsDeliveryForTheTask(t *testing.T) {
	t.Parallel()
	g := newEventRig(t)
	m := &hookMetrics{}
	g.s.cfg.Metrics = m
	ctx := t.Context()
	var hits atomic.Int32
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusGone)
	}))
	t.Cleanup(rcv.Close)
	task := g.runningTask(t, "task_g", rcv.URL+"/hook", weir.TaskEventProgress)
	r := newRun(g.clock.Now(), time.Time{}, 0, g.clock.Now())
	running := []weir.TaskStatus{weir.TaskRunning}
	for _, p := range []int{20, 40} {
		g.clock.Advance(6 * time.Second)
		ev := progressEvent(task, r, p, g.clock.Now())
		if ok, err := g.s.updateWithEvent(ctx, task, weir.TaskUpdate{From: running, Status: weir.TaskRunning, Progress: ptr(p)}, ev); !ok || err != nil {
			t.Fatalf("updateWithEvent = %v, %v", ok, err)
		}
		r.told, r.toldAt = p, g.clock.Now()
	}
	jobs := webhookJobs(t, g.store.SQL())
	if len(jobs) != 2 {
		t.Fatalf("%d webhook jobs, want 2", len(jobs))
	}
	w := &webhookWorker{s: g.s}
	var cancel *river.JobCancelError
	if err := w.Work(ctx, &river.Job[WebhookArgs]{Args: jobs[0]}); !errors.As(err, &cancel) || !errors.Is(err, webhook.ErrGone) {
		t.Fatalf("Work after a 410 = %v, want the job cancelled for ErrGone", err)
	}
	stored, err := g.store.TaskGet(ctx, task.ID)
	if err != nil || !stored.CallbackGoneAt.Equal(g.clock.Now()) {
		t.Fatalf("task after the 410: CallbackGoneAt %v (%v), want %v", stored.CallbackGoneAt, err, g.clock.Now())
	}
	// The event queued before the 410 is not sent.
	if err := w.Work(ctx, &river.Job[WebhookArgs]{Args: jobs[1]}); !errors.As(err, &cancel) || !errors.Is(err, webhook.ErrGone) {
		t.Fatalf("Work of a later event = %v, want the job cancelled for ErrGone", err)
	}
	// The task's end queues no event.
	if ok, err := g.s.finish(ctx, stored, running, weir.TaskUpdate{Status: weir.TaskSucceeded, Progress: ptr(100)}); !ok || err != nil {
		t.Fatalf("finish = %v, %v", ok, err)
	}
	if n := len(webhookJobs(t, g.store.SQL())); n != 2 {
		t.Errorf("%d webhook jobs after the task ended, want no new one", n)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the receiver got %d requests, want only the one it answered 410", n)
	}
	if got := m.got(); !slices.Equal(got, []string{"gone", "gone"}) {
		t.Errorf("outcomes %v, want gone for the 410 and for the event not sent", got)
	}
}

// TestDeliveriesListsTheTasksEvents: the callback events of a task, and
// only its, are listed with their deliveries' state, oldest first.
func TestDeliveriesListsTheTasksEvents(t *testing.T) {
	t.Parallel()
	g := newEventRig(t)
	ctx := t.Context()
	task := g.runningTask(t, "task_d", "https://hooks.example.com/d", weir.TaskEventProgress)
	other := g.runningTask(t, "task_o", "https://hooks.example.com/o", weir.TaskEventProgress)
	r := newRun(g.clock.Now(), time.Time{}, 0, g.clock.Now())
	running := []weir.TaskStatus{weir.TaskRunning}
	for _, tk := range []weir.Task{task, other} {
		g.clock.Advance(6 * time.Second)
		ev := progressEvent(tk, r, 50, g.clock.Now())
		if ok, err := g.s.updateWithEvent(ctx, tk, weir.TaskUpdate{From: running, Status: weir.TaskRunning, Progress: ptr(50)}, ev); !ok || err != nil {
			t.Fatalf("updateWithEvent = %v, %v", ok, err)
		}
	}
	stored, err := g.store.TaskGet(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := g.s.finish(ctx, stored, running, weir.TaskUpdate{Status: weir.TaskSucceeded, Progress: ptr(100)}); !ok || err != nil {
		t.Fatalf("finish = %v, %v", ok, err)
	}
	ds, err := g.s.Deliveries(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, d := range ds {
		if d.EventID == "" || d.State != "available" || d.Attempts != 0 || d.MaxAttempts == 0 {
			t.Errorf("delivery %+v: want an event id, available, not tried yet", d)
		}
		types = append(types, d.Type)
	}
	if want := []string{"task.progress", "task.succeeded"}; !slices.Equal(types, want) {
		t.Errorf("deliveries of %s: %v, want %v", task.ID, types, want)
	}
	if ds, err := g.s.Deliveries(ctx, "task_nope"); err != nil || len(ds) != 0 {
		t.Errorf("deliveries of an unknown task: %+v, %v", ds, err)
	}
}

// TestValidateCallbackURL: a callback URL is checked under the service's
// own sender's policy (here, loopback allowed); without callbacks every
// URL is refused.
func TestValidateCallbackURL(t *testing.T) {
	t.Parallel()
	g := newEventRig(t)
	if err := g.s.ValidateCallbackURL("http://127.0.0.1:9/hook"); err != nil {
		t.Errorf("a loopback URL under AllowLoopback: %v", err)
	}
	if err := g.s.ValidateCallbackURL("ftp://hooks.example.com/a"); err == nil {
		t.Error("an ftp URL was taken")
	}
	off, err := New(Config{}, Deps[*sql.Tx]{Store: g.store})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.ValidateCallbackURL("https://hooks.example.com/a"); err == nil {
		t.Error("a service without callbacks took a callback URL")
	}
}
