package clock

import "time"

// fakeTimer is a timer of a Fake clock: f runs when the clock reaches at
// (timers due at the same time run in the order they were made, seq).
type fakeTimer struct {
	clock *Fake
	at    time.Time
	seq   uint64
	f     func()
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	return t.clock.removeLocked(t)
}
