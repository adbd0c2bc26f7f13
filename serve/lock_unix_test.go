//go:build unix

package serve

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// recordHandler sends every record's message to a channel.
type recordHandler struct{ msgs chan string }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.msgs <- r.Message
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// holdLock takes the lock another serve would hold, on its own open file
// (flock locks belong to the open file, so this process conflicts with
// itself), and returns its release.
func holdLock(t *testing.T, db string) func() {
	t.Helper()
	f, err := os.OpenFile(db+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func() { f.Close() }
}

type lockResult struct {
	release func()
	err     error
}

func startLock(t *testing.T, db string, clk clock.Clock) (<-chan lockResult, <-chan string) {
	msgs := make(chan string, 4)
	done := make(chan lockResult, 1)
	go func() {
		release, err := lockStorage(t.Context(), lockOptions{Path: db, Logger: slog.New(recordHandler{msgs}), Clock: clk})
		done <- lockResult{release, err}
	}()
	return done, msgs
}

// TestLockStorageWaits: a lock still held by a process on its way out is
// waited for, with one log line, and taken once it is free.
func TestLockStorageWaits(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "weir.db")
	release := holdLock(t, db)
	clk := clock.NewFake(time.Unix(0, 0))
	done, msgs := startLock(t, db, clk)
	if msg := <-msgs; !strings.Contains(msg, "waiting") {
		t.Fatalf("logged %q, want that it waits", msg)
	}
	release() // the timer of the next try is armed when it logs
	clk.Advance(50 * time.Millisecond)
	r := <-done
	if r.err != nil {
		t.Fatalf("lock not taken after the holder let go: %v", r.err)
	}
	r.release()
	select {
	case msg := <-msgs:
		t.Errorf("logged again: %q", msg)
	default:
	}
}

// TestLockStorageGivesUp: a lock held past the wait is the clear error.
func TestLockStorageGivesUp(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "weir.db")
	holdLock(t, db)
	clk := clock.NewFake(time.Unix(0, 0))
	done, msgs := startLock(t, db, clk)
	<-msgs
	clk.Advance(5 * time.Second)
	r := <-done
	if r.err == nil || !strings.Contains(r.err.Error(), "is in use by another weir serve") {
		t.Fatalf("err %v, want the storage in use", r.err)
	}
}
