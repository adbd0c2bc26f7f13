package clock

import (
	"sync"
	"time"
)

// Watch calls f once a wait it watches has lasted d: Arm starts a wait,
// Disarm ends it, and f runs at most once. A Watch armed and disarmed
// for every piece of a stream costs a reading of the clock each time, not
// a timer: it keeps at most one, which on firing looks at the wait then
// in progress and, if that began later, sleeps again for what is left.
type Watch struct {
	c Clock
	d time.Duration
	f func()

	mu    sync.Mutex
	armed bool
	since time.Time // the wait's start, while armed
	t     Timer     // pending, or nil
	over  bool      // fired or stopped
}

// NewWatch returns a disarmed Watch on c; d ≤ 0 never fires.
func NewWatch(c Clock, d time.Duration, f func()) *Watch {
	return &Watch{c: c, d: d, f: f}
}

// Arm starts a wait.
func (w *Watch) Arm() {
	if w.d <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return
	}
	w.armed, w.since = true, w.c.Now()
	if w.t == nil {
		w.t = w.c.AfterFunc(w.d, w.check)
	}
}

// Disarm ends the wait in progress.
func (w *Watch) Disarm() {
	w.mu.Lock()
	w.armed = false
	w.mu.Unlock()
}

// Stop ends the Watch: f does not run after Stop returns, unless it had
// begun.
func (w *Watch) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.over = true
	if w.t != nil {
		w.t.Stop()
		w.t = nil
	}
}

func (w *Watch) check() {
	w.mu.Lock()
	if w.over || !w.armed {
		w.t = nil
		w.mu.Unlock()
		return
	}
	if left := w.d - w.c.Now().Sub(w.since); left > 0 {
		w.t = w.c.AfterFunc(left, w.check)
		w.mu.Unlock()
		return
	}
	w.over, w.t = true, nil
	w.mu.Unlock()
	w.f()
}
