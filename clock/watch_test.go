package clock

import (
	"testing"
	"time"
)

// TestWatchFiresOnAWaitThatLasts: f runs once a wait has lasted d from
// its own start, however often earlier waits were armed, never for a wait
// that ended, and once at most.
func TestWatchFiresOnAWaitThatLasts(t *testing.T) {
	c := NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	fired := 0
	w := NewWatch(c, 10*time.Second, func() { fired++ })

	w.Arm()
	c.Advance(9 * time.Second)
	w.Disarm()
	c.Advance(time.Hour) // a disarmed wait never fires
	if fired != 0 {
		t.Fatalf("fired %d times for a wait of 9s ended before 10s", fired)
	}

	w.Arm()
	c.Advance(6 * time.Second)
	w.Disarm()
	w.Arm() // a new wait: its 10s count from here
	c.Advance(9 * time.Second)
	if fired != 0 {
		t.Fatalf("fired %d times 9s into a wait of 10s", fired)
	}
	c.Advance(time.Second)
	if fired != 1 {
		t.Fatalf("fired %d times 10s into a wait of 10s, want 1", fired)
	}
	w.Arm()
	c.Advance(time.Hour)
	if fired != 1 {
		t.Fatalf("fired %d times, want once at most", fired)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the watch fired", n)
	}
}

// TestWatchKeepsOneTimer: re-armed for every piece of a long stream, a
// Watch has one timer pending, not one an arm.
func TestWatchKeepsOneTimer(t *testing.T) {
	c := NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	w := NewWatch(c, time.Minute, func() { t.Error("fired on a stream that kept moving") })
	for range 1000 {
		w.Arm()
		c.Advance(100 * time.Millisecond)
		w.Disarm()
		if n := c.Pending(); n > 1 {
			t.Fatalf("%d timers pending, want 1 at most", n)
		}
	}
	w.Stop()
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d timers pending after Stop", n)
	}
	w.Arm()
	c.Advance(time.Hour)
}

// TestWatchStopped: a stopped Watch never fires; d ≤ 0 never either.
func TestWatchStopped(t *testing.T) {
	c := NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	w := NewWatch(c, time.Second, func() { t.Error("a stopped watch fired") })
	w.Arm()
	w.Stop()
	c.Advance(time.Hour)
	never := NewWatch(c, 0, func() { t.Error("a watch of 0 fired") })
	never.Arm()
	c.Advance(time.Hour)
	if n := c.Pending(); n != 0 {
		t.Fatalf("%d timers pending", n)
	}
}
