package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/storetest"
)

func openTemp(t testing.TB) *DB {
	t.Helper()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// openMemory opens a DB on ":memory:", for a suite that closes it.
func openMemory(t testing.TB) *DB {
	t.Helper()
	db, err := Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) weir.Store { return openTemp(t) })
}

func TestStoreInMemory(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) weir.Store { return openMemory(t) })
}

func TestOpenSettings(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	for _, tc := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "1"}, // NORMAL
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
	} {
		var got string
		if err := db.SQL().QueryRowContext(t.Context(), "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %q, want %q", tc.pragma, got, tc.want)
		}
	}
	if n := db.SQL().Stats().MaxOpenConnections; n != 1 {
		t.Errorf("write pool allows %d connections, want 1", n)
	}
	var readOnly int
	if err := db.read.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&readOnly); err != nil || readOnly != 1 {
		t.Errorf("read pool query_only = %d (%v), want 1", readOnly, err)
	}
}

func TestOpenRejectsBadPaths(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", "weir.db?mode=ro", "file:weir.db"} {
		if db, err := Open(t.Context(), path); !errors.Is(err, weir.ErrInvalid) {
			if db != nil {
				db.Close()
			}
			t.Errorf("Open(%q): %v, want ErrInvalid", path, err)
		}
	}
	if db, err := Open(t.Context(), filepath.Join(t.TempDir(), "missing", "weir.db")); err == nil {
		db.Close()
		t.Errorf("Open in a directory that does not exist succeeded")
	}
}

// TestReopen checks that data and the schema version survive a restart and
// that a second Open applies nothing.
func TestReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weir.db")
	db, err := Open(t.Context(), path)
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

	db, err = Open(t.Context(), path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	got, err := db.KeyByHash(t.Context(), "h1")
	if err != nil || !got.CreatedAt.Equal(k.CreatedAt) {
		t.Fatalf("after reopen KeyByHash = %+v, %v", got, err)
	}
	p, err := newMigrator(db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	current, target, err := p.GetVersions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if current != target || current < 2 {
		t.Errorf("schema version %d, newest migration %d", current, target)
	}
}

// TestMigrationsGoDownAndUp checks every Down section against its Up.
func TestMigrationsGoDownAndUp(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	p, err := newMigrator(db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(t.Context(), 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	var tables int
	if err := db.SQL().QueryRowContext(t.Context(),
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('api_keys', 'usage_records', 'tasks', 'nodes')`).Scan(&tables); err != nil {
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

// TestReadsBesideOpenWrite shows why reads have their own pool: with the
// one write connection held by an open transaction (River's, say), key
// lookups still answer, and see only what was committed.
func TestReadsBesideOpenWrite(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { db.Close() })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := db.KeyCreate(t.Context(), weir.APIKey{ID: "k1", Hash: "h1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}

	tx, err := db.SQL().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(),
		`INSERT INTO api_keys (id, name, prefix, hash, group_name, created_at) VALUES ('k2', '', '', 'h2', '', ?)`,
		formatTime(at)); err != nil {
		t.Fatal(err)
	}

	// If reads shared the write connection this would wait until the
	// deadline; it must answer at once.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := db.KeyByHash(ctx, "h1"); err != nil {
		t.Fatalf("KeyByHash beside an open write transaction: %v", err)
	}
	if _, err := db.KeyByHash(ctx, "h2"); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("KeyByHash saw an uncommitted key: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.KeyByHash(ctx, "h2"); err != nil {
		t.Errorf("KeyByHash after commit: %v", err)
	}
}

// TestStoredTimeText pins the stored form, which other tools (and text
// comparisons in SQL) rely on.
func TestStoredTimeText(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_789, time.FixedZone("UTC+2", 7200))
	if got, want := formatTime(at), "2026-01-02T01:04:05.000006Z"; got != want {
		t.Errorf("formatTime = %q, want %q", got, want)
	}
}

func TestTaskStore(t *testing.T) {
	t.Parallel()
	storetest.ExerciseTasks(t, func(t *testing.T) interface {
		weir.Store
		weir.TaskStore
	} {
		return openTemp(t)
	})
}

func TestTaskStoreInMemory(t *testing.T) {
	t.Parallel()
	storetest.ExerciseTasks(t, func(t *testing.T) interface {
		weir.Store
		weir.TaskStore
	} {
		return openMemory(t)
	})
}

// TestTx runs on a file: on ":memory:" the transaction holds the one
// connection the suite's reads would need.
func TestTx(t *testing.T) {
	t.Parallel()
	storetest.ExerciseTx(t, func(t *testing.T) storetest.TxStore[*sql.Tx] {
		db := openTemp(t)
		t.Cleanup(func() { db.Close() })
		return db
	})
}

func TestSpendStore(t *testing.T) {
	t.Parallel()
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
	storetest.ExerciseNodes(t, func(t *testing.T) interface {
		weir.NodeStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestOverrideStore(t *testing.T) {
	t.Parallel()
	storetest.ExerciseOverrides(t, func(t *testing.T) interface {
		weir.OverrideStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestBudgetStore(t *testing.T) {
	t.Parallel()
	storetest.ExerciseBudgets(t, func(t *testing.T) interface {
		weir.BudgetStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestResponseStore(t *testing.T) {
	t.Parallel()
	storetest.ExerciseResponses(t, func(t *testing.T) interface {
		weir.ResponseStore
		io.Closer
	} {
		return openTemp(t)
	})
}

func TestNodeStoreInMemory(t *testing.T) {
	t.Parallel()
	storetest.ExerciseNodes(t, func(t *testing.T) interface {
		weir.NodeStore
		io.Closer
	} {
		return openMemory(t)
	})
}

// TestOpenAtOnce: processes opening a new file at the same instant (weir
// serve, and weir keys create beside it) all open it: whoever loses the
// race to apply a migration carries on from the winner's.
func TestOpenAtOnce(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		path := filepath.Join(t.TempDir(), "weir.db")
		errs := make(chan error, 3)
		for range cap(errs) {
			go func() {
				db, err := Open(t.Context(), path)
				if err == nil {
					err = db.Close()
				}
				errs <- err
			}()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: Open beside two others on a new file: %v", round, err)
			}
		}
	}
}

// TestUsageBeforeCost: a usage record written before records carried
// their cost reads as no group, nothing cached, free and measured.
func TestUsageBeforeCost(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	t.Cleanup(func() { _ = db.Close() })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := db.KeyCreate(t.Context(), weir.APIKey{ID: "k1", Hash: "h1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.write.ExecContext(t.Context(), `INSERT INTO usage_records (request_id, key_id, model, platform_model,
		endpoint, prompt_tokens, completion_tokens, waited_ns, latency_ns, status, outcome, at)
		VALUES ('r1', 'k1', 'm', 'p/m', 'chat', 10, 5, 0, 0, 200, 'ok', ?)`, formatTime(at)); err != nil {
		t.Fatal(err)
	}
	us, err := db.UsageList(t.Context(), weir.UsageFilter{})
	if err != nil || len(us) != 1 {
		t.Fatalf("UsageList: %+v, %v", us, err)
	}
	if u := us[0]; u.Group != "" || u.CachedTokens != 0 || u.Cost != 0 || u.CostEstimated || u.PromptTokens != 10 {
		t.Errorf("an old record reads %+v", u)
	}
}
