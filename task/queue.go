package task

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/tracing"
)

// request builds the engine request for t: the planner's candidates,
// each with a worker (and for a task of an acceptance run, a worker of
// the runs' share).
func (s *Service) request(ctx context.Context, t weir.Task) (admission.Request, error) {
	cands, err := s.planner.Plan(ctx, t)
	if err != nil {
		return admission.Request{}, err
	}
	for i := range cands {
		if t.RunMode == weir.RunAcceptance {
			cands[i].Needs = append(cands[i].Needs, admission.Need{Scope: AcceptanceWorkersScope, Amount: 1})
		}
		cands[i].Needs = append(cands[i].Needs, admission.Need{Scope: WorkersScope, Amount: 1})
	}
	return admission.Request{
		ID:          t.ID,
		Priority:    t.Priority,
		FairnessKey: t.KeyID,
		Deadline:    t.Deadline,
		Owner:       s.cfg.Owner,
		Candidates:  cands,
	}, nil
}

// Submit stores t (or finds the task its idempotency key names) and queues
// it. created is false when an earlier submission is returned.
func (s *Service) Submit(ctx context.Context, t *weir.Task) (created bool, err error) {
	now := s.clock.Now()
	if t.ID == "" {
		t.ID = NewID("task")
	}
	t.Status = weir.TaskQueued
	t.CreatedAt = now
	t.Candidate = -1
	t.TraceParent = tracing.Traceparent(ctx)
	// A deadline the caller set may only shorten the wait (the
	// X-Weir-Max-Wait promise), never lengthen it past MaxWait.
	if latest := now.Add(s.cfg.MaxWait); t.Deadline.IsZero() || t.Deadline.After(latest) {
		t.Deadline = latest
	}
	// Plan first: a task that cannot be served, or finds the backlog
	// full, is refused before it is stored; unless it was accepted
	// already.
	req, err := s.request(ctx, *t)
	if err == nil {
		err = s.backlogFull(ctx)
	}
	if err != nil {
		return false, s.acceptedBefore(ctx, t, err)
	}
	created, err = s.store.TaskCreate(ctx, t)
	if err != nil || !created {
		return created, err
	}
	s.cfg.Metrics.TaskTransition(weir.TaskQueued)
	return true, s.ledger.submit(ctx, t, req)
}

// acceptedBefore answers a submission refused with refusal: a
// resubmission of an Idempotency-Key whose task was accepted already
// gets that task (copied into t, with a nil error and, to the caller,
// created false), whatever refuses new work now (a full backlog, a plan
// that fails); any other gets refusal. A store that cannot say is the
// store's error.
func (s *Service) acceptedBefore(ctx context.Context, t *weir.Task, refusal error) error {
	if t.IdempotencyKey == "" {
		return refusal
	}
	stored, err := s.store.TaskByIdempotencyKey(ctx, t.KeyID, t.IdempotencyKey)
	switch {
	case errors.Is(err, weir.ErrNotFound):
		return refusal
	case err != nil:
		return err
	}
	*t = stored
	return nil
}

// backlogFull is the refusal of a submission while Config.QueueLimit
// tasks wait in the queue: the workers scope's waiters, as the engine
// (in a fleet, the leader's) counts them. An engine that cannot say
// refuses nothing here. A resubmission of an Idempotency-Key is not
// refused: it gets its task (acceptedBefore).
func (s *Service) backlogFull(ctx context.Context) error {
	limit := s.cfg.QueueLimit
	full := s.backlog.full(ctx, s.clock.Now, limit, func() (int, error) {
		st, err := s.engine.Scope(ctx, WorkersScope)
		return st.Queued, err
	})
	if !full {
		return nil
	}
	return &admission.QueueFullError{Scope: WorkersScope, Limit: limit}
}

// backlogFresh is how long a count of the backlog lets submissions
// through without another.
const backlogFresh = 100 * time.Millisecond

// backlog is the workers scope's queue as the engine last counted it,
// for backlogFull. Asking the engine at each submission costs, in a
// fleet, a call to the leader; so a submission finds room in a count
// younger than backlogFresh, plus the submissions let through here
// since, while that leaves a tenth of the limit free; any other asks
// again. Only a fresh count refuses. A count does not see what other
// replicas take meanwhile: near the limit, where that could let too many
// through, each submission asks, so that the workers scope's own queue
// limit, which ends a task accepted past it as queue_full, is reached
// only in a race, as when every submission asked.
type backlog struct {
	mu     sync.Mutex
	at     time.Time // when counted; zero: never
	queued int       // the count, plus the submissions let through since
	// counts runs one count at a time, which every submission that
	// needs one meanwhile waits for.
	counts singleflight.Group
}

// full reports whether the backlog has no room under limit for one more
// submission, and counts one it lets through. count counts the backlog;
// the submissions that need a count while one is under way wait for it.
func (b *backlog) full(ctx context.Context, now func() time.Time, limit int, count func() (int, error)) bool {
	b.mu.Lock()
	if !b.at.IsZero() && now().Sub(b.at) < backlogFresh && b.queued < limit-limit/10 {
		b.queued++
		b.mu.Unlock()
		return false
	}
	b.mu.Unlock()
	counted := b.counts.DoChan("", func() (any, error) {
		at := now()
		queued, err := count()
		if err == nil {
			b.mu.Lock()
			b.at, b.queued = at, queued
			b.mu.Unlock()
		}
		return nil, err
	})
	var err error
	select {
	case c := <-counted:
		err = c.Err
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil || b.queued < limit {
		b.queued++
		return false
	}
	return true
}

// enqueue makes a queued task a waiter in the engine.
func (s *Service) enqueue(ctx context.Context, t weir.Task) error {
	req, err := s.request(ctx, t)
	if err != nil {
		return err
	}
	return s.enqueueRequest(ctx, req)
}

// errNotLeading: in a fleet, this replica does not lead; the ledger of
// the replica that does queues the task.
var errNotLeading = errors.New("this replica does not lead the fleet")

// enqueueRequest makes a queued task, as the engine request req, a waiter
// in the term.
func (s *Service) enqueueRequest(ctx context.Context, req admission.Request) error {
	tm := s.current()
	if tm == nil {
		return errNotLeading
	}
	return tm.enqueue(ctx, req)
}

// waitEnded settles a task whose wait ended without admission.
func (s *Service) waitEnded(id string, err error) {
	ctx := context.Background()
	switch {
	case errors.Is(err, admission.ErrClosed), errors.Is(err, admission.ErrFenced):
		// Shutting down: the task stays queued and the next start queues it.
	case errors.Is(err, admission.ErrCancelled):
		// Cancel marked it (in a fleet, the ledger took the waiter out:
		// the task moved on, or its next look queues it again).
	case s.ledger.passing(err):
		// The term's trouble, not the task's (in a fleet): the ledger's
		// next look queues it again.
	default:
		s.failQueued(ctx, id, err)
	}
}

// requeueFailed settles a task, accepted and stored queued, that could
// not queue (again: after a retry, a platform's refusal, a failed
// commit; or at a recovery or a fleet ledger's poll): a failure that
// lasts (lasting: no candidate, its wait over, its key gone) ends it; a
// passing one (a full queue, the store or the planner failing) must not
// lose it, so it queues again later, after a backoff that grows while
// the trouble lasts, through later (enqueueAfter, or the fleet ledger's
// deferQueue).
func (s *Service) requeueFailed(ctx context.Context, id string, err error, later func(string, time.Duration)) {
	switch {
	case errors.Is(err, admission.ErrClosed), errors.Is(err, admission.ErrFenced), errors.Is(err, admission.ErrDuplicate):
		// Shutting down, or queued already: the store keeps it queued.
		return
	case !lasting(err):
		s.mu.Lock()
		s.deferrals[id]++
		n := s.deferrals[id]
		s.mu.Unlock()
		wait := commitBackoff(n)
		s.cfg.Metrics.TaskDispatch("deferred")
		if errors.Is(err, admission.ErrQueueFull) {
			s.cfg.Metrics.TaskCandidateSkipped("queue_full")
		}
		if logDue(n) {
			s.logger.Warn("a task could not queue; it tries again later", "task", id, "tries", n, "after_ms", wait.Milliseconds(), "error", err)
		}
		later(id, wait)
		return
	}
	s.forgetDeferrals(id)
	s.failQueued(ctx, id, err)
}

// lasting reports whether err, which kept a stored task from queueing,
// will keep doing so: the engine's verdict on the task itself (taskFault:
// no candidate left, its wait over, a scope it needs unknown), or the
// store's kinds that say the task's record or its key is gone or wrong
// (weir.ErrNotFound, weir.ErrInvalid). A full queue passes, and so does
// any other failure: the store or the catalog not answering now (a
// restart, a failover, a catalog not applied yet) says nothing of the
// task.
func lasting(err error) bool {
	switch {
	case errors.Is(err, admission.ErrQueueFull):
		return false
	case taskFault(err), errors.Is(err, weir.ErrNotFound), errors.Is(err, weir.ErrInvalid):
		return true
	}
	return false
}

// logDue reports whether the n-th failure in a row of one thing is
// logged: the 1st, 5th, 7th and every 10th, so that a failure that
// lasts is seen, with its count, without a line at every retry
// (weir_task_dispatch_total counts each).
func logDue(n int) bool {
	return n == 1 || n == 5 || n == 7 || n%10 == 0
}

// forgetDeferrals forgets task id's passing failures to queue again.
func (s *Service) forgetDeferrals(id string) {
	s.mu.Lock()
	delete(s.deferrals, id)
	s.mu.Unlock()
}

// failQueued ends a queued task that cannot wait: expired if its wait
// ended (the engine says so at once when a task queues past its
// deadline: at a restart after it, or with no wait allowed), else failed.
func (s *Service) failQueued(ctx context.Context, id string, err error) {
	if errors.Is(err, admission.ErrTimeout) {
		s.expireQueued(ctx, id, err)
		return
	}
	code, msg := queueFailure(err)
	_, _ = s.finishID(context.WithoutCancel(ctx), id, []weir.TaskStatus{weir.TaskQueued}, weir.TaskUpdate{Status: weir.TaskFailed, ErrorCode: code, ErrorMessage: msg})
}

// expireQueued ends a queued task whose wait ended (err, an
// admission.ErrTimeout) as expired.
func (s *Service) expireQueued(ctx context.Context, id string, err error) {
	ctx = context.WithoutCancel(ctx)
	t, gerr := s.store.TaskGet(ctx, id)
	if gerr != nil {
		s.logger.Error("task update failed", "task", id, "status", weir.TaskExpired, "error", gerr)
		return
	}
	_, _ = s.finish(ctx, t, []weir.TaskStatus{weir.TaskQueued}, weir.TaskUpdate{
		Status: weir.TaskExpired, ErrorCode: "expired", ErrorMessage: waitEndedMessage(err, t.Deadline.Sub(t.CreatedAt))})
}

// queueFailure is the error code and message of a task that could not
// wait: a full queue, named with its queue_limit, or no candidate.
func queueFailure(err error) (code, msg string) {
	var qe *admission.QueueFullError
	switch {
	case errors.As(err, &qe):
		return "queue_full", weir.QueueFullText(qe.Scope, qe.Limit)
	case errors.Is(err, admission.ErrQueueFull):
		return "queue_full", err.Error()
	}
	return "no_candidate", err.Error()
}

// waitEndedMessage says which limit ended a queued task's wait: its own
// maximum wait (maxWait, from its submission to its deadline), or a
// scope's max_wait that dropped its last candidate.
func waitEndedMessage(err error, maxWait time.Duration) string {
	var te *admission.TimeoutError
	switch {
	case !errors.As(err, &te):
		return "the task waited longer than its maximum wait"
	case te.Scope == "":
		// Not te.Value: the engine counts from when the task last
		// queued, which is later after a restart or a retry.
		return fmt.Sprintf("the task waited longer than its maximum wait (%s)", maxWait.Round(time.Second))
	}
	return fmt.Sprintf("the task waited %s in the queue: %s passed", te.Waited.Round(time.Millisecond), weir.MaxWaitText(te.Scope, te.Value))
}
