package serve

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/sqlite"
)

// twoPlatformsFile is a config file on storage with platform up on
// upstream a and up2 on b; model v, a video model, runs on platform
// model pm of platform on. Its tasks poll often and rescue a job soon
// (videoFile).
func twoPlatformsFile(storage, a, b, pm, on string) []byte {
	return videoConfig(storage, pm, on, a, b)
}

// startFile starts a Main on the config file at path.
func startFile(t *testing.T, path string) *Main {
	t.Helper()
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &Main{ConfigPath: path, Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReloadRepointingARunningTasksPlatformModel: a reload that keeps
// platform model up/v but points it at another upstream while a video
// task runs there leaves the task following its job on the upstream it
// was submitted to, which the new one does not know; then, after a
// restart on a file without up/v that still has its platform, to its
// result.
func TestReloadRepointingARunningTasksPlatformModel(t *testing.T) {
	t.Parallel()
	a, b := startVideoUpstream(t), startVideoUpstream(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "weir.yaml")
	storage := fmt.Sprintf("  path: %q", filepath.Join(dir, "weir.db"))
	write := func(pm, on string) {
		t.Helper()
		if err := os.WriteFile(path, twoPlatformsFile(storage, a.URL, b.URL, pm, on), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("up/v", "up")
	m := startFile(t, path)
	ctx := t.Context()
	secret, err := CreateKey(ctx, m.DB, &weir.APIKey{Name: "k", Group: "default"})
	if err != nil {
		t.Fatal(err)
	}
	id := submitVideo(t, m, secret)
	awaitTask(t, m.DB, id, "running", func(tk weir.Task) bool { return tk.Status == weir.TaskRunning || tk.Status.Terminal() })
	write("up/v", "up2")
	mark := time.Now()
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	// A step on the new platform would find no job and fail the task:
	// wait for one since the reload to have ended (the next has begun).
	attempted := func() (at time.Time, err error) {
		err = m.DB.store.(*sqlite.DB).SQL().QueryRowContext(ctx, `SELECT attempted_at FROM river_job
			WHERE kind = 'weir_task_run' AND json_extract(args, '$.task_id') = ? ORDER BY id DESC LIMIT 1`, id).Scan(&at)
		return at, err
	}
	awaitTask(t, m.DB, id, "stepped since the reload", stepsAfter(attempted, mark))
	awaitTask(t, m.DB, id, "stepped again", stepsAfter(attempted, time.Now()))
	if tk, err := m.DB.TaskGet(ctx, id); err != nil || tk.Status != weir.TaskRunning {
		t.Fatalf("the task once up/v repointed: %+v, %v; want it running", tk, err)
	}
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	write("up2/v", "up2")
	m = startFile(t, path)
	a.finish()
	tk := awaitTask(t, m.DB, id, "ended", func(tk weir.Task) bool { return tk.Status.Terminal() })
	if tk.Status != weir.TaskSucceeded || tk.PlatformModel != "up/v" {
		t.Errorf("the task: %s on %s (%s: %s); want succeeded on up/v's old upstream", tk.Status, tk.PlatformModel, tk.ErrorCode, tk.ErrorMessage)
	}
}
