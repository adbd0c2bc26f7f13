package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

// The WAL's checkpoints run on the checkpointer's connection, after
// commits: the write connection's own automatic checkpoint is only a
// safety net far past SQLite's 1,000 pages, and writes of a few hundred
// pages reach the database file without it.
func TestCheckpointsRunOffTheWriteConnection(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weir.db")
	clk := clock.NewFake(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	db, err := open(t.Context(), path, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var pages int
	if err := db.write.QueryRowContext(t.Context(), `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil || pages != writeAutoCheckpoint {
		t.Fatalf("the write connection's wal_autocheckpoint: %d %v, want %d", pages, err, writeAutoCheckpoint)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	// About 300 pages of tasks, each its own commit.
	input := []byte(`{"prompt":"` + strings.Repeat("p", 4000) + `"}`)
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	if err := db.KeyCreate(t.Context(), weir.APIKey{ID: "key_1", Hash: "h1", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		tk := weir.Task{ID: "task_" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), KeyID: "key_1", Kind: "video", Model: "sora",
			Input: input, Status: weir.TaskQueued, Candidate: -1, CreatedAt: at}
		if _, err := db.TaskCreate(t.Context(), &tk); err != nil {
			t.Fatal(err)
		}
	}
	// The database file takes the pages once a checkpoint has run after
	// the last commit.
	clk.Advance(checkpointWait)
	if err := db.checkpoints.ran; err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if want := before + 250*4096; size() < want {
		t.Fatalf("the database file is %d bytes %v after the writes, want at least %d: no checkpoint ran", size(), checkpointWait, want)
	}
}

// A store closed twice (a test's cleanup after the test's own Close)
// closes once: the second Close returns the first's result.
func TestCloseTwice(t *testing.T) {
	t.Parallel()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "weir.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("the second Close: %v", err)
	}
}

// setupCheckpoints opens a store on a file whose checkpoints run on a
// fake clock, and returns write, which commits about n pages of rows,
// and runs, the checkpoints run so far.
func setupCheckpoints(t *testing.T) (db *DB, clk *clock.Fake, write func(n int), runs func() int) {
	t.Helper()
	clk = clock.NewFake(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	db, err := open(t.Context(), filepath.Join(t.TempDir(), "weir.db"), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.write.ExecContext(t.Context(), `CREATE TABLE filler (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	write = func(n int) {
		t.Helper()
		if _, err := db.write.ExecContext(t.Context(), `WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < ?)
			INSERT INTO filler SELECT zeroblob(3000) FROM r`, n); err != nil {
			t.Fatal(err)
		}
	}
	runs = func() int {
		db.checkpoints.mu.Lock()
		defer db.checkpoints.mu.Unlock()
		if db.checkpoints.ran != nil {
			t.Fatalf("checkpoint: %v", db.checkpoints.ran)
		}
		return db.checkpoints.count
	}
	return db, clk, write, runs
}

// walLeft is what the WAL held that the database file did not, in
// frames, when the last checkpoint ended, or -1 if there were commits
// since that checkpoint began.
func walLeft(db *DB) int {
	c := db.checkpoints
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.commits > 0 || c.running {
		return -1
	}
	return c.log - c.done
}

// A WAL that grows by a few pages a gap is not checkpointed every gap:
// each checkpoint syncs both files, which a larger WAL pays for once.
// Its pages still reach the database file within checkpointWait.
func TestCheckpointsWaitForALightWAL(t *testing.T) {
	t.Parallel()
	db, clk, write, runs := setupCheckpoints(t)
	clk.Advance(checkpointWait) // the schema's commits
	before := runs()
	for range 20 {
		write(2)
		clk.Advance(checkpointGap)
	}
	if n := runs() - before; n > 1 {
		t.Errorf("%d checkpoints in 20 gaps of 2 pages each, want at most 1", n)
	}
	clk.Advance(checkpointWait)
	if left := walLeft(db); left != 0 {
		t.Errorf("the WAL holds %d frames not checkpointed %v after the last commit, want 0", left, checkpointWait)
	}
}

// A WAL that grows by more than checkpointFrames a gap, in many small
// commits, is checkpointed every gap once a checkpoint has seen it grow.
func TestCheckpointsKeepUpWithAHeavyWAL(t *testing.T) {
	t.Parallel()
	_, clk, write, runs := setupCheckpoints(t)
	clk.Advance(checkpointWait) // the schema's commits
	for i := range 6 {
		before := runs()
		for range 10 {
			for range 12 {
				write(10)
			}
			clk.Advance(checkpointGap / 10)
		}
		if n := runs() - before; n > 1 || n == 0 && i > 0 {
			t.Fatalf("gap %d: %d checkpoints after 1,200 pages, want 1", i, n)
		}
	}
}

// An idle store sets no timer: once the last commits are checkpointed,
// nothing wakes the checkpointer until the next commit.
func TestCheckpointsSleepWhileIdle(t *testing.T) {
	t.Parallel()
	db, clk, write, runs := setupCheckpoints(t)
	write(2)
	clk.Advance(2 * checkpointWait)
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers set %v after the last commit, want none", n, 2*checkpointWait)
	}
	if left := walLeft(db); left != 0 {
		t.Errorf("the WAL holds %d frames not checkpointed, want 0", left)
	}
	before := runs()
	clk.Advance(time.Hour)
	if n := runs() - before; n != 0 {
		t.Errorf("%d checkpoints in an idle hour, want none", n)
	}
	write(2)
	if n := clk.Pending(); n != 1 {
		t.Errorf("%d timers set after a commit, want 1", n)
	}
}

// A checkpoint's report sets the next one's estimates from the frames
// added since the last report: the whole WAL if it started over (a new
// round), else what it grew by.
func TestCheckpointEstimates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		log        int
		round      uint32
		wantWait   time.Duration
		wantFullAt int
	}{
		{"started over", 500, 2, 500 * time.Millisecond, 5},
		{"grew on", 1500, 1, 500 * time.Millisecond, 5},
		{"grew fast", 8000, 2, checkpointGap, 1},
		{"grew slowly", 25, 2, checkpointWait, 100},
		{"did not grow", 1000, 1, time.Minute, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &checkpointer{log: 1000, done: 1000, round: 1, wait: time.Minute, fullAt: 7}
			// 10 commits in the second since the last checkpoint.
			c.estimateLocked(10, time.Second, tc.log, tc.log, tc.round)
			if c.wait != tc.wantWait || c.fullAt != tc.wantFullAt {
				t.Errorf("wait %v, due after %d commits; want %v, %d", c.wait, c.fullAt, tc.wantWait, tc.wantFullAt)
			}
		})
	}
}
