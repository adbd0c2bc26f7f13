package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a Clock for tests. Time stands still until Advance or Set moves it;
// timers that fall due are run, in due order, by the goroutine that moved the
// clock, before that call returns. A timer function may itself schedule new
// timers; those due within the same move run too.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
	reads  int // calls of Now
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

// Reads is how many times Now has been called: for tests that bound
// how often code reads the time.
func (c *Fake) Reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// AfterFunc schedules f to run when the clock has moved d past now. A d of
// zero or less runs f at the next Advance, even Advance(0).
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{clock: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock forward by d, running every timer that falls due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// AdvanceUntil moves the clock by step every few milliseconds of real
// time, up to limit in all, until done is closed, and reports whether it
// was within the real time given. It is for a test whose timer starts
// when a wait it cannot see from outside begins: time is moved on until
// the effect shows.
func (c *Fake) AdvanceUntil(done <-chan struct{}, step, limit, within time.Duration) bool {
	deadline := time.After(within)
	var moved time.Duration
	for {
		select {
		case <-done:
			return true
		case <-deadline:
			return false
		case <-time.After(5 * time.Millisecond):
			// done may have come while waiting: a step after it would
			// run timers the test means to stay in the future.
			select {
			case <-done:
				return true
			default:
			}
			if moved < limit {
				c.Advance(step)
				moved += step
			}
		}
	}
}

// Set moves the clock to t (never backwards), running every timer that falls due.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		next := c.nextDueLocked(t)
		if next == nil {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.removeLocked(next)
		c.mu.Unlock()
		next.f()
	}
}

// Pending reports how many timers are scheduled and not yet run or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextDue returns when the earliest pending timer falls due.
func (c *Fake) NextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	c.sortLocked()
	return c.timers[0].at, true
}

func (c *Fake) sortLocked() {
	sort.Slice(c.timers, func(i, j int) bool {
		a, b := c.timers[i], c.timers[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.seq < b.seq
	})
}

func (c *Fake) nextDueLocked(limit time.Time) *fakeTimer {
	if len(c.timers) == 0 {
		return nil
	}
	c.sortLocked()
	if c.timers[0].at.After(limit) {
		return nil
	}
	return c.timers[0]
}

func (c *Fake) removeLocked(t *fakeTimer) bool {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}
