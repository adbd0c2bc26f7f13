package postgres

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/storetest"
)

// open opens a DB on dsn, closed when the test ends.
func open(t testing.TB, dsn string) *DB {
	t.Helper()
	db, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openTemp opens a DB on a schema of the test's own, closed when the
// test ends (a suite's own Close of it before then is harmless: the pool
// closes once).
func openTemp(t testing.TB) *DB {
	t.Helper()
	return open(t, pgtest.Schema(t))
}

func TestStore(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.Exercise(t, func(t *testing.T) weir.Store { return openTemp(t) })
}

func TestTaskStore(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseTasks(t, func(t *testing.T) interface {
		weir.Store
		weir.TaskStore
	} {
		return openTemp(t)
	})
}

func TestTx(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseTx(t, func(t *testing.T) storetest.TxStore[pgx.Tx] { return openTemp(t) })
}

func TestSpendStore(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseSpend(t, func(t *testing.T) interface {
		weir.Store
		weir.SpendStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestSpendJournal(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseSpendJournal(t, func(t *testing.T) interface {
		weir.Store
		weir.SpendStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestNodeStore(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseNodes(t, func(t *testing.T) interface {
		weir.NodeStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestOverrideStore(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseOverrides(t, func(t *testing.T) interface {
		weir.OverrideStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestBudgetStore(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseBudgets(t, func(t *testing.T) interface {
		weir.BudgetStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestResponseStore(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	storetest.ExerciseResponses(t, func(t *testing.T) interface {
		weir.ResponseStore
		io.Closer
	} {
		return openTemp(t)
	})
}

// TestOpenErrors: a DSN that does not parse is ErrInvalid, and a server
// that does not answer fails Open with an error naming its host and port;
// neither repeats the password.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pw"
	for _, dsn := range []string{
		"postgres://weir:" + password + "@[::1/weir",
		"host=127.0.0.1 port=notaport password=" + password,
		"",
	} {
		db, err := Open(t.Context(), dsn)
		if db != nil {
			db.Close()
		}
		if !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), password) {
			t.Errorf("Open's error repeats the password: %v", err)
		}
	}

	// Nothing listens on port 1; the connection is refused at once.
	for _, dsn := range []string{
		"postgres://weir:" + password + "@127.0.0.1:1/weir?sslmode=disable",
		"host=127.0.0.1 port=1 user=weir password=" + password + " dbname=weir sslmode=disable",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		db, err := Open(ctx, dsn)
		cancel()
		if db != nil {
			db.Close()
		}
		if err == nil {
			t.Fatalf("Open(%q) succeeded with nothing listening", dsn)
		}
		if msg := err.Error(); !strings.Contains(msg, "127.0.0.1:1") || strings.Contains(msg, password) {
			t.Errorf("Open with nothing listening: %q; want the host and port, and never the password", msg)
		}
	}
}

// TestOpenSettings: the pool's size and connect timeout are the DSN's
// when it gives them, and Weir's defaults otherwise.
func TestOpenSettings(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	cfg := open(t, dsn).Pool().Config()
	if cfg.MaxConns != defaultMaxConns || cfg.ConnConfig.ConnectTimeout != defaultConnectTimeout {
		t.Errorf("default pool: %d connections, connect timeout %s; want %d, %s",
			cfg.MaxConns, cfg.ConnConfig.ConnectTimeout, defaultMaxConns, defaultConnectTimeout)
	}
	// pgtest's URL already has a query: its search_path.
	given := dsn + "&pool_max_conns=3&connect_timeout=4"
	if !strings.Contains(dsn, "://") {
		given = dsn + " pool_max_conns=3 connect_timeout=4"
	}
	cfg = open(t, given).Pool().Config()
	if cfg.MaxConns != 3 || cfg.ConnConfig.ConnectTimeout != 4*time.Second {
		t.Errorf("pool of %q: %d connections, connect timeout %s; want 3, 4s", given, cfg.MaxConns, cfg.ConnConfig.ConnectTimeout)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://postgres@127.0.0.1:5432/test", "postgres://postgres@127.0.0.1:5432/test"},
		{"postgres://weir:pw@db.internal/weir?sslmode=require&search_path=w", "postgres://weir@db.internal:5432/weir"},
		{"postgresql://weir@a:5433,b:5434/weir?password=pw", "postgres://weir@a:5433,b:5434/weir"},
		{"host=db.internal port=6432 user=weir password='p w' dbname=weir", "postgres://weir@db.internal:6432/weir"},
		{"postgres://weir:pw@[::1/weir", "(a DSN that does not parse)"},
	} {
		got := Describe(tc.dsn)
		if got != tc.want {
			t.Errorf("Describe(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
		if strings.Contains(got, "pw") || strings.Contains(got, "p w") {
			t.Errorf("Describe(%q) = %q shows the password", tc.dsn, got)
		}
	}
}

// appliedVersions returns goose's current and newest versions on db.
func appliedVersions(t *testing.T, db *DB) (current, target int64) {
	t.Helper()
	sqlDB := stdlib.OpenDBFromPool(db.Pool())
	defer sqlDB.Close()
	p, err := newMigrator(t.Context(), sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	current, target, err = p.GetVersions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return current, target
}

// TestReopen checks that data and the schema version survive a restart and
// that a second Open applies nothing.
func TestReopen(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	db, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	k := weir.APIKey{ID: "k1", Hash: "h1", Group: "g", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)}
	if err := db.KeyCreate(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = open(t, dsn)
	got, err := db.KeyByHash(t.Context(), "h1")
	if err != nil || !got.CreatedAt.Equal(k.CreatedAt) {
		t.Fatalf("after reopen KeyByHash = %+v, %v", got, err)
	}
	var applied int
	if err := db.Pool().QueryRow(t.Context(), `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	current, target := appliedVersions(t, db)
	if current != target || current < 3 || applied != len(shipped(t)) {
		t.Errorf("schema version %d, newest migration %d, %d migrations recorded; want each applied once", current, target, applied)
	}
}

// TestOpenTogether opens a new schema from several pools at once, as
// replicas starting together on a new database would: the migration lock
// lets one migrate and the others find the schema up to date.
func TestOpenTogether(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	const n = 4
	dbs := make([]*DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = Open(t.Context(), dsn) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { dbs[i].Close() })
	}
	if t.Failed() {
		return
	}
	var applied int
	if err := dbs[0].Pool().QueryRow(t.Context(), `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if want := len(shipped(t)); applied != want {
		t.Errorf("%d migrations recorded, want %d: each applied once", applied, want)
	}
}

// TestMigrationsGoDownAndUp checks every Down section against its Up.
func TestMigrationsGoDownAndUp(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	sqlDB := stdlib.OpenDBFromPool(db.Pool())
	defer sqlDB.Close()
	p, err := newMigrator(t.Context(), sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(t.Context(), 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	var tables int
	if err := db.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_tables
		WHERE schemaname = current_schema() AND tablename IN ('api_keys', 'usage_records', 'tasks', 'nodes')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("%d of our tables left after migrating down to 0", tables)
	}
	if _, err := p.Up(t.Context()); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if _, err := db.KeyList(t.Context()); err != nil {
		t.Errorf("KeyList after down and up: %v", err)
	}
}

// TestStoredTypes pins the column types other tools (psql, a report)
// read: times are timestamptz, a task's input the bytes given.
func TestStoredTypes(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	task := newQueuedTask(t, db)
	var (
		created time.Time
		prompt  string
		kind    string
	)
	if err := db.Pool().QueryRow(t.Context(), `SELECT created_at, convert_from(input, 'UTF8')::jsonb ->> 'prompt',
		pg_typeof(created_at)::text FROM tasks WHERE id = $1`, task.ID).Scan(&created, &prompt, &kind); err != nil {
		t.Fatal(err)
	}
	if !created.Equal(task.CreatedAt) || prompt != "a cat" || kind != "timestamp with time zone" {
		t.Errorf("stored task: created %v (%s), prompt %q; want %v as timestamptz, \"a cat\"", created, kind, prompt, task.CreatedAt)
	}
}
