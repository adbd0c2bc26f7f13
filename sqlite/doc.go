// Package sqlite is Weir's embedded home: a weir.Store on one SQLite file,
// through the pure-Go driver modernc.org/sqlite (no cgo).
//
// # Settings
//
// Every connection runs with busy_timeout (5s), foreign_keys on, and the
// database in WAL mode with synchronous=NORMAL: a commit is durable
// against a crash of the process, and only the last transactions before
// a power loss can be lost (those since a checkpoint last synced the
// WAL: up to about 5 s of them at light load); the database is never
// corrupted.
//
// # Connections
//
// A DB holds two pools and a connection on the same file:
//
//   - the write pool, one connection, which SQL returns. Every write goes
//     through it: keys, usage batches, tasks, and River's SQLite driver
//     (RiverDriver).
//     InTx runs a function in a transaction on it, so that the task
//     service changes a task (TaskUpdateTx) and inserts its River job in
//     one commit. SQLite admits one writer at a time anyway; queueing
//     writers on one connection in Go's pool is fair and costs nothing,
//     where several writing connections would meet in SQLite's busy
//     handler, which sleeps and retries. River also advises a single
//     connection for SQLite. Transactions on it begin IMMEDIATE, so a
//     transaction that reads and then writes cannot fail to upgrade its
//     lock when another process (a CLI) writes too.
//   - the read pool, a few query_only connections, for KeyByHash, KeyByID,
//     KeyList, UsageList, TaskGet and TaskList. WAL lets them read beside
//     the writer, so the request path's key lookups never wait behind a
//     usage flush or a River transaction, and a read made while holding a
//     write transaction (on SQL) cannot deadlock on the one write
//     connection. A read sees what was committed when it began, not a
//     transaction still open.
//   - the checkpointer's connection, which copies the WAL back into the
//     database file once it has grown by about 250 pages, or 5 s after
//     a commit (checkpoint.go), so that the write connection does not
//     stand still while it does.
//
// ":memory:" is the exception: every connection to it is a separate
// database, so there the read pool is the write connection. It suits tests
// and throwaway runs; a read made while the same goroutine holds a write
// transaction on SQL would wait forever there.
//
// # Schema
//
// Migrations are the embedded migrations/NNNNN_name.sql files, applied at
// Open by goose (github.com/pressly/goose/v3) in order, each in its own
// transaction; goose records them in goose_db_version. Add a migration as
// the next number; never edit one that has shipped. River keeps its own
// tables and its own migration line in the same file; riverjob.Migrate applies
// them (rivermigrate), when the task service starts.
//
// # River
//
// A DB is a task.Store[*sql.Tx]: it hands the task service River's SQLite
// driver, the transactions its jobs are inserted in (InTx), and
// JobReclaimRunning, which makes the jobs a killed process left running
// available again. River offers no public
// call for that, so it uses River's driver executor, here and only here,
// under a test that pins its effect.
//
// Times are stored as UTC text with a fixed microsecond precision
// ("2006-01-02T15:04:05.000000Z"), which sorts as text and reads well in
// the sqlite3 shell; durations are integer nanoseconds. A task's input and
// result are BLOBs holding the JSON bytes as given (migration 00003 says
// why and how to read them).
package sqlite
