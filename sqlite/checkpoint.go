package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
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
// checkpointer runs them on a connection of its own instead: SQLite lets
// a checkpoint run beside the writer, which only appends to the WAL.
//
// A checkpoint's syncs cost the same for a few pages as for a thousand,
// so the checkpointer waits for the WAL to hold about checkpointFrames
// new frames, as SQLite's own automatic checkpoint does, but no longer
// than checkpointWait after a commit, and runs at most one every
// checkpointGap. It cannot see the WAL grow (the commit hook runs before
// the commit is written), so it estimates: each checkpoint reports how
// many frames the WAL held, and from the frames added since the last one
// it sets the next one's time (at the rate they came) and the number of
// commits that would add checkpointFrames (at the frames a commit added);
// whichever comes first. A checkpoint that followed commits sets the
// next one's timer even if nothing more is committed, so that a commit
// the checkpoint ran too early to see is copied; one that followed none
// sets no timer, and the checkpointer sleeps until the next commit.
//
// The write connection keeps an automatic checkpoint, at far more pages,
// as a safety net should the checkpointer fall behind: should commits
// grow far larger than the last ones at once, the WAL can reach it before
// the estimates catch up. It also bounds the WAL's file: the WAL starts
// over at its first frame only when a writer finds it all copied and no
// reader in it, which a checkpoint beside the writer leaves to chance (a
// commit made while it copies spoils it); the write connection's own
// checkpoint, after its commit, leaves it to the readers alone.

const (
	// checkpointGap is the shortest time between the starts of two
	// checkpoints.
	checkpointGap = 250 * time.Millisecond
	// checkpointWait is the longest a commit waits for a checkpoint to
	// begin (the last commits before a quiet spell included).
	checkpointWait = 5 * time.Second
	// checkpointFrames is the WAL's growth, in frames (pages), that a
	// checkpoint waits for: a quarter of SQLite's default
	// wal_autocheckpoint. A checkpoint of more frames runs longer, and
	// the longer it runs the likelier a commit made meanwhile keeps the
	// WAL from starting over (below), so that it grows on.
	checkpointFrames = 250
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
	// wait is how long after the last checkpoint began the next one is
	// due, and fullAt the commits after which it is due a gap after
	// the last: the estimates (checkpoint.go's top). Until the first
	// checkpoint, each commit is due a gap after the last.
	wait   time.Duration
	fullAt int
	// log and done are the last checkpoint's report: the frames in the
	// WAL, and those of them in the database file; round is the WAL's
	// checkpoint sequence number then (walRound).
	log, done int
	round     uint32
	// walPath is the WAL's file.
	walPath string
	// timer is the next checkpoint's, due at due, or nil; gen tells its
	// call from an earlier timer's that was stopped too late.
	timer   clock.Timer
	due     time.Time
	gen     uint64
	running bool
	closed  bool
	// ran is the last checkpoint's error and count how many ran, for
	// tests.
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
	return &checkpointer{conn: conn, clock: clk, walPath: path + "-wal", last: clk.Now(), wait: checkpointGap, fullAt: 1}, nil
}

// committed is the write connection's commit hook: it sets the next
// checkpoint's timer, or brings it forward once the commits since the
// last are estimated to fill the WAL. It runs inside SQLite's commit,
// before the commit is in the WAL, so it only counts and sets a timer.
func (c *checkpointer) committed() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	if c.closed || c.running {
		return 0 // the checkpoint running sets the timer when it ends
	}
	switch {
	case c.commits >= c.fullAt:
		c.scheduleLocked(c.last.Add(checkpointGap))
	case c.timer == nil:
		c.scheduleLocked(c.clock.Now().Add(c.wait))
	}
	return 0 // let the commit go on
}

// scheduleLocked sets the timer for a checkpoint at due, or leaves the one
// set if that is due no later.
func (c *checkpointer) scheduleLocked(due time.Time) {
	if c.timer != nil {
		if !due.Before(c.due) {
			return
		}
		c.timer.Stop()
	}
	c.gen++
	gen := c.gen
	c.timer, c.due = c.clock.AfterFunc(due.Sub(c.clock.Now()), func() { c.checkpoint(gen) }), due
}

// checkpoint runs a checkpoint, unless the checkpointer was closed or
// this call's timer replaced, and sets the next one's timer.
func (c *checkpointer) checkpoint(gen uint64) {
	c.mu.Lock()
	if c.closed || gen != c.gen || c.running {
		c.mu.Unlock()
		return
	}
	c.timer, c.running = nil, true
	commits := c.commits
	c.commits = 0
	now := c.clock.Now()
	since := now.Sub(c.last)
	c.last = now
	c.runs.Add(1)
	c.mu.Unlock()
	defer c.runs.Done()

	// PASSIVE copies what no reader still needs and waits for no one;
	// what it leaves, the next one copies.
	var busy, log, done int
	err := c.conn.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done)
	round := walRound(c.walPath)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.running = false
	c.ran = err
	c.count++
	if err == nil && log >= 0 {
		c.estimateLocked(commits, since, log, done, round)
	}
	if c.closed {
		return
	}
	// After commits, a timer even if none follows: a commit whose hook
	// ran before this checkpoint began may have reached the WAL after
	// it looked. Frames left (a reader was in them) are copied then too.
	if commits > 0 || c.commits > 0 || log > done {
		c.scheduleLocked(c.last.Add(c.wait))
	}
	if c.commits > 0 && c.commits >= c.fullAt {
		c.scheduleLocked(c.last.Add(checkpointGap))
	}
}

// estimateLocked sets wait and fullAt from a checkpoint's report (log,
// done, round), the commits before it and the time since the one before.
func (c *checkpointer) estimateLocked(commits int, since time.Duration, log, done int, round uint32) {
	// The WAL starts over at its first frame, in a new round, once a
	// checkpoint has copied it all and no reader is in it; else it grows
	// on.
	added := log
	if round == c.round && log >= c.log {
		added = log - c.log
	}
	c.log, c.done, c.round = log, done, round
	if commits == 0 || added == 0 {
		return // nothing to scale by: keep the estimates
	}
	c.wait = min(max(time.Duration(float64(since)*checkpointFrames/float64(added)), checkpointGap), checkpointWait)
	c.fullAt = max(1, checkpointFrames*commits/max(added, commits))
}

// walRound reads the checkpoint sequence number in the header of the WAL
// at path (SQLite's file format, "WAL File Format"): SQLite adds one each
// time the WAL starts over. It is 0 if the file cannot be read; the WAL
// file takes no locks, so opening and closing it here is safe.
func walRound(path string) uint32 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var hdr [16]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return 0
	}
	return binary.BigEndian.Uint32(hdr[12:])
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
