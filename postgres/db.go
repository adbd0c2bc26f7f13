package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/weir-gateway/weir"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

const (
	// defaultMaxConns is the pool's size when the DSN does not say
	// (pool_max_conns). pgxpool's own default (the number of CPUs, at
	// least 4) is too small beside River, whose notifier holds a
	// connection for good and whose producers, elector and workers each
	// take one while the request path looks keys up.
	defaultMaxConns = 20
	// defaultConnectTimeout bounds each connection attempt when the DSN
	// does not (connect_timeout), so that an address that never answers
	// fails Open instead of hanging it.
	defaultConnectTimeout = 10 * time.Second
	// writeBatches is how many batches of writes (batch.go) a DB sends
	// at a time: enough that a submission does not wait for the running
	// tasks' updates before it, few enough to leave the pool's other
	// connections to the dispatcher, River and the reads.
	writeBatches = 4
	// migrateLockEvery is how often a process waiting for another's
	// migrations tries the lock again; migrateLockTries bounds the wait.
	migrateLockEvery = time.Second
	migrateLockTries = 300
)

// DB is a weir.Store on a PostgreSQL database, and the fleet's
// coordination (fleet.Coordination, fleet.NodeBoard). See the package
// documentation for its pool and schema.
type DB struct {
	pool  *pgxpool.Pool
	river *riverpgxv5.Driver
	log   *slog.Logger
	// listener is the one LISTEN connection (listen.go).
	listener listener
	// probeTimeout is how long the listener's first connection waits for
	// its own probe notification.
	probeTimeout time.Duration
	hooks        dbHooks
	// writes sends the statements of TaskCreate and TaskUpdate in shared
	// round trips (batch.go); notices sends NotifyTask's, many in one
	// statement (notices.go), apart from the writes since a commit that
	// notifies holds PostgreSQL's notice queue lock through its flush.
	writes  stmtBatcher
	notices noticeSender
}

// dbHooks let tests see into the connections of its own a DB makes; nil
// hooks are skipped.
type dbHooks struct {
	// connecting is called before the listener connects.
	connecting func()
	// listening is called with the backend's pid each time the listener
	// has LISTENed afresh.
	listening func(pid uint32)
	// living is called with the backend's pid each time a life session
	// holds its lock afresh.
	living func(pid uint32)
}

// Config configures OpenConfig.
type Config struct {
	// DSN is the database's (required): a URL, postgres://..., or
	// key=value pairs, as libpq and pgx take them.
	DSN string
	// Logger receives what the DB's own connections — the listener, the
	// fleet's life sessions — run into when they are lost and made
	// again. Default none.
	Logger *slog.Logger
}

// newDB returns a DB on pool.
func newDB(pool *pgxpool.Pool, logger *slog.Logger) *DB {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	db := &DB{pool: pool, river: riverpgxv5.New(pool), log: logger, probeTimeout: probeTimeout}
	db.listener.db = db
	db.writes = stmtBatcher{pool: pool, limit: writeBatches}
	db.notices = noticeSender{pool: pool}
	return db
}

var _ weir.Store = (*DB)(nil)

// Open connects to the database at dsn (a URL, postgres://..., or
// key=value pairs, as libpq and pgx take them), makes sure it answers,
// and brings Weir's tables up to date. River's tables are riverjob.Migrate's.
//
// A DSN that does not parse is weir.ErrInvalid; a server that cannot be
// reached is an error naming its host and port. Neither error repeats a
// password.
func Open(ctx context.Context, dsn string) (*DB, error) {
	return OpenConfig(ctx, Config{DSN: dsn})
}

// OpenConfig is Open with a Config.
func OpenConfig(ctx context.Context, c Config) (*DB, error) {
	dsn := c.DSN
	if strings.TrimSpace(dsn) == "" {
		// pgx would take it for libpq's defaults: the local server.
		return nil, fmt.Errorf("open postgres: %w: no DSN given", weir.ErrInvalid)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's error redacts the password.
		return nil, fmt.Errorf("open postgres: %w: %w", weir.ErrInvalid, err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	where := Describe(dsn)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres at %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres at %s: %w", where, err)
	}
	db := newDB(pool, c.Logger)
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres at %s: %w", where, err)
	}
	return db, nil
}

// Pool returns the connection pool, shared with River's driver
// (RiverDriver), for transactions that write Weir's tables and River's
// jobs together, and for whatever else needs the database. Do not close
// it: Close does.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Ping checks that the server answers.
func (db *DB) Ping(ctx context.Context) error { return db.pool.Ping(ctx) }

// Close closes the pool, waiting for the connections in use to come back.
// The listener (ListenTasks, TermListen) and life sessions (LifeHold) run
// on connections of their own, which close when their contexts end.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// newMigrator returns goose's provider for the embedded migrations on
// sqlDB, holding a session lock of the schema's own while it migrates.
func newMigrator(ctx context.Context, sqlDB *sql.DB) (*goose.Provider, error) {
	dir, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var schema string
	if err := sqlDB.QueryRowContext(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("read the current schema: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrateLockID(schema)),
		lock.WithLockTimeout(uint64(migrateLockEvery/time.Second), migrateLockTries))
	if err != nil {
		return nil, err
	}
	// Only our files: nothing registered in goose's global registry by
	// another package may run against this database.
	return goose.NewProvider(goose.DialectPostgres, sqlDB, dir,
		goose.WithDisableGlobalRegistry(true), goose.WithSessionLocker(locker))
}

// migrateLockID is the advisory lock held while migrating schema: the
// same for every process on the schema, so that two of them starting on
// a new database do not apply a migration twice, and another for each
// schema, so that tests on schemas of their own do not wait for each
// other.
func migrateLockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("weir goose migrations\x00" + schema))
	return int64(h.Sum64())
}

// migrate applies the migrations not yet applied, each in its own
// transaction, under the schema's migration lock.
func (db *DB) migrate(ctx context.Context) error {
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	defer sqlDB.Close() // returns its connections to the pool; the pool stays open
	p, err := newMigrator(ctx, sqlDB)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Describe returns where dsn points, for logs and errors: the user, the
// host and port (each host, for a DSN that lists several) and the
// database, as a postgres:// URL without a password or any other
// parameter. A DSN that does not parse is described as such, without
// repeating it.
func Describe(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(a DSN that does not parse)"
	}
	hosts := []string{hostPort(cfg.Host, cfg.Port)}
	for _, fb := range cfg.Fallbacks {
		if hp := hostPort(fb.Host, fb.Port); !slices.Contains(hosts, hp) {
			hosts = append(hosts, hp)
		}
	}
	user := ""
	if cfg.User != "" {
		user = cfg.User + "@"
	}
	return "postgres://" + user + strings.Join(hosts, ",") + "/" + cfg.Database
}

func hostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return "[" + host + "]:" + strconv.Itoa(int(port)) // a Unix socket's directory
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// classify wraps constraint failures and bad data in the domain's
// sentinels, keeping PostgreSQL's message (which names the constraint)
// for the logs.
func classify(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == "23505": // unique_violation
		return fmt.Errorf("%w: %w", weir.ErrConflict, err)
	case pe.Code == "23503", pe.Code == "23514", pe.Code == "23502": // foreign key, check, not null
		return fmt.Errorf("%w: %w", weir.ErrInvalid, err)
	case strings.HasPrefix(pe.Code, "22"):
		// Data exceptions: a NUL byte in text, a value out of range.
		return fmt.Errorf("%w: %w", weir.ErrInvalid, err)
	}
	return err
}

// dbTime is t as stored: UTC, truncated to the microsecond that
// timestamptz keeps (pgx would truncate it too; saying so keeps the rule
// in one place).
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// nullTime is t for a nullable timestamptz: NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = dbTime(t)
	return &t
}

// fromNullTime reads a nullable timestamptz: NULL is the zero time; pgx
// gives times in the local zone, the domain wants UTC.
func fromNullTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
