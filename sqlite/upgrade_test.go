package sqlite

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/weir-gateway/weir/storetest"
)

// TestMigrationsOnlyAdd: every migration only adds, so that the build
// before it keeps working on the newer schema (a rollback), but for
// those reviewed (docs/upgrades.md).
func TestMigrationsOnlyAdd(t *testing.T) {
	t.Parallel()
	dir, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Additive(t, dir, map[string]string{
		// SQLite alters no constraint: the table is rebuilt with the
		// same columns and a wider CHECK, which every row an older
		// build writes still passes.
		"00016_end_users.sql": "rebuilds budgets to widen its subject_type CHECK to admit 'user'",
		// The indexes refuse nothing and serve the same queries, whose
		// answers do not change; an older build's spend of a group or
		// an end user, whose query does not say the name is not '',
		// searches the index on (at, seq) over the window instead.
		"00019_usage_named_indexes.sql": "makes the group and end user indexes of usage_records partial",
		// An index no build's query reads: an older build writes and
		// reads the same without it.
		"00020_tasks_no_status_deadline.sql": "drops tasks_status_deadline, which no query reads",
	})
}

// TestOlderBuildStartsOnNewerSchema: a build rolled back to an older one
// finds migrations it does not know applied; goose takes that as nothing
// to do, and the store opens.
func TestOlderBuildStartsOnNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "weir.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	// What a newer build would have applied.
	if _, err := db.write.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied)
		SELECT max(version_id) + 1, 1 FROM goose_db_version`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	older, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("this build on a schema one migration newer: %v; want it to open", err)
	}
	defer older.Close()
	if _, err := older.KeyList(ctx); err != nil {
		t.Fatalf("the store on the newer schema: %v", err)
	}
}
