package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/sqlite"
)

// startPostgresMain starts Main on dsn, listening on a free port, with a
// JSON logger into the returned buffer; it is stopped when the test ends.
func startPostgresMain(t *testing.T, dsn string) (*Main, *syncBuffer, error) {
	t.Helper()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage = config.Storage{Driver: "postgres", Path: filepath.Join(t.TempDir(), "weir.db"), DSN: dsn}
	logs := &syncBuffer{}
	m := &Main{Config: cfg, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	err := m.Start(t.Context())
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	return m, logs, err
}

// servingLine returns the fields of the "weir serving" log line.
func servingLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err == nil && rec["msg"] == "weir serving" {
			return rec
		}
	}
	t.Fatalf("no weir serving line in:\n%s", logs)
	return nil
}

// TestServeOnPostgres: serve opens the PostgreSQL the config names, takes
// no lock (a second serve on the same database starts too), leaves
// reclaiming jobs to River's rescue, says in its log line which storage
// it serves from, listens for the fleet on the API's host, and writes
// keys that the keys command sees.
func TestServeOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	m, logs, err := startPostgresMain(t, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.DB.store.(*postgres.DB); !ok || m.DB.SoleRunner {
		t.Errorf("storage %T, sole runner %v; want *postgres.DB, not the sole runner", m.DB.store, m.DB.SoleRunner)
	}
	rec := servingLine(t, logs.String())
	if rec["driver"] != "postgres" || rec["storage"] != postgres.Describe(dsn) {
		t.Errorf("serving line %v; want driver postgres and storage %s", rec, postgres.Describe(dsn))
	}
	// No fleet.listen: the fleet's port is on the API's loopback host.
	if addr, _ := rec["fleet_addr"].(string); !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("the fleet listens on %q; want server.listen's host, 127.0.0.1", addr)
	}
	if _, err := os.Stat(m.Config.Storage.Path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a lock file beside storage.path: %v; want none on postgres", err)
	}
	if _, _, err := startPostgresMain(t, dsn); err != nil {
		t.Errorf("a second serve on the same database: %v", err)
	}
	// The pool's metrics: its size, and the connections taken so far.
	if got := gathered(t, m, "weir_db_pool_max_connections"); got != 20 {
		t.Errorf("weir_db_pool_max_connections %v; want the default pool's 20", got)
	}
	if got := gathered(t, m, "weir_db_pool_acquires_total"); got < 1 {
		t.Errorf("weir_db_pool_acquires_total %v; want the connections taken to start", got)
	}

	// The keys that `weir keys list` reads, on a config naming the same
	// database.
	secret, err := CreateKey(t.Context(), m.DB, &weir.APIKey{Name: "alice", Group: "default"})
	if err != nil || secret == "" {
		t.Fatalf("CreateKey: %q, %v", secret, err)
	}
	path := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("storage:\n  driver: postgres\n  dsn: %q\n", dsn)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := OpenStorage(t.Context(), cfg.Storage, StorageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ks, err := db.KeyList(t.Context())
	if err != nil || !slices.ContainsFunc(ks, func(k weir.APIKey) bool { return k.Name == "alice" }) {
		t.Errorf("the keys on postgres: %v, %+v; want alice's", err, ks)
	}
}

// TestServePostgresUnreachable: a DSN nothing answers fails start with an
// error naming the host and port, and never the password.
func TestServePostgresUnreachable(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pw"
	port := strings.TrimPrefix(closedPort(t), "http://127.0.0.1:")
	for _, dsn := range []string{
		"postgres://weir:" + password + "@127.0.0.1:" + port + "/weir?sslmode=disable",
		"host=127.0.0.1 port=" + port + " user=weir password=" + password + " dbname=weir sslmode=disable",
	} {
		_, logs, err := startPostgresMain(t, dsn)
		if err == nil {
			t.Fatalf("serve on %s started", dsn)
		}
		msg := err.Error()
		if !strings.Contains(msg, "127.0.0.1:"+port) || strings.Contains(msg, password) || strings.Contains(logs.String(), password) {
			t.Errorf("serve on a closed port: %q (logs %s); want the host and port, never the password", msg, logs)
		}
	}
}

// TestOpenStorageDrivers: the one place that tells the drivers apart
// opens each, and refuses any other.
func TestOpenStorageDrivers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weir.db")
	s, err := OpenStorage(t.Context(), config.Storage{Driver: "sqlite", Path: path}, StorageOptions{Serve: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.store.(*sqlite.DB); !ok || !s.SoleRunner || s.Where != path {
		t.Errorf("sqlite storage: %T, sole runner %v, where %q", s.store, s.SoleRunner, s.Where)
	}
	if _, err := os.Stat(path + ".lock"); err != nil {
		t.Errorf("serve's sqlite storage took no lock: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStorage(t.Context(), config.Storage{Driver: "mysql"}, StorageOptions{}); err == nil ||
		!strings.Contains(err.Error(), `unknown driver "mysql"`) {
		t.Errorf("OpenStorage of driver mysql: %v", err)
	}
}

// gathered is the value of m's metric name, which has no labels; 0 if
// it is not registered.
func gathered(t *testing.T, m *Main, name string) float64 {
	t.Helper()
	mfs, err := m.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		if c := mf.GetMetric()[0].GetCounter(); c != nil {
			return c.GetValue()
		}
		return mf.GetMetric()[0].GetGauge().GetValue()
	}
	return 0
}
