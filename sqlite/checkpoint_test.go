package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// The WAL's checkpoints run on the checkpointer's connection, after
// commits: the write connection's own automatic checkpoint is only a
// safety net far past SQLite's 1,000 pages, and writes of a few hundred
// pages reach the database file without it.
func TestCheckpointsRunOffTheWriteConnection(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weir.db")
	db, err := Open(t.Context(), path)
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
	for want := before + 250*4096; size() < want; {
		select {
		case <-db.checkpoints.next():
			if err := db.checkpoints.lastErr(); err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the database file is %d bytes 10s after the writes, want at least %d: no checkpoint ran", size(), want)
		}
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
