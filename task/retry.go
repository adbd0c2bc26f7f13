package task

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
)

// Retrying a failed upstream job.
//
// An upstream job that ends failed is the task's own failure: the
// platform took it and could not make it. Unless the failure says the
// request is at fault (a moderation or policy refusal, an invalid input:
// the same request would fail again), the task goes back to the queue —
// behind the tasks already waiting at its priority (the engine orders by
// arrival), and free to go to another candidate — after an exponential
// backoff with jitter, and runs as a new upstream job. It
// fails for good, with the upstream's code, when Config.MaxAttempts jobs
// have failed. Its capacity serves other tasks during the backoff.

// retryBackoffMax bounds the wait before a failed job's task queues again.
const retryBackoffMax = 10 * time.Minute

// submitKey is the Idempotency-Key of t's submit: its id for its first
// upstream job (so that a resubmit after a crash finds the same job), and
// a key of its own for each retry (a new job, not the failed one).
func submitKey(t weir.Task) string {
	if t.Attempts == 0 {
		return t.ID
	}
	return t.ID + "-" + strconv.Itoa(t.Attempts)
}

// requestAtFault reports whether a failed job's error code says the
// request itself is at fault, so that running it again would fail again.
func requestAtFault(code string) bool {
	code = strings.ToLower(code)
	for _, w := range []string{"moderation", "policy", "safety", "invalid", "blocked", "content_filter", "unsupported"} {
		if strings.Contains(code, w) {
			return true
		}
	}
	return false
}

// retryBackoff is the wait before the task of a job that failed for the
// n-th time queues again: PollMin·4^n, at most retryBackoffMax, with
// jitter of ±50% so that tasks failed together do not return together.
func (s *Service) retryBackoff(n int) time.Duration {
	d := s.cfg.PollMin << (2 * min(n, 16))
	if d <= 0 || d > retryBackoffMax {
		d = retryBackoffMax
	}
	return d/2 + rand.N(d)
}

// retryFailedJob sends a running task whose upstream job failed with code
// back to the queue for a new job, if the failure is not the request's
// and it has attempts left. It reports whether the task is settled (sent
// back, or moved on meanwhile); false leaves the caller to fail it.
func (s *Service) retryFailedJob(ctx context.Context, t weir.Task, code, msg string) bool {
	n := t.Attempts + 1
	if requestAtFault(code) || n >= s.cfg.MaxAttempts {
		return false
	}
	ctx = context.WithoutCancel(ctx)
	ok, err := s.store.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: t.ID, Update: weir.TaskUpdate{
		From: []weir.TaskStatus{weir.TaskRunning}, Status: weir.TaskQueued,
		ClearUpstream: true, Progress: ptr(0), Attempts: &n, Candidate: ptr(-1),
	}})
	if err != nil {
		return false
	}
	if !ok {
		s.releaseLease(t.ID)
		return true // cancelled meanwhile
	}
	wait := s.retryBackoff(n)
	s.cfg.Metrics.TaskTransition(weir.TaskQueued)
	s.logger.Info("upstream job failed; the task queues again for a new one", "task", t.ID, "code", code, "message", msg,
		"attempt", n+1, "of", s.cfg.MaxAttempts, "after_ms", wait.Milliseconds())
	s.endRun(t.ID)
	s.ledger.done(ctx, t.ID, &sentBack{after: wait})
	return true
}
