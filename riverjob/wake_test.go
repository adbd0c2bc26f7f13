package riverjob_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/riverjob"
)

// WakeAt sends River's insert notice for each queue when its time comes,
// once for wakes of a queue due together, and nothing after Stop.
func TestWakerWakesWhenDue(t *testing.T) {
	t.Parallel()
	_, d := openPool(t)
	l := listen(t, d, "river_insert")
	c := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := riverjob.NewWaker(d, c, nil)
	t.Cleanup(w.Stop)
	now := c.Now()
	w.WakeAt("b", now.Add(2*time.Second))
	w.WakeAt("a", now.Add(time.Second))
	w.WakeAt("a", now.Add(time.Second))
	w.WakeAt("c", now.Add(time.Hour))
	if n := c.Pending(); n != 1 {
		t.Errorf("%d timers pending, want one for the earliest wake", n)
	}
	c.Advance(time.Second)
	want := `{"queue": "a"}`
	if n, err := l.WaitForNotification(t.Context()); err != nil || n.Payload != want {
		t.Fatalf("first notice %+v, %v; want %s", n, err, want)
	}
	c.Advance(time.Second)
	want = `{"queue": "b"}`
	if n, err := l.WaitForNotification(t.Context()); err != nil || n.Payload != want {
		t.Fatalf("second notice %+v, %v; want %s (a's second wake was due with its first)", n, err, want)
	}
	if n := w.Pending(); n != 1 {
		t.Errorf("%d wakes pending, want c's", n)
	}
	w.Stop()
	c.Advance(time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n, err := l.WaitForNotification(ctx); err == nil {
		t.Errorf("a notice after Stop: %+v", n)
	}
}
