//go:build unix

package main

import (
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
// by kill -9. A ":memory:" or empty path takes no lock.
func lockStorage(path string) (release func(), err error) {
	if path == "" || path == ":memory:" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock storage: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("storage %s is in use by another weir serve (%s is locked)", path, path+".lock")
		}
		return nil, fmt.Errorf("lock storage %s: %w", path+".lock", err)
	}
	return func() { f.Close() }, nil
}
