// Package postgres is Weir's home on PostgreSQL: a weir.Store, a
// weir.TaskStore and a task.Store[pgx.Tx] on one database, through pgx
// (github.com/jackc/pgx/v5) and its pool, and the fleet's coordination
// (fleet.Coordination, fleet.NodeBoard) on the same database. It is what
// `weir serve` uses when storage.driver is "postgres"; package sqlite is
// the embedded default, with the same store contract (package
// storetest). The coordination's contract is package coordtest's.
//
// # Connections
//
// A DB holds one pgxpool.Pool (Pool), on which every method and River's
// driver (RiverDriver) run. Unlike SQLite, PostgreSQL runs many writers
// at once, so there is no write connection to queue on: each statement
// takes a connection, and the rules that make concurrent writers safe are
// the statements' own (below). The single-statement writes that come
// hundreds a second while tasks drain (TaskCreate, TaskUpdate outside a
// transaction) share round trips instead: callers queue them, and one of
// them sends those queued as one pipeline, which PostgreSQL runs as one
// implicit transaction with one commit (batch.go). The task notices sent
// meanwhile (NotifyTask) go in one statement (notices.go). The pool's size is pool_max_conns from the DSN, or 20; each connection attempt gives up after connect_timeout
// from the DSN, or 10s. Open pings the server, so a DSN that cannot
// connect fails there, with an error naming the host (Describe) and never
// the password.
//
// The DSN's search_path decides the schema: Weir's tables, goose's
// version table and River's tables all live in the first schema on it
// (tests give each test a schema of its own this way; see package
// pgtest).
//
// # Concurrency
//
// Transactions are READ COMMITTED, PostgreSQL's default, and the
// contract's atomic steps are single statements:
//
//   - TaskCreate inserts with ON CONFLICT (key_id, idempotency_key) DO
//     NOTHING. An insert that meets a concurrent one of the same
//     idempotency key waits for the other transaction and does nothing if
//     it committed, so of concurrent creates, from any number of pools or
//     processes, exactly one creates the task; the others read it back.
//   - TaskUpdate is one UPDATE whose WHERE clause is the compare-and-set
//     on the status. A concurrent update of the same task waits for the
//     row's lock and then evaluates the WHERE clause again against the row
//     as the winner left it, so of updates from one status exactly one
//     applies. The same statement says whether the task exists at all.
//   - TaskDelete and TaskCallbackGone are compare-and-sets the same way;
//     UsageInsert is one INSERT of the whole batch (unnest of one array
//     per column), skipping request ids already stored.
//
// Task Seq comes from an identity column: numbers are taken at insert,
// not at commit, so concurrent submissions may become visible out of Seq
// order.
//
// # Schema
//
// Migrations are the embedded migrations/NNNNN_name.sql files, one set
// for the store's tables and the fleet's (weir_fleet_*, from 00008),
// applied at Open by goose (github.com/pressly/goose/v3) in order, each
// in its own transaction, over database/sql (pgx's stdlib) on the same
// pool; goose records them in goose_db_version. Open holds a session
// advisory lock of the schema's own while it migrates, so that processes
// starting together on a new database apply each migration once. Add a
// migration as the next number; never edit one that has shipped. River
// keeps its own tables and migration line in the same schema;
// riverjob.Migrate applies them (rivermigrate), when the task service
// starts.
//
// An earlier Weir migrated the fleet's tables through a goose line of
// their own (weir_fleet_goose_version, its migrations 1 to 4, which
// 00008 to 00011 replace). Those four make only what is missing (IF NOT
// EXISTS, or a look at the catalog), so on a database the earlier
// version migrated, whichever of its migrations it had applied, they
// change nothing it has and goose records them as applied; the schema
// then is a new database's. weir_fleet_goose_version is left as it was:
// a replica of the earlier version started during a rolling upgrade
// finds its fleet migrations applied, and its store migrations too
// (goose ignores versions recorded beyond its files).
//
// Times are timestamptz, stored to the microsecond and read back in UTC;
// durations are bigint nanoseconds. A task's input and result are bytea
// holding the JSON bytes as given (migration 00003 says why and how to
// read them); a key's models and a task's callback events are text[].
//
// # River
//
// A DB is a task.Store[pgx.Tx]: it hands the task service River's pgx
// driver (riverpgxv5) on the same pool, the transactions its jobs are
// inserted in (InTx), and
// JobReclaimRunning. Unlike on SQLite, other replicas may be running this
// database's jobs, so a replica does not reclaim every running job at
// start (task.Config.SoleRunner false). JobReclaimAttemptedBy takes back
// the jobs of one River client (one replica) at once, for the fleet to
// call when it declares a replica gone; otherwise River's rescue hands a
// dead replica's jobs to another after RescueStuckJobsAfter.
//
// # Notifications
//
// NotifyTask and ListenTasks (task.Notifier) tell the replicas on the
// database that a task changed, through NOTIFY on a channel named after
// the schema (notify.go), so that schemas sharing a database do not hear
// each other. The fleet's term is announced the same way, by a trigger
// (TermListen). A DB has one LISTEN connection for both, outside the
// pool, while anyone listens; when it is lost it is made again and every
// listener is told to read everything again (listen.go).
//
// # The fleet's coordination
//
// The term, the replicas' registrations and heartbeats, the fleet's
// secret and its node board are tables of the schema (coord.go,
// board.go); every time they compare is PostgreSQL's now(). A replica's
// life session is an advisory lock on a connection of its own
// (coord_life.go). A leader's writes are fenced by its epoch: Forget in
// its own statement, a task store transaction by TermFenceTx (the task
// service's task.Fencer), both by locking the term's row against the
// next campaign.
package postgres
