package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/riverjob"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

const (
	busyTimeout = 5 * time.Second
	// readConns bounds the read pool. Reads are short index lookups; a
	// few connections keep the request path from queueing behind one
	// another without holding many WAL read marks open.
	readConns = 4
	// timeLayout is how times are stored: UTC, always six fractional
	// digits, so that text order is time order.
	timeLayout = "2006-01-02T15:04:05.000000Z"
)

// DB is a weir.Store on one SQLite file. See the package documentation
// for its connections.
type DB struct {
	write *sql.DB // one connection; every write
	read  *sql.DB // query_only pool; the write pool itself for ":memory:"
	// The request path's lookups, prepared once per read connection:
	// parsing the SQL costs about as much as running it.
	keyByHash, keyByID *sql.Stmt
	taskGet            *sql.Stmt
	// The scope overrides, which the gateway reads each time its scopes
	// are viewed (GET /admin/queues, the console).
	overrideList *sql.Stmt
	// The task writes, prepared once on the write connection; a
	// transaction on it (InTx) reuses them through Tx.StmtContext.
	taskInsert, taskByIdempotency, taskUpdate, taskUpdateSame *sql.Stmt
	taskStatus, taskDelete                                    *sql.Stmt
	// The usage inserts and the spend journal's, of each size a batch
	// is cut into (eachChunk), and the deletion of a usage batch's
	// reservations.
	usageInsert, reserve insertStmts
	reserveSettle        *sql.Stmt
	// stmts are all of the above that prepare made, for Close.
	stmts []*sql.Stmt
	// river is River's driver on the write connection, its notifications
	// in the process (riverjob.InProcess): weir serve locks the file, so
	// only this process runs its jobs.
	river riverdriver.Driver[*sql.Tx]
	// group makes concurrent single-task writes share transactions
	// (groupcommit.go).
	group groupCommit
	// checkpoints runs the WAL's checkpoints off the write connection
	// (checkpoint.go); nil for ":memory:".
	checkpoints *checkpointer
}

var _ weir.Store = (*DB)(nil)

// Open opens (creating it if needed) the database at path, a file path or
// ":memory:", and brings its schema up to date. River's tables are
// riverjob.Migrate's.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, clock.Real)
}

// open is Open with the clock that times the checkpoints (checkpoint.go).
func open(ctx context.Context, path string, clk clock.Clock) (*DB, error) {
	if path == "" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open sqlite %q: %w: want a file path without '?' or \":memory:\"", path, weir.ErrInvalid)
	}
	memory := path == ":memory:"
	timeout := strconv.FormatInt(busyTimeout.Milliseconds(), 10)

	writeConn, err := sqlite.NewConnector(path + "?" + url.Values{
		"_busy_timeout": {timeout},
		"_foreign_keys": {"on"},
		"_journal_mode": {"WAL"},
		"_synchronous":  {"NORMAL"},
		"_txlock":       {"immediate"},
		// Statement journals (a multi-row INSERT keeps one) and temporary
		// b-trees in memory: on a file they cost a write(2) per page.
		// The WAL's checkpoints are the checkpointer's (checkpoint.go).
		"_pragma": {"temp_store(MEMORY)", "wal_autocheckpoint(" + strconv.Itoa(writeAutoCheckpoint) + ")"},
	}.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	var ckpt *checkpointer
	var committed func() int32
	if !memory {
		if ckpt, err = newCheckpointer(path, timeout, clk); err != nil {
			return nil, err
		}
		committed = ckpt.committed
	}
	// Its statements stay prepared (stmtcache.go): River runs its SQL
	// unprepared on it.
	write := sql.OpenDB(cachingConnector{inner: writeConn, committed: committed})
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxIdleTime(0) // never close it: for ":memory:" that would lose the database
	write.SetConnMaxLifetime(0)
	db := &DB{write: write, read: write, river: riverjob.InProcess(riversqlite.New(write)), checkpoints: ckpt}

	if err := db.checkJournal(ctx, memory); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := migrate(ctx, write); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if memory {
		if err := db.prepare(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
		return db, nil
	}

	read, err := sql.Open("sqlite", path+"?"+url.Values{
		"_busy_timeout": {timeout},
		"_query_only":   {"on"},
	}.Encode())
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
	}
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	db.read = read
	if err := db.prepare(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
	}
	return db, nil
}

// prepare prepares the statements of the request path on the read pool,
// and the task, usage and spend journal writes on the write connection.
func (db *DB) prepare(ctx context.Context) error {
	type prepared struct {
		stmt **sql.Stmt
		pool *sql.DB
		sql  string
	}
	var inserts []prepared
	for k := range db.usageInsert {
		inserts = append(inserts, prepared{&db.usageInsert[k], db.write, usageInsertSQL(1 << k)},
			prepared{&db.reserve[k], db.write, reservationInsertSQL(1 << k)})
	}
	for _, s := range append([]prepared{
		{&db.keyByHash, db.read, `SELECT ` + keyColumns + ` FROM api_keys WHERE hash = ?`},
		{&db.keyByID, db.read, `SELECT ` + keyColumns + ` FROM api_keys WHERE id = ?`},
		{&db.taskGet, db.read, taskGetSQL},
		{&db.overrideList, db.read, overrideListSQL},
		{&db.taskInsert, db.write, taskInsertSQL},
		{&db.taskByIdempotency, db.write, taskByIdempotencySQL},
		{&db.taskUpdate, db.write, taskUpdateSQL},
		{&db.taskUpdateSame, db.write, taskUpdateSameSQL},
		{&db.taskStatus, db.write, taskStatusSQL},
		{&db.taskDelete, db.write, taskDeleteSQL},
		{&db.reserveSettle, db.write, reservationSettleSQL},
	}, inserts...) {
		var err error
		if *s.stmt, err = s.pool.PrepareContext(ctx, s.sql); err != nil {
			return err
		}
		db.stmts = append(db.stmts, *s.stmt)
	}
	return nil
}

// checkJournal makes sure the file really is in WAL mode: SQLite answers
// a journal_mode it cannot apply with the mode it kept, not an error.
//
// The first query opens the connection, which applies the DSN's pragmas.
// Turning a new file to WAL needs its exclusive lock, and when two
// processes hold its shared lock and both ask for that, SQLite answers one
// SQLITE_BUSY at once rather than wait in the busy handler (which could
// deadlock). That connection is not kept, so opening another one, once the
// winner is done, is safe.
func (db *DB) checkJournal(ctx context.Context, memory bool) error {
	var mode string
	deadline := time.Now().Add(busyTimeout)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := db.write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil {
			break
		}
		if !isBusy(err) || time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("read journal mode: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("read journal mode: %w", err)
		case <-time.After(wait):
		}
	}
	want := "wal"
	if memory {
		want = "memory"
	}
	if !strings.EqualFold(mode, want) {
		return fmt.Errorf("journal mode is %q, want %q", mode, want)
	}
	return nil
}

// newMigrator returns goose's provider for the embedded migrations.
func newMigrator(db *sql.DB) (*goose.Provider, error) {
	dir, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	// Only our files: nothing registered in goose's global registry by
	// another package may run against this database.
	return goose.NewProvider(goose.DialectSQLite3, db, dir, goose.WithDisableGlobalRegistry(true))
}

// migrate applies the migrations not yet applied. Each runs in its own
// transaction on the write connection. Two processes opening a new file
// at the same instant (weir serve, and weir keys create beside it) may
// both try the same migration: SQLite's write lock lets one apply it and
// the other's fails and rolls back. Since goose holds no lock across
// migrations on SQLite, the loser reads the version again and goes on from
// there, a few times at most, rather than fail to open.
func migrate(ctx context.Context, db *sql.DB) error {
	p, err := newMigrator(db)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	// Not p.Close: it would close db.
	for tries := 1; ; tries++ {
		before, _ := p.GetDBVersion(ctx) // a new file has no version yet: 0
		_, err := p.Up(ctx)
		if err == nil {
			return nil
		}
		after, verr := p.GetDBVersion(ctx)
		if tries == migrateTries || verr != nil || after <= before {
			return fmt.Errorf("migrate: %w", err)
		}
	}
}

// migrateTries bounds migrate's rounds: each one that fails after another
// process moved the version on is tried again.
const migrateTries = 5

// SQL returns the write pool: one connection, shared with River's driver
// (RiverDriver), for transactions that write Weir's tables and River's
// jobs together. Do not raise its connection limit: a second writing
// connection would only wait in SQLite's busy handler.
func (db *DB) SQL() *sql.DB { return db.write }

// Close closes both pools and the checkpointer.
func (db *DB) Close() error {
	var errs []error
	for _, stmt := range db.stmts {
		errs = append(errs, stmt.Close())
	}
	if db.read != db.write {
		errs = append(errs, db.read.Close())
	}
	errs = append(errs, db.write.Close())
	if db.checkpoints != nil {
		errs = append(errs, db.checkpoints.close())
	}
	return errors.Join(errs...)
}

// isBusy reports whether err is SQLite's SQLITE_BUSY, of any extended code.
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// classify wraps constraint failures in the domain's sentinels, keeping
// SQLite's message (which names the constraint) for the logs.
func classify(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return fmt.Errorf("%w: %w", weir.ErrConflict, err)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY, sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return fmt.Errorf("%w: %w", weir.ErrInvalid, err)
	}
	return err
}

func formatTime(t time.Time) string {
	var buf [len(timeLayout)]byte
	return string(appendTime(buf[:0], t))
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t, nil
}
