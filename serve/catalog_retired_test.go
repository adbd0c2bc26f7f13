package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/sqlite"
)

// videoUpstream is the mock provider, whose video jobs last an hour of
// its clock, which runs at the wall clock's pace until finish moves it
// past every job's end.
type videoUpstream struct {
	*httptest.Server
	skew atomic.Int64
}

func startVideoUpstream(t *testing.T) *videoUpstream {
	t.Helper()
	u := &videoUpstream{}
	u.Server = httptest.NewServer(mock.NewWithClock(mock.Config{JobDuration: time.Hour, JobRetention: 24 * time.Hour},
		func() time.Time { return time.Now().Add(time.Duration(u.skew.Load())) }))
	t.Cleanup(u.Close)
	return u
}

// finish ends every video job the upstream runs.
func (u *videoUpstream) finish() { u.skew.Store(int64(2 * time.Hour)) }

// videoFile is a config file on storage whose model v, a video model,
// runs on platform model pm of platform up, its only one, on upstream
// up. Its tasks poll often and rescue a job soon, so that a task's job
// steps again within a second.
func videoFile(storage, up, pm string) []byte {
	return videoConfig(storage, pm, "up", up)
}

// videoConfig is videoFile's config with a platform on each upstream of
// bases, named up, up2, up3...; model v's platform model pm is on
// platform on.
func videoConfig(storage, pm, on string, bases ...string) []byte {
	b := fmt.Appendf(nil, `server:
  listen: 127.0.0.1:0
storage:
%s
tasks:
  poll_min: 20ms
  poll_max: 100ms
  rescue_after: 4s
platforms:
`, storage)
	for i, base := range bases {
		name := "up"
		if i > 0 {
			name = fmt.Sprintf("up%d", i+1)
		}
		b = fmt.Appendf(b, "  - name: %s\n    base_url: %s/v1\n", name, base)
	}
	return fmt.Appendf(b, `platform_models:
  - name: %s
    platform: %s
    upstream: sora-2
models:
  - name: v
    kind: video
    candidates:
      - platform_model: %s
`, pm, on, pm)
}

// submitVideo submits a video task of model v through m with key
// secret and returns its id.
func submitVideo(t *testing.T, m *Main, secret string) string {
	t.Helper()
	return postTask(t, m, secret, `{"model":"v","input":{"prompt":"a weir at dawn","seconds":"4"}}`)
}

// awaitTask waits until task id, read from store, satisfies cond, and
// returns it. The states it waits for (a job's status upstream, River's
// next execution) announce themselves nowhere it can listen.
func awaitTask(t *testing.T, store weir.TaskStore, id, what string, cond func(weir.Task) bool) weir.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		tk, err := store.TaskGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: not %s within 20s: %s (%s: %s)", id, what, tk.Status, tk.ErrorCode, tk.ErrorMessage)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stepsAfter reports whether a step of a task's job began after mark,
// by when its job was last attempted (attemptedAt): a step then asks the
// catalog for the task's target again.
func stepsAfter(attemptedAt func() (time.Time, error), mark time.Time) func(weir.Task) bool {
	return func(tk weir.Task) bool {
		at, err := attemptedAt()
		return tk.Status.Terminal() || err == nil && at.After(mark)
	}
}

// TestReloadKeepsARunningTasksPlatformModel: a reload that moves model v
// from up/v to up/w while a video task runs on up/v leaves the task
// following its upstream job there, step after step, to its result; up/v
// keeps its scope, with the task's lease, until the task ends, and is
// retired then.
func TestReloadKeepsARunningTasksPlatformModel(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "weir.yaml")
	storage := fmt.Sprintf("  path: %q", filepath.Join(dir, "weir.db"))
	if err := os.WriteFile(path, videoFile(storage, up.URL, "up/v"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &Main{ConfigPath: path, Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	ctx := t.Context()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	secret, err := CreateKey(ctx, m.DB, &weir.APIKey{Name: "k", Group: "default"})
	if err != nil {
		t.Fatal(err)
	}
	id := submitVideo(t, m, secret)
	awaitTask(t, m.DB, id, "running", func(tk weir.Task) bool { return tk.Status == weir.TaskRunning || tk.Status.Terminal() })
	if err := os.WriteFile(path, videoFile(storage, up.URL, "up/w"), 0o600); err != nil {
		t.Fatal(err)
	}
	mark := time.Now()
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	scope := weir.PlatformModelScope("up/v")
	if st, err := m.Engine.Scope(ctx, scope); err != nil || st.Leases != 1 {
		t.Errorf("up/v once reloaded away, its task running: %+v, %v; want the scope kept, with the task's lease", st, err)
	}
	attempted := func() (at time.Time, err error) {
		err = m.DB.store.(*sqlite.DB).SQL().QueryRowContext(ctx, `SELECT attempted_at FROM river_job
			WHERE kind = 'weir_task_run' AND json_extract(args, '$.task_id') = ? ORDER BY id DESC LIMIT 1`, id).Scan(&at)
		return at, err
	}
	awaitTask(t, m.DB, id, "stepped since the reload", stepsAfter(attempted, mark))
	up.finish()
	tk := awaitTask(t, m.DB, id, "ended", func(tk weir.Task) bool { return tk.Status.Terminal() })
	if tk.Status != weir.TaskSucceeded || tk.PlatformModel != "up/v" {
		t.Fatalf("the task: %s on %s (%s: %s); want succeeded on up/v, its job's platform model", tk.Status, tk.PlatformModel, tk.ErrorCode, tk.ErrorMessage)
	}
	awaitScopeGone(t, "up/v once its task ended", func() error { _, err := m.Engine.Scope(ctx, scope); return err })
}

// awaitScopeGone waits until read, which reads the scope of a platform
// model that left the catalog, reports ErrUnknownScope: it is retired at
// a poll (the overrides', the fleet's catalog) once its last lease is
// back, which nothing announces. what names the scope and its state.
func awaitScopeGone(t *testing.T, what string, read func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := read()
		if errors.Is(err, admission.ErrUnknownScope) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v; want it retired", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retiredFleet is two replicas on PostgreSQL serving videoFile's model
// v on up/v, with a video task running there, submitted through the
// replica that does not lead: what the fleet tests of a platform model
// retired under a running task start from.
type retiredFleet struct {
	up            *videoUpstream
	storage       string
	leader, other *Main
	db            *postgres.DB
	task          string
}

func startRetiredFleet(t *testing.T) *retiredFleet {
	t.Helper()
	pgtest.Require(t)
	f := &retiredFleet{up: startVideoUpstream(t)}
	f.storage = fmt.Sprintf("  driver: postgres\n  dsn: %q", pgtest.Schema(t))
	path := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(path, videoFile(f.storage, f.up.URL, "up/v"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.leader, f.other = startLedFleet(t, path)
	ctx := t.Context()
	var err error
	if f.db, err = postgres.Open(ctx, f.leader.Config.Storage.DSN); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Close() })
	secret, err := CreateKey(ctx, f.leader.DB, &weir.APIKey{Name: "k", Group: "default"})
	if err != nil {
		t.Fatal(err)
	}
	f.task = submitVideo(t, f.other, secret)
	awaitTask(t, f.db, f.task, "running", func(tk weir.Task) bool { return tk.Status == weir.TaskRunning || tk.Status.Terminal() })
	return f
}

// retire publishes a version that moves model v to up/w through the
// leader, and has each replica take it, then retire what it left
// (RetireLeft), as every replica serves it.
func (f *retiredFleet) retire(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	if v, published, err := f.leader.catalog.PublishFile(ctx, videoFile(f.storage, f.up.URL, "up/w"), "test"); err != nil || !published {
		t.Fatalf("publish version 2: %+v, %v, %v", v, published, err)
	}
	for range 2 {
		for _, r := range []*Main{f.leader, f.other} {
			r.catalog.catchUp(ctx)
		}
	}
}

// stepsAfter waits for a step of the task's job that began after mark.
func (f *retiredFleet) stepsAfter(t *testing.T, mark time.Time) {
	t.Helper()
	attempted := func() (at time.Time, err error) {
		err = f.db.Pool().QueryRow(t.Context(), `SELECT attempted_at FROM river_job
			WHERE kind = 'weir_task_run' AND args->>'task_id' = $1 ORDER BY id DESC LIMIT 1`, f.task).Scan(&at)
		return at, err
	}
	awaitTask(t, f.db, f.task, "stepped since up/v was retired", stepsAfter(attempted, mark))
}

// finish ends the task's upstream job, waits for the task to end, and
// checks it succeeded on up/v.
func (f *retiredFleet) finish(t *testing.T) {
	t.Helper()
	f.up.finish()
	tk := awaitTask(t, f.db, f.task, "ended", func(tk weir.Task) bool { return tk.Status.Terminal() })
	if tk.Status != weir.TaskSucceeded || tk.PlatformModel != "up/v" {
		t.Fatalf("the task: %s on %s (%s: %s); want succeeded on up/v, its job's platform model", tk.Status, tk.PlatformModel, tk.ErrorCode, tk.ErrorMessage)
	}
}

// TestFleetRetiredPlatformModelKeepsItsRunningTask: in a fleet, a
// version that moves model v from up/v to up/w while a video task runs
// on up/v, once every replica serves it and has retired what it left
// (RetireLeft), leaves the task following its upstream job there, step
// after step, to its result; up/v's scope at the leader keeps the task's
// lease until the task ends, and is retired then.
func TestFleetRetiredPlatformModelKeepsItsRunningTask(t *testing.T) {
	t.Parallel()
	f := startRetiredFleet(t)
	ctx := t.Context()
	f.retire(t)
	mark := time.Now()
	scope := weir.PlatformModelScope("up/v")
	if st, err := f.leader.Engine.Scope(ctx, scope); err != nil || st.Leases != 1 {
		t.Errorf("up/v once every replica retired it, its task running: %+v, %v; want the scope kept, with the task's lease", st, err)
	}
	f.stepsAfter(t, mark)
	f.finish(t)
	awaitScopeGone(t, "up/v once its task ended", func() error {
		f.leader.catalog.catchUp(ctx)
		_, err := f.leader.Engine.Scope(ctx, scope)
		return err
	})
}

// TestFleetRetiredPlatformModelOutlivesItsLeader: the leader stops while
// a task runs on up/v, which every replica has retired: the next leader
// restores the task's lease there, so up/v is not retired under it, and
// the task follows its job to its result.
func TestFleetRetiredPlatformModelOutlivesItsLeader(t *testing.T) {
	t.Parallel()
	f := startRetiredFleet(t)
	ctx := t.Context()
	f.retire(t)
	if err := f.leader.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	scope := weir.PlatformModelScope("up/v")
	deadline := time.Now().Add(20 * time.Second)
	for {
		// The term's passing and the ledger's recovery announce
		// themselves to no one outside the replica.
		st, err := f.other.Engine.Scope(ctx, scope)
		if _, leading := f.other.Member.Term(); leading && err == nil && st.Leases == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("up/v at the next leader: %+v, %v; want the task's lease restored there", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.stepsAfter(t, time.Now())
	f.finish(t)
}
