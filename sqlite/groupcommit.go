package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
)

// Group commit: the single-task writes that come many at once while
// tasks drain — a task created, a task's status or progress changed —
// share transactions. On SQLite a transaction's cost is mostly its BEGIN
// and its COMMIT (the WAL frames of every page it changed), which one
// commit for many writes pays once.
//
// Each write runs in a savepoint of the shared transaction, so a write
// that fails rolls back alone and the others commit; each caller returns
// once the transaction holding its write has committed (or failed), as
// with a transaction of its own. Writes queue while a transaction runs;
// its caller, on returning, hands the queue to the first caller waiting,
// which runs the next transaction, after letting the writers ready to
// run queue theirs (runGroup). No goroutine of its own runs it, and
// no caller runs more than one transaction besides the one holding its
// own write.

// groupMax bounds the writes one transaction takes.
const groupMax = 256

type groupCommit struct {
	mu      sync.Mutex
	queue   []*groupWrite
	running bool // a caller runs a transaction, or has been told to
	txs     int  // transactions run, for tests
}

// groupWrite is one write: fn, run in the shared transaction; err is its
// outcome, set before lead is sent false.
type groupWrite struct {
	fn  func(tx *sql.Tx) error
	err error
	// lead is sent true when this write's caller is to run the next
	// transaction, false when its write's transaction has ended.
	lead chan bool
}

// inGroupTx runs fn in a transaction on the write connection, shared
// with other writes queued meanwhile, and returns fn's error, or the
// transaction's if fn succeeded and the transaction did not commit. fn
// must not depend on the caller's context being live (a cancel would
// roll back the shared transaction): give its statements a context
// without cancel. A context done before fn is queued is returned as it
// is and nothing runs.
func (db *DB) inGroupTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g := &db.group
	w := &groupWrite{fn: fn, lead: make(chan bool, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if !lead {
		lead = <-w.lead
	}
	if lead {
		// Its own write is the queue's head.
		db.runGroup(w)
	}
	return w.err
}

// runGroup runs, as self's caller, one transaction of the first writes
// queued (self among them), tells each of the others how it ended, and
// hands the queue on.
//
// It first yields the processor once (runtime.Gosched), so that the
// writers already runnable — those the last transaction's end woke, the
// requests being read meanwhile — queue their writes into this
// transaction rather than each into a next one: a commit's cost (its
// WAL frames) is paid once for more writes. With nothing else runnable
// the yield returns at once.
func (db *DB) runGroup(self *groupWrite) {
	g := &db.group
	runtime.Gosched()
	g.mu.Lock()
	n := min(len(g.queue), groupMax)
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.txs++
	g.mu.Unlock()
	db.commitGroup(batch)
	for _, w := range batch {
		if w != self {
			w.lead <- false
		}
	}
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.running = false
		g.mu.Unlock()
		return
	}
	next := g.queue[0]
	g.mu.Unlock()
	next.lead <- true
}

// commitGroup runs batch's writes in one transaction, each in a
// savepoint, and sets each one's err.
func (db *DB) commitGroup(batch []*groupWrite) {
	if len(batch) == 1 {
		batch[0].err = db.InTx(context.Background(), batch[0].fn)
		return
	}
	ctx := context.Background()
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		for _, w := range batch {
			w.err = fmt.Errorf("begin transaction: %w", err)
		}
		return
	}
	var broken error
	for _, w := range batch {
		if broken = savepoint(ctx, tx, w); broken != nil {
			break
		}
	}
	if broken == nil {
		if err := tx.Commit(); err != nil {
			broken = fmt.Errorf("commit transaction: %w", err)
		}
	} else {
		_ = tx.Rollback()
	}
	if broken == nil {
		return
	}
	// Nothing committed: every write that had not failed on its own
	// fails with the transaction.
	for _, w := range batch {
		if w.err == nil {
			w.err = broken
		}
	}
}

// savepoint runs w in a savepoint of tx, rolled back to if w fails, and
// sets w.err; an error returned is the transaction's: it can take no
// more (SQLite may have rolled it back whole).
func savepoint(ctx context.Context, tx *sql.Tx, w *groupWrite) error {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT group_write`); err != nil {
		w.err = err
		return fmt.Errorf("savepoint: %w", err)
	}
	w.err = w.fn(tx)
	if w.err != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO group_write`); err != nil {
			return fmt.Errorf("roll back a failed write (%w): %w", w.err, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `RELEASE group_write`); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}
