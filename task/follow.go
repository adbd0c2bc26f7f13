package task

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// run is what this process knows of a running task between polls.
type run struct {
	// started is when the task's submit returned: its upstream job
	// started then at the latest, so an end estimated from it is the
	// earliest its progress allows (an earlier origin, such as when the
	// submit was sent, puts the estimate late by the submit's time
	// multiplied by 100/progress). After a restart, it is when the task
	// was admitted (earlier still: its estimates run late).
	started time.Time
	// next is when the next poll is due.
	next time.Time
	// misses counts the polls in a row that found the job running past
	// latest, the latest end that the first reading inside the window its
	// progress gave for its end allowed (zero outside such a window).
	misses int
	latest time.Time
	// ended is closed when the task's lease is released (it was
	// cancelled, or ended elsewhere): a wait for its next poll ends then.
	ended chan struct{}
	// told is the progress the client was last told of by a callback
	// event (task.running or task.progress), at toldAt; for a run taken
	// over from elsewhere, the stored progress when this process took it
	// (see progressEventDue).
	told   int
	toldAt time.Time
	// storedAt is when the task's progress was last stored, and
	// unstoredAt when a poll first read a progress not stored since
	// (zero if none). Each write takes the store's one writer, which the
	// task's own end and the next task's admission are waiting for, so
	// a poll stores its progress at most once per PollMin (and always
	// with an event), and not while the next poll, which reads it again
	// or sees the end, comes within PollMin of unstoredAt: a job's last
	// readings before its end are written with the end.
	storedAt, unstoredAt time.Time
	// failingSince is when polls began to fail in a row (zero while they
	// succeed), and failures how many have.
	failingSince time.Time
	failures     int
	// learns says the run began with this process's submit, so that
	// started is the job's start and the job's length can be learnt
	// (jobLengths); running is when the last poll that found the job
	// running was sent (zero if none has).
	learns  bool
	running time.Time
}

func newRun(started, next time.Time, progress int, now time.Time) *run {
	return &run{started: started, next: next, ended: make(chan struct{}), told: progress, toldAt: now}
}

// holdFor is how long one execution of a task's job may wait in process
// for its next poll; a longer wait is a River snooze. It stays well within
// River's job timeout.
func (s *Service) holdFor() time.Duration {
	return min(5*time.Second, s.jobTimeout()/4)
}

func (s *Service) jobTimeout() time.Duration {
	return min(time.Minute, s.cfg.RescueAfter/2)
}

// runOf returns this process's record of t's run, making one if it has
// none (it restarted, or another replica ran the task until now).
func (s *Service) runOf(t weir.Task) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[t.ID]
	if r == nil {
		started := t.AdmittedAt
		if started.IsZero() {
			started = s.clock.Now()
		}
		r = newRun(started, time.Time{}, t.Progress, s.clock.Now())
		s.runs[t.ID] = r
	}
	return r
}

// follow polls a running task until it ends, or until its next poll is
// further off than this execution may wait, when it snoozes the job. It
// returns what the job's Work returns. read is the notices' mark
// (noticeWatch) taken before t was read.
func (s *Service) follow(ctx context.Context, t weir.Task, target Target, job *river.Job[RunArgs], read uint64) error {
	r := s.runOf(t)
	until := s.clock.Now().Add(s.holdFor())
	for {
		now := s.clock.Now()
		if wait := r.next.Sub(now); wait > 0 {
			if r.next.After(until) {
				// The job's queue is woken when the snooze ends (or a
				// short fetch poll finds it): snooze a little short,
				// since the fetch and the step's start take a moment,
				// and wait out the rest here.
				return river.JobSnooze(max(wait-snoozeLead, time.Millisecond))
			}
			if !s.sleep(ctx, r.ended, wait) {
				return river.JobSnooze(max(r.next.Sub(s.clock.Now()), time.Millisecond))
			}
			// Cancelled (here or by another replica) while waiting? Alone,
			// only this process changes a running task, and a cancel
			// here ends the run (r.ended) once it is stored; on a fleet,
			// another replica's cancel ends it too once its notice is
			// heard. The store need not be read unless the run ended, or
			// a notice may have been missed since the last read.
			if closed(r.ended) || (s.leadership != nil && s.notices.missedSince(read)) {
				mark := s.notices.mark()
				cur, err := s.store.TaskGet(ctx, t.ID)
				if err != nil {
					return err
				}
				if cur.Status != weir.TaskRunning {
					s.releaseLease(t.ID)
					return nil
				}
				t, read = cur, mark
			}
			if err := s.holdTargetLease(ctx, t, target); err != nil {
				return err
			}
		}
		// The job's progress is timed from when the poll was sent, the
		// earliest it may have been read upstream: timed from the
		// answer, a slow answer would put the next poll late by its
		// time multiplied by 100/progress.
		sent := s.clock.Now()
		up, err := target.Adapter.Poll(ctx, t.UpstreamID)
		// A retired target is not where its platform model's new work
		// goes: its answers say nothing of that one's health.
		if ctx.Err() == nil && !target.Simulated && !target.Retired {
			s.report(t.PlatformModel, err)
		}
		if err != nil {
			now := s.clock.Now()
			if wait, ok := s.pollFailed(ctx, t, r, err, now); ok {
				r.next = now.Add(wait)
				continue
			}
			return s.upstreamFailed(ctx, t, job, err)
		}
		r.failingSince, r.failures = time.Time{}, 0
		switch up.Status {
		case provider.JobSucceeded:
			s.learnLength(t.PlatformModel, r)
			return s.finishRunning(ctx, t, weir.TaskUpdate{Status: weir.TaskSucceeded, Result: up.Raw, Progress: ptr(100)})
		case provider.JobFailed:
			code, msg := "upstream_failed", "the upstream job failed"
			if up.Error != nil {
				code, msg = up.Error.Code, up.Error.Message
			}
			if s.retryFailedJob(ctx, t, code, msg) {
				return nil
			}
			return s.finishRunning(ctx, t, weir.TaskUpdate{Status: weir.TaskFailed, ErrorCode: code, ErrorMessage: msg, Result: up.Raw})
		}
		now = s.clock.Now()
		r.running = sent
		r.next = sent.Add(s.nextPoll(r, up.Progress, sent))
		ev := progressEvent(t, r, up.Progress, now)
		if s.progressDue(r, t.Progress, up.Progress, now, until) || ev != nil {
			p := up.Progress
			ok, err := s.updateWithEvent(ctx, t, weir.TaskUpdate{From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskRunning, Progress: &p}, ev)
			if err != nil {
				s.logger.Warn("task progress not recorded", "task", t.ID, "error", err)
			}
			if ok && ev != nil {
				r.told, r.toldAt = p, now
			}
			t.Progress, r.storedAt, r.unstoredAt = p, now, time.Time{}
		}
	}
}

// progressDue reports whether a poll at now that read progress p, of a
// task whose stored progress is stored, stores it (run.storedAt says
// when), given r.next, the next poll, and until, the end of this
// execution's hold.
func (s *Service) progressDue(r *run, stored, p int, now, until time.Time) bool {
	if p == stored {
		r.unstoredAt = time.Time{}
		return false
	}
	if r.unstoredAt.IsZero() {
		r.unstoredAt = now
	}
	if now.Sub(r.storedAt) < s.cfg.PollMin {
		return false
	}
	return r.next.After(until) || r.next.Sub(r.unstoredAt) >= s.cfg.PollMin
}

// snoozeLead is how much shorter than the wait for its next poll a
// running task's job is snoozed.
const snoozeLead = 100 * time.Millisecond

// sleep waits d on the service's clock, or until ended is closed (true
// either way); false if the job's context ended or the service is
// stopping first.
func (s *Service) sleep(ctx context.Context, ended <-chan struct{}, d time.Duration) bool {
	done := make(chan struct{})
	tm := s.clock.AfterFunc(d, func() { close(done) })
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-ended:
		return true
	case <-ctx.Done():
	case <-s.stopping:
	}
	return false
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
