package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/provider/mock"
)

// postgresCatalog is a config's tasks section and a catalog serving the
// chat model "chat" from chatURL and videoModel from videoURL.
func postgresCatalog(chatURL, videoURL string) string {
	return fmt.Sprintf(`tasks:
  workers: 4
  poll_min: 50ms
  poll_max: 250ms

platforms:
  - name: up
    base_url: %s
  - name: vid
    base_url: %s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
  - name: %s
    platform: vid
    upstream: sora-2
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
  - name: %s
    kind: video
    candidates:
      - platform_model: %s
`, chatURL, videoURL, videoPM, videoModel, videoPM)
}

// withPassword adds a password to dsn. The test server trusts its
// clients and ignores it; the gateway must never print it.
func withPassword(dsn, password string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "password=" + password
	}
	return dsn + " password=" + password
}

// TestServeOnPostgres runs `weir serve` with its storage on PostgreSQL: a
// key made by `weir keys create` serves a chat request, a video task runs
// to completion, and a serve started again on the same database (after
// SIGTERM) still has the key and the finished task. No lock file appears,
// and no log line shows the DSN's password.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	const password = "e2e-pg-secret"
	dsn := withPassword(pgtest.Schema(t), password)
	chatUp := startUpstream(t, mock.Config{})
	videoUp := startVideoUpstream(t, mock.Config{JobDuration: 300 * time.Millisecond})

	dir := t.TempDir()
	g := &gateway{Config: filepath.Join(dir, "weir.yaml"), DB: filepath.Join(dir, "weir.db"), exited: make(chan struct{})}
	// storage.path names a file the postgres driver must leave alone.
	text := fmt.Sprintf("server:\n  listen: 127.0.0.1:0\n  log_level: info\nstorage:\n  driver: postgres\n  path: %s\n  dsn: %q\n\n%s",
		g.DB, dsn, postgresCatalog(chatUp.URL, videoUp.URL))
	if err := os.WriteFile(g.Config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	g.launch(t, "weir serve (postgres)")

	keyID, key := g.createKey(t, "--name", "pg")
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")}); rep.Status != http.StatusOK {
		t.Fatalf("chat: %d %s", rep.Status, rep.Body)
	}
	o, st := g.submitTask(t, key, taskBody("a lighthouse at dusk", ""), "pg-1")
	if st != http.StatusAccepted {
		t.Fatalf("task submission: %d, want 202", st)
	}
	done := g.waitTerminal(t, key, []string{o.ID}, 30*time.Second)[o.ID]
	if done.Status != "succeeded" || len(done.Result) == 0 {
		t.Fatalf("task %s ended %s (%+v), want succeeded with a result", o.ID, done.Status, done.Error)
	}

	// The task and its run job are in PostgreSQL, in the test's schema.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM tasks WHERE id = $1`, o.ID).Scan(&status); err != nil || status != "succeeded" {
		t.Errorf("the task's row: %q, %v; want succeeded", status, err)
	}
	// River records a job's completion after the job's last step.
	waitFor(t, 10*time.Second, "the task's run job to be completed in river_job", func() bool {
		var jobs int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM river_job
			WHERE kind = 'weir_task_run' AND state = 'completed' AND args ->> 'task_id' = $1`, o.ID).Scan(&jobs); err != nil {
			t.Fatal(err)
		}
		return jobs == 1
	})

	// A clean stop, then a new serve on the same database.
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.exited:
		if g.err != nil {
			t.Errorf("weir serve exited with %v after SIGTERM, want a clean stop", g.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("weir serve still running 30s after SIGTERM")
	}
	ng := &gateway{Config: g.Config, DB: g.DB, exited: make(chan struct{})}
	ng.launch(t, "weir serve (postgres, restarted)")
	if got := ng.getTask(t, key, o.ID); got.Status != "succeeded" || string(got.Result) != string(done.Result) {
		t.Errorf("after the restart the task is %s with result %s; want succeeded with %s", got.Status, got.Result, done.Result)
	}
	if again, st := ng.submitTask(t, key, taskBody("a lighthouse at dusk", ""), "pg-1"); st != http.StatusOK || again.ID != o.ID {
		t.Errorf("the same Idempotency-Key after the restart: %d %s, want 200 and task %s", st, again.ID, o.ID)
	}
	if rep := ng.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")}); rep.Status != http.StatusOK {
		t.Errorf("chat with the key after the restart: %d %s", rep.Status, rep.Body)
	}
	if list := runWeir(t, "keys", "list", "-c", g.Config); !strings.Contains(list, keyID) {
		t.Errorf("weir keys list after the restart does not show %s:\n%s", keyID, list)
	}

	for _, gw := range []*gateway{g, ng} {
		logs := gw.log()
		if strings.Contains(logs, password) {
			t.Errorf("a log line shows the DSN's password:\n%s", logs)
		}
		if !strings.Contains(logs, `"driver":"postgres"`) || !strings.Contains(logs, `"storage":"postgres://`) {
			t.Errorf("the serving line does not say the storage is postgres:\n%s", logs)
		}
	}
	for _, p := range []string{g.DB, g.DB + ".lock"} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v; want no SQLite file or lock on postgres", p, err)
		}
	}
}
