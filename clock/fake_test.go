package clock

import (
	"slices"
	"testing"
	"time"
)

func TestFakeRunsTimersInDueOrder(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	var got []string
	c.AfterFunc(3*time.Second, func() { got = append(got, "c") })
	c.AfterFunc(time.Second, func() {
		got = append(got, "a")
		// A timer set by a timer, due within the same move, runs too.
		c.AfterFunc(time.Second, func() { got = append(got, "b") })
	})
	stopped := c.AfterFunc(2500*time.Millisecond, func() { got = append(got, "never") })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	c.Advance(2 * time.Second)
	if want := []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("after 2s ran %v, want %v", got, want)
	}
	if now := c.Now(); !now.Equal(time.Unix(2, 0)) {
		t.Fatalf("Now = %v, want 2s past start", now)
	}
	c.Advance(time.Second)
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("after 3s ran %v, want %v", got, want)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers left", c.Pending())
	}
}

func TestFakeTimerSeesItsDueTime(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	var at time.Time
	c.AfterFunc(time.Second, func() { at = c.Now() })
	c.Advance(time.Hour)
	if !at.Equal(time.Unix(1, 0)) {
		t.Fatalf("timer ran at %v, want at its due time", at)
	}
}

// TestAfter: After's channel closes once its time has passed on the
// clock, not before, and a stopped one never closes.
func TestAfter(t *testing.T) {
	t.Parallel()
	c := NewFake(time.Unix(0, 0))
	ch, _ := After(c, time.Second)
	stopped, timer := After(c, time.Second)
	timer.Stop()
	c.Advance(999 * time.Millisecond)
	select {
	case <-ch:
		t.Fatal("closed before its time")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case <-ch:
	default:
		t.Fatal("not closed at its time")
	}
	select {
	case <-stopped:
		t.Fatal("a stopped After closed")
	default:
	}
}
