package fleet

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// versionTable is where goose records which of the fleet's migrations ran:
// a name of its own, so the fleet's migrations and the storage package's
// can share one schema.
const versionTable = "weir_fleet_goose_version"

// Migrate applies the fleet's migrations not yet applied, in the schema
// the pool's connections use (their search_path). Replicas starting
// together may all call it: a session advisory lock, keyed by the schema,
// lets one migrate while the others wait, then find nothing to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if pool == nil {
		return fmt.Errorf("fleet: migrate: nil pool")
	}
	dir, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("fleet: migrate: %w", err)
	}
	// Closing db releases its connections to the pool; it does not close
	// the pool.
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, dir,
		goose.WithTableName(versionTable),
		// Only our files: nothing another package registered in goose's
		// global registry may run here.
		goose.WithDisableGlobalRegistry(true),
		goose.WithSessionLocker(schemaLocker{}),
	)
	if err != nil {
		return fmt.Errorf("fleet: migrate: load migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("fleet: migrate: %w", err)
	}
	return nil
}

// schemaLocker serialises Migrate per schema with a session advisory lock
// whose key is derived from the schema's name, so tests (or fleets) in
// other schemas of the same database neither wait for it nor take it.
// It blocks in pg_advisory_lock until the lock is free or ctx ends, rather
// than polling.
type schemaLocker struct{}

var _ lock.SessionLocker = schemaLocker{}

const migrateLockKey = `hashtextextended('weir_fleet_migrate:' || coalesce(current_schema(), ''), 0)`

func (schemaLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(`+migrateLockKey+`)`); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	return nil
}

func (schemaLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock(`+migrateLockKey+`)`).Scan(&released); err != nil {
		return fmt.Errorf("release the migration lock: %w", err)
	}
	if !released {
		return fmt.Errorf("release the migration lock: it was not held")
	}
	return nil
}
