package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
)

// RunArgs is the River job that runs one admitted task, one step per
// execution: submit if not yet submitted, else poll; between polls it
// snoozes, so no execution runs long and a dead process's job is rescued
// quickly.
type RunArgs struct {
	TaskID string `json:"task_id"`
}

// Kind names the job.
func (RunArgs) Kind() string { return "weir_task_run" }

type runWorker struct {
	river.WorkerDefaults[RunArgs]
	s *Service
}

// Work runs one step of the task. A step that fails on the job's last
// attempt, or outlives its job timeout then, ends the task as failed: a
// task never stays running with no job left to finish it. A step cut
// short otherwise (its context cancelled) leaves it as it is.
func (w *runWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	err := w.step(ctx, job)
	var snooze *river.JobSnoozeError
	var cancel *river.JobCancelError
	cut := ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded)
	if err == nil || errors.As(err, &snooze) || errors.As(err, &cancel) || cut || job.Attempt < job.MaxAttempts {
		return err
	}
	if t, gerr := w.s.store.TaskGet(context.WithoutCancel(ctx), job.Args.TaskID); gerr == nil && !t.Status.Terminal() {
		if ferr := w.s.finishRunning(ctx, t, weir.TaskUpdate{Status: weir.TaskFailed, ErrorCode: "gave_up", ErrorMessage: err.Error()}); ferr != nil {
			w.s.logger.Error("a task whose job gave up could not be failed; it stays as it is", "task", t.ID, "error", ferr)
		}
		if t.UpstreamID != "" {
			if target, ok := w.s.targetOf(t); ok {
				_ = target.Adapter.Cancel(context.WithoutCancel(ctx), t.UpstreamID)
			}
		}
	}
	return err
}

func (w *runWorker) step(ctx context.Context, job *river.Job[RunArgs]) error {
	s := w.s
	select {
	case <-s.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	read := s.notices.mark()
	t, err := s.store.TaskGet(ctx, job.Args.TaskID)
	if errors.Is(err, weir.ErrNotFound) {
		return river.JobCancel(fmt.Errorf("task %s is gone", job.Args.TaskID))
	}
	if err != nil {
		return err
	}
	if t.Status.Terminal() {
		s.releaseLease(t.ID)
		return nil
	}
	ctx, span := s.attemptSpan(ctx, t, job.JobRow)
	defer endTaskSpan(span)
	target, ok := s.targetOf(t)
	if !ok {
		return s.noTarget(ctx, t)
	}
	if t.UpstreamID == "" && target.Retired {
		return s.requeueRetired(ctx, t)
	}
	if err := s.holdTargetLease(ctx, t, target); err != nil {
		return err
	}
	if t.UpstreamID == "" {
		return s.submit(ctx, t, target, job, read)
	}
	return s.follow(ctx, t, target, job, read)
}

// requeueRetired sends task t, admitted to a platform model that left
// the catalog before it was submitted there (Target.Retired), back to
// the queue for its model's candidates now, as a reload moves the tasks
// still queued: nothing is started on a platform model its operator
// removed. A model left with no candidate fails it no_candidate as it
// queues, before any upstream call.
func (s *Service) requeueRetired(ctx context.Context, t weir.Task) error {
	ctx = context.WithoutCancel(ctx)
	ok, err := s.store.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: t.ID, Update: weir.TaskUpdate{
		From: []weir.TaskStatus{weir.TaskAdmitted}, Status: weir.TaskQueued, Candidate: ptr(-1),
	}})
	if err != nil {
		return err
	}
	if !ok {
		s.releaseLease(t.ID) // cancelled meanwhile
		return nil
	}
	s.cfg.Metrics.TaskTransition(weir.TaskQueued)
	s.logger.Info("a task admitted to a platform model that left the catalog queues again", "task", t.ID, "platform_model", t.PlatformModel)
	s.endRun(t.ID)
	s.ledger.done(ctx, t.ID, &sentBack{})
	return nil
}

// targetRetry is how long a job whose platform model is unknown here is
// snoozed for, within Config.TargetWait.
const targetRetry = time.Second

// noTarget is the step of task t, whose platform model this replica's
// catalog has not: within Config.TargetWait of its admission the job is
// snoozed, for this replica to take the catalog version that has it or
// for another to take the job; past that the task fails. A platform
// model that left the catalog is kept while tasks hold leases on it
// (Target.Retired), and a job submitted upstream is followed on the
// platform it was submitted to while the catalog has that platform
// (SiteTargeter): one unknown here past the wait is one this process
// never knew (it started after the catalog that removed it) whose
// platform is gone too, or whose leases are gone (a fleet's next leader
// that never knew it could not restore them). A task not submitted
// fails no_candidate; one whose upstream job was started fails
// platform_gone: nothing here can reach its job any more, which may
// still run upstream.
func (s *Service) noTarget(ctx context.Context, t weir.Task) error {
	if left := s.cfg.TargetWait - s.clock.Now().Sub(t.AdmittedAt); left > 0 {
		return river.JobSnooze(min(targetRetry, left))
	}
	msg := "the platform model " + t.PlatformModel + " left the catalog"
	if t.UpstreamID == "" {
		return s.failRunning(ctx, t, "no_candidate", msg)
	}
	msg += " while its upstream job " + t.UpstreamID + " ran, and the catalog has no platform where the job was submitted; the job is no longer followed"
	return s.failRunning(ctx, t, "platform_gone", msg)
}

// holdLease makes sure the task's lease is held and renewed (the
// ledger's hold).
func (s *Service) holdLease(ctx context.Context, t weir.Task) error {
	return s.ledger.hold(ctx, t)
}

// holdTargetLease is holdLease for task t running on target, but for a
// job followed where its platform model has no scope (Target.Unscoped):
// it has no lease to hold, and none can be restored.
func (s *Service) holdTargetLease(ctx context.Context, t weir.Task, target Target) error {
	if target.Unscoped && t.UpstreamID != "" {
		return nil
	}
	return s.holdLease(ctx, t)
}

// submit starts the task upstream and records the upstream id before
// anything else; the idempotency key (the task id) makes a resubmission
// after a crash in between find the same job. read is the notices' mark
// taken before t was read (follow).
func (s *Service) submit(ctx context.Context, t weir.Task, target Target, job *river.Job[RunArgs], read uint64) error {
	body, err := withModel(t.Input, target.Upstream)
	if err != nil {
		return s.failRunning(ctx, t, "invalid_request", err.Error())
	}
	up, err := target.Adapter.Submit(ctx, provider.AsyncCall{Body: body, IdempotencyKey: submitKey(t)})
	// The job started upstream at the latest as its submit returned: its
	// progress is timed from then (run.started).
	started := s.clock.Now()
	if ctx.Err() == nil && !target.Simulated {
		s.report(t.PlatformModel, err)
	}
	if err != nil {
		return s.upstreamFailed(ctx, t, job, err)
	}
	if st, ok := s.planner.(Starter); ok && !target.Simulated {
		st.TaskStarted(t)
	}
	if up.Settled {
		return s.endedAtSubmit(ctx, t, up)
	}
	now := s.clock.Now()
	ok, err := s.updateWithEvent(ctx, t, weir.TaskUpdate{
		From: []weir.TaskStatus{weir.TaskAdmitted}, Status: weir.TaskRunning, UpstreamID: up.ID, UpstreamSite: target.Site,
		Progress: &up.Progress,
	}, runningEvent(t, up.Progress, now))
	if err != nil {
		return err
	}
	if !ok {
		// Cancelled while submitting: stop the upstream job too.
		_ = target.Adapter.Cancel(context.WithoutCancel(ctx), up.ID)
		s.releaseLease(t.ID)
		return nil
	}
	s.cfg.Metrics.TaskTransition(weir.TaskRunning)
	s.cfg.Metrics.TaskWaited(t.Model, t.AdmittedAt.Sub(t.CreatedAt))
	r := newRun(started, started.Add(s.firstPoll(t.PlatformModel)), up.Progress, now)
	r.learns = true
	s.mu.Lock()
	s.runs[t.ID] = r
	s.mu.Unlock()
	t.Status, t.UpstreamID, t.UpstreamSite, t.Progress = weir.TaskRunning, up.ID, target.Site, up.Progress
	return s.follow(ctx, t, target, job, read)
}

// endedAtSubmit ends task t, whose job was settled as it was submitted
// (a call its upstream answers at once, run as a task: provider.SyncJob):
// the answer is its result, and nothing upstream is left to follow. A
// job that ended failed (its answer was too long to keep) is not tried
// again: it would answer the same.
func (s *Service) endedAtSubmit(ctx context.Context, t weir.Task, up provider.Job) error {
	s.cfg.Metrics.TaskWaited(t.Model, t.AdmittedAt.Sub(t.CreatedAt))
	if up.Status == provider.JobSucceeded {
		return s.finishRunning(ctx, t, weir.TaskUpdate{Status: weir.TaskSucceeded, Result: up.Raw, Progress: ptr(100)})
	}
	code, msg := "upstream_failed", "the upstream job failed"
	if up.Error != nil {
		code, msg = up.Error.Code, up.Error.Message
	}
	return s.finishRunning(ctx, t, weir.TaskUpdate{Status: weir.TaskFailed, ErrorCode: code, ErrorMessage: msg, Result: up.Raw})
}

// report tells the planner, if it listens, how a call to pm went: err is
// nil, or counts against pm's health if it is retryable (the upstream's
// trouble, not the task's).
func (s *Service) report(pm string, err error) {
	var pe *provider.Error
	if errors.As(err, &pe) && pe.Status == http.StatusTooManyRequests && pe.RetryAfter > 0 {
		// Not a failure: the platform said when to come back.
		if p, ok := s.planner.(Pauser); ok {
			p.PauseUpstream(pm, pe.RetryAfter)
		}
		return
	}
	h, ok := s.planner.(HealthReporter)
	if !ok {
		return
	}
	switch {
	case err == nil:
		h.UpstreamResult(pm, true)
	case !errors.As(err, &pe) || pe.Retryable():
		h.UpstreamResult(pm, false)
	}
}

// upstreamFailed decides what an upstream error means for the task:
//   - a saturated platform (429) before the task was started there sends
//     it back to the queue: to another candidate at once, or to the same
//     one after its Retry-After;
//   - a submit the platform certainly did not act on (it answered 500,
//     502 or 503, or was never reached) sends the task to another
//     candidate at once if there is one; otherwise, and for a failure
//     that may have started the job (a timeout, say: only a resubmit with
//     the same Idempotency-Key to the same platform is safe then), River
//     retries the step with its backoff up to MaxAttempts, then the task
//     fails;
//   - a refusal fails it now.
func (s *Service) upstreamFailed(ctx context.Context, t weir.Task, job *river.Job[RunArgs], err error) error {
	if ctx.Err() != nil {
		return err
	}
	var pe *provider.Error
	if !errors.As(err, &pe) {
		pe = &provider.Error{Err: err}
	}
	switch {
	case pe.Status == 429 && t.UpstreamID == "":
		if s.requeue(ctx, t, max(pe.RetryAfter, time.Second), false) {
			return nil
		}
		return err
	case t.UpstreamID == "" && notStarted(pe) && s.requeue(ctx, t, 0, true):
		return nil
	case pe.Retryable() && job.Attempt < job.MaxAttempts:
		return err
	case errors.Is(err, provider.ErrJobNotFound):
		return s.failRunning(ctx, t, "upstream_lost", "the upstream no longer has the job")
	case pe.Retryable():
		return s.failRunning(ctx, t, "upstream_error", pe.Error())
	default:
		return s.failRunning(ctx, t, "upstream_refused", pe.Error())
	}
}

// notStarted reports whether a failed submit certainly started no job:
// the platform answered that it failed (500, 502, 503) or refused its own
// credential, or it was never reached (the connection was not made). A
// timeout, a 504 or a broken connection may have left a job running
// upstream.
func notStarted(pe *provider.Error) bool {
	if pe.Credential {
		return true
	}
	switch pe.Status {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable:
		return true
	case 0:
		var op *net.OpError
		return !pe.Timeout && errors.As(pe.Err, &op) && op.Op == "dial"
	}
	return false
}

// requeue sends an admitted task that a platform refused back to the
// queue, at once, if a candidate that has not refused it since it last
// queued for all its candidates may take it: so a task whose candidates
// all refuse it is not sent back and forth between them. Otherwise, if
// elsewhereOnly, it changes nothing and reports false; if not, the task
// waits out the platform's Retry-After (after) and queues for all its
// candidates again. A crash meanwhile leaves it queued in the store, and
// the next start queues it.
func (s *Service) requeue(ctx context.Context, t weir.Task, after time.Duration, elsewhereOnly bool) bool {
	ctx = context.WithoutCancel(ctx)
	refused := s.refuse(t.ID, t.PlatformModel)
	queued := t
	queued.Status, queued.PlatformModel = weir.TaskQueued, ""
	req, err := s.request(ctx, queued)
	others := []admission.Candidate(nil)
	if err == nil {
		others = req.Candidates
		for _, pm := range refused {
			others = withoutScope(others, weir.PlatformModelScope(pm))
		}
	}
	if elsewhereOnly && len(others) == 0 {
		return false
	}
	cand := -1
	ok, err := s.store.TaskUpdate(ctx, &weir.TaskUpdateParams{ID: t.ID, Update: weir.TaskUpdate{
		From: []weir.TaskStatus{weir.TaskAdmitted}, Status: weir.TaskQueued, Candidate: &cand,
	}})
	if err != nil || !ok {
		return false
	}
	// The ledger queues it again: on the candidates left, or after the
	// wait.
	s.endRun(t.ID)
	s.ledger.done(ctx, t.ID, &sentBack{req: req, refused: refused, others: others, after: after, failed: elsewhereOnly})
	return true
}

// enqueueAfter queues task id, stored as queued, again after d, unless
// it has moved on meanwhile (cancelled, say), or the service has
// stopped: then it stays queued in the store, and the next start queues
// it. A task that cannot be read then is read again after admitRetry:
// dropped, it would stay queued in the store, in no queue, and never
// expire.
func (s *Service) enqueueAfter(id string, d time.Duration) {
	s.enqueueLater(id)(d)
}

// enqueueLater is enqueueAfter in two steps: the wait is known from now,
// and starts when start is called. Alone, the term knows of the wait
// (term.deferLocal), so that a recovery reading the queue while workers
// already run (recoverQueued) leaves the task to it rather than queue it
// before its time.
func (s *Service) enqueueLater(id string) (start func(d time.Duration)) {
	due := func() { s.enqueueDue(id) }
	if tm := s.current(); tm != nil && !tm.fleet {
		return tm.deferLocal(id, due)
	}
	return func(d time.Duration) { s.clock.AfterFunc(d, due) }
}

// enqueueDue is enqueueAfter's queueing, once the wait is over.
func (s *Service) enqueueDue(id string) {
	select {
	case <-s.stopping:
		return
	default:
	}
	ctx := context.Background()
	t, err := s.store.TaskGet(ctx, id)
	if err != nil && !errors.Is(err, weir.ErrNotFound) {
		s.logger.Warn("a task to queue again could not be read; trying again", "task", id, "error", err)
		s.enqueueAfter(id, admitRetry)
		return
	}
	if err != nil || t.Status != weir.TaskQueued {
		s.forgetDeferrals(id)
		return
	}
	s.forgetRefusals(id)
	if err := s.enqueue(ctx, t); err != nil {
		s.requeueFailed(ctx, id, err, s.enqueueAfter)
		return
	}
	s.forgetDeferrals(id)
}

// refuse records that platform model pm refused task id's submit, and
// returns every platform model that has since the task last queued for
// all its candidates.
func (s *Service) refuse(id, pm string) []string {
	s.cfg.Metrics.TaskCandidateSkipped("refused")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.refusals[id], pm) {
		s.refusals[id] = append(s.refusals[id], pm)
	}
	return slices.Clone(s.refusals[id])
}

// forgetRefusals forgets the platforms that refused task id: it queues
// for all its candidates again, or it has ended.
func (s *Service) forgetRefusals(id string) {
	s.mu.Lock()
	delete(s.refusals, id)
	s.mu.Unlock()
}

// withoutScope returns the candidates that do not need scope.
func withoutScope(cands []admission.Candidate, scope string) []admission.Candidate {
	var out []admission.Candidate
	for _, c := range cands {
		if !slices.ContainsFunc(c.Needs, func(n admission.Need) bool { return n.Scope == scope }) {
			out = append(out, c)
		}
	}
	return out
}

func (s *Service) failRunning(ctx context.Context, t weir.Task, code, msg string) error {
	return s.finishRunning(ctx, t, weir.TaskUpdate{Status: weir.TaskFailed, ErrorCode: code, ErrorMessage: msg})
}

// finishRunning ends an admitted or running task and releases its lease,
// exactly once. If the store cannot be written, the task keeps its lease
// and the error is returned for River to retry the step, which polls
// again and ends it then: a task is never left running with its capacity
// gone and no job to finish it.
func (s *Service) finishRunning(ctx context.Context, t weir.Task, u weir.TaskUpdate) error {
	if _, err := s.finish(context.WithoutCancel(ctx), t, []weir.TaskStatus{weir.TaskAdmitted, weir.TaskRunning}, u); err != nil {
		return fmt.Errorf("end task %s as %s: %w", t.ID, u.Status, err)
	}
	s.releaseLease(t.ID)
	return nil
}

// withModel rewrites the model of a JSON request body.
func withModel(input []byte, upstream string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(input, &m); err != nil {
		return nil, fmt.Errorf("task input is not a JSON object: %w", err)
	}
	name, _ := json.Marshal(upstream)
	m["model"] = name
	return json.Marshal(m)
}

func ptr[T any](v T) *T { return &v }
