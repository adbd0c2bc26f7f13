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
