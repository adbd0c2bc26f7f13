package postgres

import (
	"io/fs"
	"testing"

	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/riverjob"
	"github.com/weir-gateway/weir/storetest"
)

// TestMigrationsOnlyAdd: every migration only adds, so that the build
// before it keeps working beside the newer schema during a rolling
// upgrade, but for those reviewed (docs/upgrades.md).
func TestMigrationsOnlyAdd(t *testing.T) {
	t.Parallel()
	dir, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Additive(t, dir, map[string]string{
		// New with the fleet's tables: a function and its trigger, made
		// so that a database an earlier fleet line migrated takes them
		// again unharmed.
		"00008_fleet_coordination.sql": "creates the fleet's trigger and its function, new with its tables",
		// A CHECK widened: every row an older build writes still passes.
		"00017_end_users.sql": "widens budgets' subject_type CHECK to admit 'user'",
		// An index no build's query reads: an older build writes and
		// reads the same without it.
		"00021_tasks_no_status_deadline.sql": "drops tasks_status_deadline, which no query reads",
		// A storage parameter: it says where new rows go, which no
		// build's statements see.
		"00023_tasks_fillfactor.sql": "sets the fillfactor of tasks",
	})
}

// TestOlderBuildStartsOnNewerSchema: in a rolling upgrade the newer
// build migrates first, and a replica of the older build started
// afterwards finds migrations it does not know applied. Neither goose
// nor River's migrator refuses that: an older build's migrations find
// nothing to do, and this build starts on a schema with a migration
// newer than its own, its River tables too.
func TestOlderBuildStartsOnNewerSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	db := open(t, dsn)
	ctx := t.Context()
	_, target := appliedVersions(t, db)
	if res, err := storeLine(t, db.pool, target-1).Up(ctx); err != nil || len(res) != 0 {
		t.Fatalf("the build before migration %d, on its schema: %d applied, %v; want nothing to do", target, len(res), err)
	}
	if err := riverjob.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	// What a newer build would have applied.
	if _, err := db.pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, target+1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO river_migration (line, version) SELECT line, max(version) + 1 FROM river_migration GROUP BY line`); err != nil {
		t.Fatal(err)
	}
	newer, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("this build on a schema one migration newer: %v; want it to start", err)
	}
	defer newer.Close()
	if err := riverjob.Migrate(ctx, newer); err != nil {
		t.Fatalf("River's migrations on a newer River schema: %v; want nothing to do", err)
	}
	if _, err := newer.KeyList(ctx); err != nil {
		t.Fatalf("this build's store on the newer schema: %v", err)
	}
}
