package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync"
	"time"

	"modernc.org/sqlite"
)

// Checkpoints: SQLite copies the WAL's pages back into the database file,
// and syncs both files, in a checkpoint. By itself it runs one in the
// commit that takes the WAL past wal_autocheckpoint pages, on the
// committing connection: here the one write connection, which every
// writer (the task service's commits, River's fetches and completions)
// then waits for while the pages are copied and the files synced. A
// checkpointer runs them
// on a connection of its own instead: SQLite lets a checkpoint run
// beside the writer, which only appends to the WAL. It runs one after
// commits, at most one every checkpointGap, and sleeps while nothing is
// committed.
//
// The write connection keeps an automatic checkpoint, at far more pages,
// as a safety net should the checkpointer fall behind.

const (
	// checkpointGap is the shortest time between two checkpoints: the
	// checkpointer runs one a gap after the last, if anything was
	// committed since.
	checkpointGap = 250 * time.Millisecond
	// writeAutoCheckpoint is the write connection's wal_autocheckpoint,
	// in pages (SQLite's default is 1,000).
	writeAutoCheckpoint = 10_000
)

// checkpointer runs the WAL's checkpoints after commits (committed).
type checkpointer struct {
	conn *sql.DB
	// due holds a token when something was committed since the last
	// checkpoint began.
	due  chan struct{}
	stop chan struct{}
	done chan struct{}

	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex
	// ended is closed when the next checkpoint ends, and ran is the last
	// one's error, for tests.
	ended chan struct{}
	ran   error
}

// newCheckpointer opens the checkpointer's connection to the file at
// path and starts it.
func newCheckpointer(path, timeout string) (*checkpointer, error) {
	conn, err := sql.Open("sqlite", path+"?"+url.Values{
		"_busy_timeout": {timeout},
		"_synchronous":  {"NORMAL"},
	}.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s for checkpoints: %w", path, err)
	}
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	c := &checkpointer{conn: conn, due: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		ended: make(chan struct{})}
	go c.run()
	return c, nil
}

// committed is the write connection's commit hook: it marks a
// checkpoint due. It runs inside SQLite's commit, so it only sends.
func (c *checkpointer) committed() int32 {
	select {
	case c.due <- struct{}{}:
	default:
	}
	return 0 // let the commit go on
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.due:
		case <-c.stop:
			return
		}
		// PASSIVE copies what no reader still needs and waits for no
		// one; what it leaves, the next one copies.
		_, err := c.conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		c.mu.Lock()
		c.ran = err
		close(c.ended)
		c.ended = make(chan struct{})
		c.mu.Unlock()
		gap := time.NewTimer(checkpointGap)
		select {
		case <-gap.C:
		case <-c.stop:
			gap.Stop()
			return
		}
	}
}

// next returns a channel closed when the next checkpoint ends.
func (c *checkpointer) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// lastErr is the last checkpoint's error.
func (c *checkpointer) lastErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ran
}

// close stops the checkpointer and closes its connection; closing it
// again returns the first close's result, as sql.DB's Close does.
func (c *checkpointer) close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.closeErr = c.conn.Close()
	})
	return c.closeErr
}

// commitHooker is modernc's connection, which takes a commit hook.
type commitHooker interface {
	RegisterCommitHook(sqlite.CommitHookFn)
}
