package postgres

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Shared round trips: the single-statement writes that come many at once
// while tasks drain — a task created (TaskCreate), a task's status or
// progress changed outside a transaction (TaskUpdate) — are sent
// together, many statements in one round trip on one connection of the
// pool,
// followed by one Sync: PostgreSQL runs them as one implicit transaction,
// with one commit (one WAL flush) for all of them. One statement alone
// would hold a pooled connection through its own round trip and its own
// commit's flush; hundreds a second of them kept every connection of the
// pool busy, and the dispatcher's commits of admissions waited for one.
//
// Statements queue while batches are under way (a batcher's limit of
// them); a batch's sender, on returning, hands the queue to the first
// caller waiting, which sends the next batch after letting the writers
// ready to run queue theirs (as SQLite's group commit does,
// sqlite/groupcommit.go). No goroutine of its own sends
// them, and no caller sends more than one batch besides the one holding
// its own statement. Each caller returns once the batch holding its
// statement has committed (or failed), as with a statement of its own.
//
// A statement the server refuses (a PgError) rolls back the batch's
// implicit transaction: nothing of it committed, and each of its
// statements is then sent alone, so that one failing statement fails
// alone. Any other error (the connection lost) leaves the batch's fate
// unknown, as it would a statement's of its own: each of its statements
// fails with it.

// batchMax bounds the statements one batch takes.
const batchMax = 256

// stmtBatcher sends the statements queued on it in shared round trips,
// at most limit batches at a time (at least one).
type stmtBatcher struct {
	pool  *pgxpool.Pool
	limit int
	mu    sync.Mutex
	// queue holds the statements waiting for a batch; running counts the
	// callers sending one, or told to.
	queue   []*queuedStmt
	running int
	batches int // batches sent, for tests
	// queued, if set (tests), is called with the queue's length after
	// each statement queues.
	queued func(n int)
}

// queuedStmt is one statement: sql with args; scan, if set, reads its one
// row (else it is executed, its rows discarded). err is its outcome, set
// before lead is sent false.
type queuedStmt struct {
	sql  string
	args []any
	scan func(pgx.Row) error
	err  error
	// lead is sent true when this statement's caller is to send the
	// next batch (the statement is then out of the queue), false when
	// its statement's batch has ended.
	lead chan bool
}

// exec runs sql with args in a batch shared with the statements queued
// meanwhile, and returns its error; scan, if not nil, reads its one row
// and its error is the statement's. A context done before the statement
// is queued is returned as it is and nothing runs; once queued, the
// statement runs whatever becomes of ctx (a cancel would fail the whole
// batch).
func (b *stmtBatcher) exec(ctx context.Context, sql string, args []any, scan func(pgx.Row) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := &queuedStmt{sql: sql, args: args, scan: scan, lead: make(chan bool, 1)}
	b.mu.Lock()
	lead := b.running < max(b.limit, 1)
	n := len(b.queue)
	if lead {
		b.running++
	} else {
		b.queue = append(b.queue, s)
		n++
	}
	b.mu.Unlock()
	if b.queued != nil {
		b.queued(n)
	}
	if !lead {
		lead = <-s.lead
	}
	if lead {
		b.runBatch(context.WithoutCancel(ctx), s)
	}
	return s.err
}

// runBatch sends, as self's caller, one batch of self's statement and
// the first ones queued, tells each of the others how it ended, and
// hands the queue on. It first yields the processor once, so that the
// writers already runnable queue their statements into this batch.
func (b *stmtBatcher) runBatch(ctx context.Context, self *queuedStmt) {
	runtime.Gosched()
	b.mu.Lock()
	n := min(len(b.queue), batchMax-1)
	batch := append([]*queuedStmt{self}, b.queue[:n]...)
	b.queue = b.queue[n:]
	b.batches++
	b.mu.Unlock()
	b.send(ctx, batch)
	for _, s := range batch[1:] {
		s.lead <- false
	}
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.running--
		b.mu.Unlock()
		return
	}
	next := b.queue[0]
	b.queue = b.queue[1:]
	b.mu.Unlock()
	next.lead <- true
}

// send runs batch's statements in one round trip and sets each one's err;
// when the server refused one of them, each is sent again alone.
func (b *stmtBatcher) send(ctx context.Context, batch []*queuedStmt) {
	if len(batch) == 1 {
		batch[0].err = b.sendAlone(ctx, batch[0])
		return
	}
	pb := &pgx.Batch{}
	for _, s := range batch {
		pb.Queue(s.sql, s.args...)
	}
	br := b.pool.SendBatch(ctx, pb)
	for _, s := range batch {
		s.err = s.read(br)
	}
	err := br.Close()
	refused := isServerError(err)
	for _, s := range batch {
		refused = refused || isServerError(s.err)
	}
	switch {
	case refused:
		// The implicit transaction rolled back: nothing committed.
		for _, s := range batch {
			s.err = b.sendAlone(ctx, s)
		}
	case err != nil:
		for _, s := range batch {
			if s.err == nil {
				s.err = err
			}
		}
	}
}

// read reads s's result from br.
func (s *queuedStmt) read(br pgx.BatchResults) error {
	if s.scan != nil {
		return s.scan(br.QueryRow())
	}
	_, err := br.Exec()
	return err
}

// sendAlone runs s in a round trip of its own.
func (b *stmtBatcher) sendAlone(ctx context.Context, s *queuedStmt) error {
	if s.scan != nil {
		return s.scan(b.pool.QueryRow(ctx, s.sql, s.args...))
	}
	_, err := b.pool.Exec(ctx, s.sql, s.args...)
	return err
}

// isServerError says whether err is the server's refusal of a statement,
// wrapped or not.
func isServerError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}
