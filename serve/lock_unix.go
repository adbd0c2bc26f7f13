//go:build unix

package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockStorage takes an exclusive lock on path+".lock" for as long as the
// process runs serve: the embedded store is one process's alone (its
// engine holds the capacities, and at start it reclaims every job left
// running), so a second `weir serve` on the same database must not start.
// Other commands (keys, tasks) read and write the database beside it
// without the lock. The kernel drops the lock when the process dies, even
// by kill -9, but a killed process may take a moment to exit: while the
// lock is held, lockStorage tries again every o.Every for up to o.Wait,
// saying once that it waits, before it gives up. A ":memory:" or empty
// path takes no lock.
func lockStorage(ctx context.Context, o lockOptions) (release func(), err error) {
	path := o.Path
	if path == "" || path == ":memory:" {
		return func() {}, nil
	}
	o.defaults()
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock storage: %w", err)
	}
	deadline := o.Clock.Now().Add(o.Wait)
	for logged := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock storage %s: %w", lock, err)
		}
		if !o.Clock.Now().Before(deadline) {
			f.Close()
			return nil, fmt.Errorf("storage %s is in use by another weir serve (%s is locked)", path, lock)
		}
		retry := make(chan struct{})
		t := o.Clock.AfterFunc(o.Every, func() { close(retry) })
		if !logged {
			o.Logger.Info("storage is locked by another weir serve; waiting for it to exit", "lock", lock, "wait", o.Wait.String())
			logged = true
		}
		select {
		case <-retry:
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("lock storage %s: %w", lock, ctx.Err())
		}
	}
}
