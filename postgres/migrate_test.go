package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/pgtest"
)

// The fleet's tables were once migrated by a goose line of the fleet's
// own (table weir_fleet_goose_version), beside the store's; testdata
// holds its four migrations as they shipped, to make such a database.

// legacyFleetLine is the fleet's former goose version table.
const legacyFleetLine = "weir_fleet_goose_version"

// gooseOn returns a goose provider on pool for the migrations in dir,
// recorded in table (empty: goose's default), without a lock: the
// tests that use it are alone on their schema.
func gooseOn(t *testing.T, pool *pgxpool.Pool, dir fs.FS, table string) *goose.Provider {
	t.Helper()
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { sqlDB.Close() })
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if table != "" {
		opts = append(opts, goose.WithTableName(table))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// storeLine is the store's migrations as a version of Weir that had
// those up to last shipped them.
func storeLine(t *testing.T, pool *pgxpool.Pool, last int64) *goose.Provider {
	t.Helper()
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	dir := fstest.MapFS{}
	for _, f := range files {
		name := path.Base(f)
		v, err := strconv.ParseInt(name[:strings.IndexByte(name, '_')], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if v > last {
			continue
		}
		b, err := migrationFiles.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dir[name] = &fstest.MapFile{Data: b}
	}
	return gooseOn(t, pool, dir, "")
}

func legacyLine(t *testing.T, pool *pgxpool.Pool) *goose.Provider {
	t.Helper()
	return gooseOn(t, pool, os.DirFS("testdata/fleet-goose-line"), legacyFleetLine)
}

// applied returns the versions goose records as applied in table, one
// entry per row.
func applied(t *testing.T, pool *pgxpool.Pool, table string) []int64 {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT version_id FROM `+table+` WHERE version_id > 0 AND is_applied ORDER BY version_id`)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// shipped are the versions of the migrations this release embeds, in
// order: numbers another change holds may be missing between them.
func shipped(t *testing.T) []int64 {
	t.Helper()
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, f := range files {
		num, _, _ := strings.Cut(path.Base(f), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func versions(from, to int64) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// TestMigrationsAreOneSet: a new database gets the store's and the
// fleet's tables from one set of migrations, recorded in one goose
// table, each once.
func TestMigrationsAreOneSet(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	if got, want := applied(t, db.pool, "goose_db_version"), shipped(t); !slices.Equal(got, want) {
		t.Fatalf("goose_db_version records %v; want %v, each once", got, want)
	}
	var legacy bool
	if err := db.pool.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, legacyFleetLine).Scan(&legacy); err != nil {
		t.Fatal(err)
	}
	if legacy {
		t.Fatalf("a new database has %s: the fleet's tables have a goose line of their own", legacyFleetLine)
	}
	if term, err := db.TermGet(t.Context()); err != nil || term.Epoch != 0 || term.Left != 0 {
		t.Fatalf("fresh term = %+v, %v; want epoch 0, ended", term, err)
	}
}

// TestUpgradeFromTheFleetsGooseLine: a database migrated by an earlier
// Weir — the store's migrations in goose_db_version, the fleet's in a
// line of their own — is brought up to date by Open: goose records the
// fleet's migrations in the one set as applied without making their
// tables again, makes what the earlier version had not, keeps what the
// fleet stored, and leaves the schema as a new database's. The earlier
// version's goose lines still find nothing to do, as a replica of it
// started during a rolling upgrade does.
func TestUpgradeFromTheFleetsGooseLine(t *testing.T) {
	t.Parallel()
	fresh := schemaOf(t, openTemp(t).pool)
	for _, tc := range []struct {
		name  string
		store int64 // the store's migrations applied
		fleet int64 // the fleet's line's; 0: the fleet never ran
	}{
		{name: "the last earlier version", store: 7, fleet: 4},
		{name: "an older version", store: 5, fleet: 2},
		{name: "a database no replica served", store: 7, fleet: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.Schema(t)
			pool, err := pgxpool.New(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if _, err := storeLine(t, pool, tc.store).Up(t.Context()); err != nil {
				t.Fatalf("the store's migrations up to %d: %v", tc.store, err)
			}
			var secret string
			if tc.fleet > 0 {
				if _, err := legacyLine(t, pool).UpTo(t.Context(), tc.fleet); err != nil {
					t.Fatalf("the fleet's line up to %d: %v", tc.fleet, err)
				}
				secret = seedLegacyFleet(t, pool, tc.fleet)
			}

			db := open(t, dsn)
			if got, want := applied(t, pool, "goose_db_version"), shipped(t); !slices.Equal(got, want) {
				t.Fatalf("goose_db_version records %v; want %v, each once", got, want)
			}
			if tc.fleet > 0 {
				if got := applied(t, pool, legacyFleetLine); !slices.Equal(got, versions(1, tc.fleet)) {
					t.Fatalf("%s records %v after the upgrade; want it as it was, 1 to %d", legacyFleetLine, got, tc.fleet)
				}
			}
			if got := schemaOf(t, pool); !slices.Equal(got, fresh) {
				t.Fatalf("the upgraded schema differs from a new one:\n%s", diff(fresh, got))
			}

			ctx := t.Context()
			term, err := db.TermGet(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.fleet > 0 {
				if term.Epoch != 5 || term.Leader != "old" {
					t.Fatalf("the term after the upgrade: %+v; want epoch 5 of old, as stored", term)
				}
				rs, err := db.ReplicaList(ctx, &fleet.ReplicaListParams{Timeout: time.Hour})
				if err != nil || len(rs) != 1 || rs[0].ID != "old" {
					t.Fatalf("replicas after the upgrade: %+v, %v; want old's registration", rs, err)
				}
			}
			if secret != "" {
				if got, err := db.SecretEnsure(ctx, strings.Repeat("n", 64)); err != nil || got != secret {
					t.Fatalf("the secret after the upgrade: %q, %v; want the stored %q", got, err, secret)
				}
			}
			// The fleet works on it: a campaign takes the next epoch, and
			// the term's trigger announces it.
			heard := make(chan uint64, 8)
			lctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- db.TermListen(lctx, func(e uint64) { heard <- e }) }()
			defer func() {
				cancel()
				<-done
			}()
			if e := <-heard; e != 0 {
				t.Fatalf("first announcement %d; want 0", e)
			}
			c, err := fleet.NewCoordinator(db, fleet.CoordConfig{Replica: "new", Addr: "new:1"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Register(ctx); err != nil {
				t.Fatal(err)
			}
			next, won, err := c.Campaign(ctx)
			if err != nil || !won || next.Epoch != term.Epoch+1 {
				t.Fatalf("a campaign after the upgrade: %+v, %v, %v; want epoch %d won", next, won, err, term.Epoch+1)
			}
			select {
			case e := <-heard:
				if e != next.Epoch {
					t.Fatalf("announced epoch %d; want %d", e, next.Epoch)
				}
			case <-time.After(guard):
				t.Fatal("the campaign was not announced")
			}

			// A replica of the earlier version, started now.
			if res, err := storeLine(t, pool, 7).Up(ctx); err != nil || len(res) != 0 {
				t.Fatalf("the earlier store line after the upgrade: %d applied, %v; want nothing to do", len(res), err)
			}
			if tc.fleet == 4 {
				res, err := legacyLine(t, pool).Up(ctx)
				if err != nil || len(res) != 0 {
					t.Fatalf("the earlier fleet line after the upgrade: %d applied, %v; want nothing to do", len(res), err)
				}
			}
			if current, target := appliedVersions(t, open(t, dsn)); current != target {
				t.Fatalf("after another Open the schema is at %d of %d", current, target)
			}
		})
	}
}

// seedLegacyFleet stores what an earlier fleet at migration v of its line
// would have — a term of epoch 5 that has expired, a registration, the
// secret (v ≥ 2), an offer (v ≥ 4) — and returns the secret, if any.
func seedLegacyFleet(t *testing.T, pool *pgxpool.Pool, v int64) (secret string) {
	t.Helper()
	ctx := t.Context()
	stmts := []string{
		`UPDATE weir_fleet_term SET epoch = 5, leader = 'old', addr = 'old:1', expires_at = now() - interval '1 minute'`,
		`INSERT INTO weir_fleet_replicas (id, gen, addr, started_at, heartbeat_at)
			VALUES ('old', nextval('weir_fleet_replica_gen'), 'old:1', now(), now())`,
	}
	if v >= 2 {
		secret = strings.Repeat("s", 64)
		stmts = append(stmts, `INSERT INTO weir_fleet_secret (secret) VALUES ('`+secret+`')`)
	}
	if v >= 4 {
		stmts = append(stmts, `INSERT INTO weir_fleet_nodes (replica, addr, served, updated_at) VALUES ('old', 'http://old:8080', '{}', now())`)
	}
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return secret
}

// schemaOf describes the schema pool's connections use — its tables'
// columns, constraints, indexes, triggers, functions and sequences,
// goose's own tables left out — as sorted lines that name no schema, so
// that two schemas can be compared.
func schemaOf(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	ctx := t.Context()
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	queries := []string{
		`SELECT 'column ' || c.relname || ' ' || c.relkind::text || c.relpersistence::text || ' ' || a.attnum || ' ' || a.attname || ' ' ||
			format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END ||
			coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') || coalesce(' collate ' || co.collname, '')
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 100
		WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'S') AND c.relname NOT LIKE '%goose%'`,
		`SELECT 'constraint ' || c.relname || ' ' || co.conname || ' ' || pg_get_constraintdef(co.oid)
		FROM pg_constraint co JOIN pg_class c ON c.oid = co.conrelid JOIN pg_namespace n ON n.oid = co.connamespace
		WHERE n.nspname = $1 AND c.relname NOT LIKE '%goose%'`,
		`SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename NOT LIKE '%goose%'`,
		`SELECT 'trigger ' || t.tgname || ' ' || pg_get_triggerdef(t.oid)
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND NOT t.tgisinternal`,
		`SELECT 'function ' || p.proname || ' ' || p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`,
		`SELECT 'sequence ' || sequencename || ' ' || data_type FROM pg_sequences WHERE schemaname = $1 AND sequencename NOT LIKE '%goose%'`,
	}
	var out []string
	for _, q := range queries {
		rows, err := pool.Query(ctx, q, schema)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var line sql.NullString
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			out = append(out, strings.ReplaceAll(line.String, schema+".", "S."))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("schema %s describes as nothing", schema)
	}
	return out
}

// diff lists the lines only want has and only got has.
func diff(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}
