package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/weir-gateway/weir/clock"
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
// committed: no timer is set until a commit sets one.
//
// The write connection keeps an automatic checkpoint, at far more pages,
// as a safety net should the checkpointer fall behind.

const (
	// checkpointGap is the shortest time between the starts of two
	// checkpoints.
	checkpointGap = 250 * time.Millisecond
	// writeAutoCheckpoint is the write connection's wal_autocheckpoint,
	// in pages (SQLite's default is 1,000).
	writeAutoCheckpoint = 10_000
)

// checkpointer runs the WAL's checkpoints after commits (committed), each
// from a timer of its clock.
type checkpointer struct {
	conn  *sql.DB
	clock clock.Clock
	// runs counts the checkpoints that are running, for close.
	runs sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	mu sync.Mutex
	// commits is how many commits there were since the last checkpoint
	// began.
	commits int
	// last is when the last checkpoint began (when the checkpointer
	// started, before the first).
	last time.Time
	// timer is the next checkpoint's, or nil; gen tells its call from an
	// earlier timer's that was stopped too late.
	timer   clock.Timer
	gen     uint64
	running bool
	closed  bool
	// ended is closed when the next checkpoint ends; ran is the last
	// one's error and count how many ran, for tests.
	ended chan struct{}
	ran   error
	count int
}

// newCheckpointer opens the checkpointer's connection to the file at
// path.
func newCheckpointer(path, timeout string, clk clock.Clock) (*checkpointer, error) {
	conn, err := sql.Open("sqlite", path+"?"+url.Values{
		"_busy_timeout": {timeout},
		"_synchronous":  {"NORMAL"},
	}.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s for checkpoints: %w", path, err)
	}
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	return &checkpointer{conn: conn, clock: clk, last: clk.Now(), ended: make(chan struct{})}, nil
}

// committed is the write connection's commit hook: it sets the next
// checkpoint's timer if none is set. It runs inside SQLite's commit,
// before the commit is in the WAL, so it only counts and sets a timer.
func (c *checkpointer) committed() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	if !c.closed && !c.running && c.timer == nil {
		c.scheduleLocked(c.clock.Now())
	}
	return 0 // let the commit go on
}

// scheduleLocked sets the timer for a checkpoint a gap after the last
// one began, or now if that has passed.
func (c *checkpointer) scheduleLocked(now time.Time) {
	c.gen++
	gen := c.gen
	c.timer = c.clock.AfterFunc(c.last.Add(checkpointGap).Sub(now), func() { c.checkpoint(gen) })
}

// checkpoint runs a checkpoint, unless the checkpointer was closed or
// this call's timer replaced; it sets the next one's timer if there
// were commits meanwhile.
func (c *checkpointer) checkpoint(gen uint64) {
	c.mu.Lock()
	if c.closed || gen != c.gen || c.running {
		c.mu.Unlock()
		return
	}
	c.timer, c.running = nil, true
	c.commits = 0
	c.last = c.clock.Now()
	c.runs.Add(1)
	c.mu.Unlock()
	defer c.runs.Done()

	// PASSIVE copies what no reader still needs and waits for no one;
	// what it leaves, the next one copies.
	_, err := c.conn.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	c.ran = err
	c.count++
	close(c.ended)
	c.ended = make(chan struct{})
	if !c.closed && c.commits > 0 {
		c.scheduleLocked(c.clock.Now())
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

// close stops the checkpointer, waits for a checkpoint running, and
// closes its connection; closing it again returns the first close's
// result, as sql.DB's Close does.
func (c *checkpointer) close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
		c.mu.Unlock()
		c.runs.Wait()
		c.closeErr = c.conn.Close()
	})
	return c.closeErr
}

// commitHooker is modernc's connection, which takes a commit hook.
type commitHooker interface {
	RegisterCommitHook(sqlite.CommitHookFn)
}
