package riverjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/internal/lifecycle"
)

// Runner is what a Sleeper starts and stops: River's client, and what
// goes with each of its runs (riverjob.Follow's subscription, which
// River ends at every stop).
type Runner = lifecycle.Service

// SleeperConfig says when a Sleeper's client sleeps and wakes.
type SleeperConfig struct {
	// Runner is the client; required.
	Runner Runner
	// Pending reports whether the database holds a job the client may
	// have to work (HasJobs on the client's driver); required.
	Pending func(ctx context.Context) (bool, error)
	// Clock times the checks and the longest sleep; default clock.Real.
	Clock clock.Clock
	// After is how long the client runs without a Wake before it is
	// checked for work, and stopped if it has none; it is checked again
	// each After while it has some. Required (positive).
	After time.Duration
	// MaxSleep, if positive, starts a sleeping client again after it, so
	// that what River does periodically (its periodic jobs, run at start,
	// and its maintenance) runs at least that often. Default none.
	MaxSleep time.Duration
	// Logger hears of failed starts, stops and checks; default none.
	Logger *slog.Logger
}

// Sleeper runs a River client only while it may have work: it stops the
// client once, for After, no job was inserted (Wake) and the database
// holds no job that is not finalized (before and after the stop), and
// starts it again at the next Wake. An idle River client is not idle: its completer ticks every
// 50ms whatever it has to do, and its leader's services, notifier and
// producers each wake every few seconds; a stopped one costs nothing.
//
// It is right only where every insert of a job into the client's
// database calls Wake once it has committed, or failed: the process is
// the database's only writer of jobs (the embedded store, with the
// notices of InProcess). A job that another process inserted, or that
// the process inserted without Wake, waits for the next start (MaxSleep
// at the latest). Jobs River changes itself — snoozed, retried, left
// running — are not finalized, so the client never sleeps while one
// exists. A Wake while the client stops is not lost: the client starts
// again once it has stopped.
type Sleeper struct {
	cfg    SleeperConfig
	logger *slog.Logger
	// kick has a token when the loop should look again: a check is due,
	// a Wake came while asleep, or Stop began.
	kick chan struct{}
	done chan struct{}

	mu sync.Mutex
	// wakes counts Wake calls: a check that sees it move since it began
	// keeps the client running.
	wakes uint64
	// asleep: the client is stopped and only a Wake (or MaxSleep)
	// starts it.
	asleep bool
	// due: a check's time has come.
	due     bool
	timer   clock.Timer
	started bool
	stopped bool
	// running: the client's Start succeeded and no Stop followed.
	running bool
}

// NewSleeper returns a Sleeper on c; Start runs it.
func NewSleeper(c SleeperConfig) (*Sleeper, error) {
	if c.Runner == nil || c.Pending == nil || c.After <= 0 {
		return nil, errors.New("riverjob: a Sleeper needs a Runner, Pending and a positive After")
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Sleeper{cfg: c, logger: logger, kick: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// Start starts the client, and then stops and starts it as its work
// comes and goes until Stop. The first start is given ctx (River's
// client stops when it ends); later ones ctx without its cancel, so
// that a context that bounded only the start does not keep the client
// from starting again.
func (s *Sleeper) Start(ctx context.Context) error {
	if err := s.cfg.Runner.Start(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.started, s.running = true, true
	s.armLocked(s.cfg.After)
	s.mu.Unlock()
	go s.loop(context.WithoutCancel(ctx))
	return nil
}

// Wake says a job may have been inserted: a sleeping client starts, a
// running one runs for After more at least.
func (s *Sleeper) Wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakes++
	if s.asleep {
		s.signal()
	}
}

// Asleep reports whether the client sleeps now.
func (s *Sleeper) Asleep() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asleep
}

// Stop stops the client, if it runs, for good.
func (s *Sleeper) Stop(ctx context.Context) error {
	s.mu.Lock()
	wait := s.started && !s.stopped
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.signal()
	s.mu.Unlock()
	if wait {
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	running := s.running
	s.running = false
	s.mu.Unlock()
	if !running {
		return nil
	}
	return s.cfg.Runner.Stop(ctx)
}

// signal gives the loop a token; s.mu is held or need not be.
func (s *Sleeper) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// armLocked sets the timer for a check, or a start, d from now.
func (s *Sleeper) armLocked(d time.Duration) {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = s.cfg.Clock.AfterFunc(d, func() {
		s.mu.Lock()
		s.due = true
		s.mu.Unlock()
		s.signal()
	})
}

// loop runs the checks and the starts, one at a time, until Stop.
func (s *Sleeper) loop(ctx context.Context) {
	defer close(s.done)
	// seen is the wake count at the last check.
	var seen uint64
	for range s.kick {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		due, asleep, wakes := s.due, s.asleep, s.wakes
		s.due = false
		s.mu.Unlock()
		switch {
		case asleep && (due || wakes != seen):
			seen = wakes
			s.wakeUp(ctx)
		case !asleep && due:
			if wakes != seen {
				seen = wakes
				s.rearm()
				continue
			}
			s.check(ctx, wakes)
		}
	}
}

// rearm sets the next check After from now, unless Stop began.
func (s *Sleeper) rearm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.armLocked(s.cfg.After)
	}
}

// check stops the client if the database holds no job to work and no
// Wake came since wakes; a Wake while it stops starts it again.
func (s *Sleeper) check(ctx context.Context, wakes uint64) {
	pending, err := s.cfg.Pending(ctx)
	if err != nil {
		s.logger.Warn("riverjob: could not tell whether jobs are pending; River's client keeps running", "error", err)
	}
	s.mu.Lock()
	if err != nil || pending || s.wakes != wakes || s.stopped {
		s.mu.Unlock()
		s.rearm()
		return
	}
	s.running = false
	s.mu.Unlock()
	if err := s.cfg.Runner.Stop(ctx); err != nil {
		s.logger.Warn("riverjob: River's client did not stop for its sleep", "error", err)
	}
	// A job River inserted itself as it stopped (its periodic jobs) came
	// with no Wake: look once more.
	pending, err = s.cfg.Pending(ctx)
	s.mu.Lock()
	s.asleep = true
	if err != nil || pending || s.wakes != wakes || s.stopped {
		// Woken while stopping (or Stop began): the loop looks again.
		s.due = s.due || err != nil || pending
		s.signal()
	} else if s.cfg.MaxSleep > 0 {
		s.armLocked(s.cfg.MaxSleep)
	}
	s.mu.Unlock()
}

// wakeUp starts the sleeping client; a failed start is tried again
// After from now.
func (s *Sleeper) wakeUp(ctx context.Context) {
	err := s.cfg.Runner.Start(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.logger.Error("riverjob: River's client did not start again; trying again", "error", err)
		if !s.stopped {
			s.armLocked(s.cfg.After)
		}
		return
	}
	s.asleep, s.running = false, true
	if !s.stopped {
		s.armLocked(s.cfg.After)
	}
}

// unfinished are the states of a job River may still work.
var unfinished = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateRunning, rivertype.JobStateRetryable,
	rivertype.JobStateScheduled, rivertype.JobStatePending,
}

// HasJobs reports whether d's database holds a job, of any queue, that
// is not finalized: one River may still work.
func HasJobs[TTx any](ctx context.Context, d riverdriver.Driver[TTx]) (bool, error) {
	exec := d.GetExecutor()
	for _, st := range unfinished {
		n, err := exec.JobCountByState(ctx, &riverdriver.JobCountByStateParams{State: st})
		if err != nil {
			return false, fmt.Errorf("count %s jobs: %w", st, err)
		}
		if n > 0 {
			return true, nil
		}
	}
	return false, nil
}
