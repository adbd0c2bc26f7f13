package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// soloLedger is the ledger of a service alone: its own term, on
// Deps.Engine, from Start to Stop. The worker that runs a task holds its
// lease and gives it back; a task sent back to the queue queues again in
// process.
type soloLedger struct {
	s *Service
}

var _ ledger = (*soloLedger)(nil)

// start sets the workers scope, runs the dispatcher and recovers what
// an earlier run left: the leases of admitted and running tasks, then,
// with River's workers started, the queued tasks in submission order, a
// page at a time, so that the head of a long queue runs while the rest
// is read. As the store's sole runner, it also takes back the jobs that
// run left running, before the workers start.
func (sl *soloLedger) start(ctx context.Context, workers func(context.Context) error) error {
	s := sl.s
	tm := s.term
	if err := s.setWorkersScope(ctx, tm); err != nil {
		return err
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	tm.startDispatch()
	began := s.clock.Now()
	restored, err := tm.recoverActive(ctx)
	if err != nil {
		return fmt.Errorf("recover tasks: %w", err)
	}
	if s.cfg.SoleRunner {
		n, err := s.reclaim(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			s.logger.Info("jobs left running by the last run reclaimed", "jobs", n)
		}
	}
	if err := workers(ctx); err != nil {
		return err
	}
	queued, err := tm.recoverQueued(ctx, recoverPage)
	if err != nil {
		return fmt.Errorf("recover tasks: %w", err)
	}
	s.logger.Info("tasks recovered", "active", restored, "queued", queued,
		"took_ms", float64(s.clock.Now().Sub(began).Microseconds())/1000)
	return nil
}

// stop ends the term, tm, and waits for its dispatcher.
func (sl *soloLedger) stop(tm *term) {
	tm.end()
	tm.wait()
}

// submit queues t at once; a task that cannot queue ends.
func (sl *soloLedger) submit(ctx context.Context, t *weir.Task, req admission.Request) error {
	s := sl.s
	if err := s.enqueueRequest(context.WithoutCancel(ctx), req); err != nil {
		s.failQueued(ctx, t.ID, err)
		// The caller gets the task as it ended; a failed read leaves it
		// as it was stored rather than zeroed.
		if ended, gerr := s.store.TaskGet(context.WithoutCancel(ctx), t.ID); gerr == nil {
			*t = ended
		} else {
			s.logger.Error("task read failed", "task", t.ID, "error", gerr)
		}
		return err
	}
	return nil
}

// hold renews the task's lease, or restores it if this process does not
// hold it (it restarted, or the lease expired while nobody renewed it).
func (sl *soloLedger) hold(ctx context.Context, t weir.Task) error {
	tm := sl.s.term
	if l, ok := tm.lease(t.ID); ok {
		if _, err := tm.engine.Renew(ctx, l.ID, l.Owner); err == nil {
			return nil
		} else if !errors.Is(err, admission.ErrLeaseNotHeld) {
			return err
		}
	}
	l, err := tm.restore(ctx, t)
	if err != nil {
		return err
	}
	tm.setLease(t.ID, l)
	return nil
}

// done gives the task's lease back, once, and queues a task sent back
// again: at once on the candidates left, or after the wait.
func (sl *soloLedger) done(ctx context.Context, id string, back *sentBack) {
	s := sl.s
	var wait func(time.Duration)
	if back != nil && len(back.others) == 0 {
		// The wait is recorded before the lease goes: a recovery reading
		// the queue meanwhile finds the task with one or the other
		// (decideLocked), never neither, and does not queue it early.
		// It starts once the lease is back: a wait that ran out first (a
		// stalled goroutine, a clock moved at once) would queue the task
		// while it still held its capacity, and the release would give
		// that capacity back to it, before the waiters behind.
		wait = s.enqueueLater(id)
	}
	if l, ok := s.term.take(id); ok && back != nil {
		// Sent back: its upstream refused it, and charged nothing.
		s.term.releaseUnspent(context.Background(), l)
	} else if ok {
		s.dropped("release", s.term.engine.Release(context.Background(), l.ID, l.Owner))
	}
	switch {
	case back == nil:
	case wait != nil:
		wait(back.after)
	default:
		req := back.req
		req.Candidates = back.others
		if err := s.enqueueRequest(ctx, req); err != nil {
			s.requeueFailed(ctx, id, err, s.enqueueAfter)
		}
	}
}

// cancel takes a queued task out of the engine first; a task the store
// would not cancel queues again.
func (sl *soloLedger) cancel(ctx context.Context, t weir.Task, msg string) (weir.Task, error) {
	s, id := sl.s, t.ID
	if t.Status == weir.TaskQueued {
		s.dropped("cancel", s.engine.Cancel(ctx, id))
	}
	ok, err := s.finish(ctx, t, []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning},
		weir.TaskUpdate{Status: weir.TaskCancelled, ErrorCode: "cancelled", ErrorMessage: msg})
	if err != nil {
		// Not cancelled after all: a queued task that left the engine
		// waits again.
		if t.Status == weir.TaskQueued {
			if qerr := s.enqueue(ctx, t); qerr != nil && !errors.Is(qerr, admission.ErrDuplicate) {
				s.logger.Error("a task whose cancel failed could not queue again", "task", id, "error", qerr)
			}
		}
		return t, fmt.Errorf("cancel task %s: %w", id, err)
	}
	if ok {
		s.releaseLease(id)
		s.cancelUpstream(ctx, t)
	}
	return s.Get(ctx, id)
}

// passing: alone, a task that cannot queue ends.
func (sl *soloLedger) passing(error) bool { return false }
