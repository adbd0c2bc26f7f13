package riverjob_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/riverjob"
)

// fakeRunner records its starts and stops as events; a stop waits for
// release while hold is set, so that a test can act in the middle of it.
type fakeRunner struct {
	events chan string
	hold   atomic.Bool
	// stopping gets a token when a held stop has begun; release lets it end.
	stopping, release chan struct{}

	mu      sync.Mutex
	running bool
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{events: make(chan string, 16), stopping: make(chan struct{}, 1), release: make(chan struct{})}
}

func (r *fakeRunner) Start(context.Context) error {
	r.mu.Lock()
	r.running = true
	r.mu.Unlock()
	r.events <- "start"
	return nil
}

func (r *fakeRunner) Stop(context.Context) error {
	if r.hold.Load() {
		r.stopping <- struct{}{}
		<-r.release
	}
	r.mu.Lock()
	r.running = false
	r.mu.Unlock()
	r.events <- "stop"
	return nil
}

func (r *fakeRunner) next(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-r.events:
		if got != want {
			t.Fatalf("runner: %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("runner: no %s", want)
	}
}

// none checks that nothing happened to the runner, after the loop has
// had its turn: a start or a stop is sent before the loop waits again,
// and the test's own Wake or Advance come after.
func (r *fakeRunner) none(t *testing.T) {
	t.Helper()
	select {
	case got := <-r.events:
		t.Fatalf("runner: %s, want nothing", got)
	default:
	}
}

type sleepBundle struct {
	s       *riverjob.Sleeper
	r       *fakeRunner
	clock   *clock.Fake
	pending atomic.Bool
	// checked gets a token at each look at the database.
	checked chan struct{}
}

func setupSleeper(t *testing.T, maxSleep time.Duration) *sleepBundle {
	t.Helper()
	b := &sleepBundle{r: newFakeRunner(), clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), checked: make(chan struct{}, 16)}
	s, err := riverjob.NewSleeper(riverjob.SleeperConfig{
		Runner: b.r,
		Pending: func(context.Context) (bool, error) {
			defer func() { b.checked <- struct{}{} }()
			return b.pending.Load(), nil
		},
		Clock: b.clock, After: 5 * time.Second, MaxSleep: maxSleep,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.s = s
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.r.next(t, "start")
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return b
}

func (b *sleepBundle) waitChecked(t *testing.T) {
	t.Helper()
	select {
	case <-b.checked:
	case <-time.After(10 * time.Second):
		t.Fatal("no check of the database")
	}
}

// With no job in the database and none inserted, the client stops after
// After, and the next Wake starts it again.
func TestSleeperSleepsAndWakes(t *testing.T) {
	t.Parallel()
	b := setupSleeper(t, 0)
	b.clock.Advance(5 * time.Second)
	b.waitChecked(t)
	b.r.next(t, "stop")
	if !b.s.Asleep() {
		t.Fatal("the client stopped but the sleeper is not asleep")
	}
	b.s.Wake()
	b.r.next(t, "start")
	if b.s.Asleep() {
		t.Error("asleep after a wake started the client")
	}
	// Awake again: it sleeps again After later.
	b.clock.Advance(5 * time.Second)
	b.waitChecked(t)
	b.r.next(t, "stop")
}

// A client with jobs in the database keeps running, and is checked again
// each After; a Wake since the last check keeps it running without a
// look at the database.
func TestSleeperKeepsRunningWithWork(t *testing.T) {
	t.Parallel()
	b := setupSleeper(t, 0)
	b.pending.Store(true)
	b.clock.Advance(5 * time.Second)
	b.waitChecked(t)
	b.s.Wake()
	b.pending.Store(false)
	// The loop rearms after its check; wait for that timer before moving.
	waitTimers(t, b.clock, 1)
	b.clock.Advance(5 * time.Second)
	// The wake since the last check: no look, no stop, a new check armed.
	waitTimers(t, b.clock, 1)
	b.r.none(t)
	select {
	case <-b.checked:
		t.Fatal("the database was read though a job was inserted since the last check")
	default:
	}
	b.clock.Advance(5 * time.Second)
	b.waitChecked(t)
	b.r.next(t, "stop")
}

// A Wake that comes while the client stops is not lost: the job it
// announces was inserted after the check found none, so the client
// starts again once it has stopped.
func TestSleeperWakeWhileStopping(t *testing.T) {
	t.Parallel()
	b := setupSleeper(t, 0)
	b.r.hold.Store(true)
	b.clock.Advance(5 * time.Second)
	<-b.r.stopping
	b.s.Wake()
	b.r.hold.Store(false)
	close(b.r.release)
	b.r.next(t, "stop")
	b.r.next(t, "start")
	if b.s.Asleep() {
		t.Error("asleep after a wake during the stop")
	}
}

// A job that lands with no Wake while the client stops (River's
// periodic job, inserted at its start) is found by a second look once it
// has stopped: the client starts again.
func TestSleeperJobInsertedWhileStopping(t *testing.T) {
	t.Parallel()
	b := setupSleeper(t, 0)
	b.r.hold.Store(true)
	b.clock.Advance(5 * time.Second)
	<-b.r.stopping
	b.pending.Store(true)
	b.r.hold.Store(false)
	close(b.r.release)
	b.r.next(t, "stop")
	b.r.next(t, "start")
}

// A sleeping client starts again after MaxSleep, so that River's
// periodic jobs run.
func TestSleeperMaxSleep(t *testing.T) {
	t.Parallel()
	b := setupSleeper(t, time.Hour)
	b.clock.Advance(5 * time.Second)
	b.waitChecked(t)
	b.r.next(t, "stop")
	waitTimers(t, b.clock, 1)
	b.clock.Advance(time.Hour)
	b.r.next(t, "start")
}

// Stop stops a running client once, and a sleeping one not at all.
func TestSleeperStop(t *testing.T) {
	t.Parallel()
	b := setupSleeper(t, 0)
	if err := b.s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.r.next(t, "stop")
	if err := b.s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.r.none(t)

	b = setupSleeper(t, 0)
	b.clock.Advance(5 * time.Second)
	b.waitChecked(t)
	b.r.next(t, "stop")
	if err := b.s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.s.Wake()
	b.r.none(t)
}

// waitTimers waits until c has n timers pending: the loop has armed its
// next one.
func waitTimers(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers pending, want %d", c.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
