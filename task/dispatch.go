package task

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// The term's dispatcher: it commits the admissions the term's engine
// decides, each task's status change and its River job in one
// transaction, and deals with the commits that fail.

// dispatch commits admissions: each admitted task's status change and
// its River job in one transaction, batched while admissions keep
// coming.
func (tm *term) dispatch() {
	defer close(tm.done)
	batch := make([]admittedTask, 0, dispatchBatch)
	for {
		select {
		case <-tm.stop:
			return
		case a := <-tm.admitted:
			batch = append(batch[:0], a)
		}
	fill:
		for len(batch) < cap(batch) {
			select {
			case a := <-tm.admitted:
				batch = append(batch, a)
			default:
				break fill
			}
		}
		tm.commit(batch)
	}
}

// dispatchBatch is the most admissions one commit takes: with 1,000
// workers, admissions come hundreds a second.
const dispatchBatch = 256

// admitRetry is how long tasks whose admission could not be committed
// wait before they queue again, the first time; each failure in a row
// doubles it, up to admitRetryMax, with jitter so that tasks refused
// together do not all return together.
const (
	admitRetry    = time.Second
	admitRetryMax = 30 * time.Second
)

// errTermEnded: a fleet term ended before its admissions were committed.
var errTermEnded = errors.New("the fleet term ended")

// ErrDeposed is what a commit of admissions fails with when the store's
// fence (Fencer) finds that the fleet term has passed to another replica.
var ErrDeposed = errors.New("task: the fleet term is no longer this replica's")

// codeDispatchFailed is the error code of a task whose admission the
// store refused alone while it took the others': the task's own record
// is at fault, and trying it again would fail again.
const codeDispatchFailed = "dispatch_failed"

// commit commits a batch of admissions in one transaction. When that
// fails, each is tried alone: one task the store refuses must not hold
// up the rest. A task refused alone while others went through is failed
// (codeDispatchFailed); when every one is refused, the store is at fault
// and they queue again after a backoff that grows while it lasts.
func (tm *term) commit(batch []admittedTask) {
	s := tm.s
	ctx := context.Background()
	tm.sync.Lock()
	applied, errs, err := tm.applyEach(ctx, batch)
	if tm.readCommits != nil {
		for _, a := range batch {
			tm.readCommits[a.id] = true
		}
	}
	// The store is at fault when it took none; a task it refuses while
	// it takes others (now, or since the task was last refused) is at
	// fault itself.
	storeFault := isCommitFault(err) && !slices.ContainsFunc(errs, func(e error) bool { return !isCommitFault(e) })
	// A term that ended or passed meanwhile commits nothing more: the
	// next leader recovers what is still queued, and judges nothing.
	ended := slices.ContainsFunc(errs, func(e error) bool { return errors.Is(e, errTermEnded) || errors.Is(e, ErrDeposed) })
	if !storeFault {
		tm.okCommits++
	}
	tm.mu.Lock()
	out := tm.sortCommitsLocked(batch, applied, errs, storeFault, ended)
	tm.mu.Unlock()
	tm.sync.Unlock()
	if tm.fleet {
		// A task that was no longer queued: cancelled, or admitted by
		// the term before this one, whose late commit the ledger looks
		// at now rather than at its next poll (it restores the lease).
		for _, id := range out.moved {
			tm.post(notice{id: id})
		}
	}
	for i := range batch {
		if errs[i] == nil && applied[i] {
			s.cfg.Metrics.TaskTransition(weir.TaskAdmitted)
		}
	}
	// Not admitted after all: the capacity goes back, and nothing was
	// spent.
	for _, l := range out.back {
		tm.releaseUnspent(ctx, l)
	}
	tm.failPoisoned(ctx, batch, errs, out.poison)
	switch {
	case errors.Is(err, ErrDeposed):
		s.cfg.Metrics.TaskDispatch("deposed")
		s.logger.Warn("admissions decided in a fleet term that has passed were not committed; the next leader admits their tasks",
			"tasks", len(batch), "epoch", tm.epoch, "error", err)
		return
	case !storeFault:
		tm.commitFails = 0
		return
	}
	// The store fails: the tasks are still queued in it and queue again
	// after a backoff, so that a store that keeps failing is not retried
	// in a busy loop.
	tm.commitFails++
	wait := commitBackoff(tm.commitFails)
	for _, id := range out.again {
		tm.queueAgain(id, wait)
	}
	if logDue(tm.commitFails) {
		s.logger.Error("admission commit failed; tasks queue again", "tasks", len(out.again), "failures_in_a_row", tm.commitFails,
			"after_ms", wait.Milliseconds(), "error", err)
	}
	s.cfg.Metrics.TaskDispatch("commit_failed")
}

// applyEach applies batch in one transaction (apply) and, when that
// fails for the store's or a task's fault, each of its tasks alone;
// err is the batch's.
func (tm *term) applyEach(ctx context.Context, batch []admittedTask) (applied []bool, errs []error, err error) {
	applied, errs, err = tm.apply(ctx, batch)
	if isCommitFault(err) && len(batch) > 1 {
		for i := range batch {
			one, oneErrs, _ := tm.apply(ctx, batch[i:i+1])
			applied[i], errs[i] = one[0], oneErrs[0]
		}
	}
	return applied, errs, err
}

// commitsSorted is what a commit leaves to do about its batch's tasks
// that were not admitted: their leases go back; and each was no longer
// queued (moved), is refused by the store alone (poison: it fails), or
// queues again after a backoff (again).
type commitsSorted struct {
	back                 []admission.Lease
	moved, poison, again []string
}

// sortCommitsLocked records what the commit of batch did (applied, and
// errs, as applyEach says; storeFault and ended as commit judged them):
// the leases of the tasks admitted are held, and those of the others
// sorted out.
func (tm *term) sortCommitsLocked(batch []admittedTask, applied []bool, errs []error, storeFault, ended bool) commitsSorted {
	var out commitsSorted
	for i, a := range batch {
		h := tm.leases[a.id]
		mine := h != nil && h.lease.ID == a.lease.ID
		if errs[i] == nil && applied[i] {
			if mine {
				h.pending = false
			}
			continue
		}
		if mine {
			delete(tm.leases, a.id)
		}
		out.back = append(out.back, a.lease)
		switch {
		case errs[i] == nil:
			out.moved = append(out.moved, a.id)
		case !isCommitFault(errs[i]), ended:
		case !storeFault:
			out.poison = append(out.poison, a.id)
		default:
			if at, ok := tm.refusedAt[a.id]; ok && tm.okCommits > at {
				out.poison = append(out.poison, a.id)
				break
			}
			tm.refusedAt[a.id] = tm.okCommits
			out.again = append(out.again, a.id)
		}
		if errs[i] == nil || slices.Contains(out.poison, a.id) {
			delete(tm.refusedAt, a.id)
		}
	}
	return out
}

// failPoisoned fails the tasks of batch the store refused alone
// (poison, with errs as applyEach says): their own records are at
// fault. One that cannot be failed queues again.
func (tm *term) failPoisoned(ctx context.Context, batch []admittedTask, errs []error, poison []string) {
	s := tm.s
	for i, a := range batch {
		if !slices.Contains(poison, a.id) {
			continue
		}
		s.cfg.Metrics.TaskDispatch("poisoned")
		s.logger.Error("the store refused one task's admission while it took others'; the task fails", "task", a.id, "error", errs[i])
		if _, ferr := s.finishID(ctx, a.id, []weir.TaskStatus{weir.TaskQueued}, weir.TaskUpdate{Status: weir.TaskFailed,
			ErrorCode: codeDispatchFailed, ErrorMessage: "the gateway could not record this task's admission; it was not started"}); ferr != nil {
			// Still queued in the store: it must not be left in no queue.
			tm.queueAgain(a.id, commitBackoff(1))
		}
	}
}

// queueAgain queues task id, queued in the store, again after d.
func (tm *term) queueAgain(id string, d time.Duration) {
	if tm.fleet {
		tm.deferQueue(id, d)
	} else {
		tm.s.enqueueAfter(id, d)
	}
}

// commitBackoff is the wait before tasks queue again after the n-th
// failed commit in a row: admitRetry·2^(n-1), at most admitRetryMax, less
// up to a fifth of it (jitter; the first wait is admitRetry exactly).
func commitBackoff(n int) time.Duration {
	d := admitRetry << min(n-1, 8)
	if d > admitRetryMax {
		d = admitRetryMax
	}
	if n <= 1 {
		return d
	}
	return d - rand.N(d/5)
}

// isCommitFault reports whether a commit's error is the store's (or a
// task's record's): not a term that ended or passed, which queue nothing
// again here.
func isCommitFault(err error) bool {
	return err != nil && !errors.Is(err, errTermEnded) && !errors.Is(err, ErrDeposed)
}

// runOpts are the insert options of the job of a task admitted to
// platform model pm: its Queuer's queue, or none (River's default).
func (s *Service) runOpts(pm string) *river.InsertOpts {
	if q, ok := s.planner.(Queuer); ok {
		if name := q.JobQueue(pm); name != "" {
			return &river.InsertOpts{Queue: name}
		}
	}
	return nil
}

// leasePlatformModel is the platform model lease l was granted on: the
// one its needs' platform-model scope names.
func leasePlatformModel(l admission.Lease) string {
	pm := ""
	for _, n := range l.Needs {
		if name, ok := weir.PlatformModelOfScope(n.Scope); ok {
			pm = name
		}
	}
	return pm
}

// apply runs one transaction that admits batch's tasks: applied says
// which it changed (a task no longer queued is left alone), errs which
// failed (all of them, with err, when the transaction did), with tm.sync
// held.
func (tm *term) apply(ctx context.Context, batch []admittedTask) (applied []bool, errs []error, err error) {
	s := tm.s
	now := s.clock.Now()
	applied = make([]bool, len(batch))
	errs = make([]error, len(batch))
	if tm.fleet && tm.ended() {
		// The next leader recovers these tasks from the store, where
		// they are still queued.
		err = errTermEnded
	} else {
		err = s.river.inTx(ctx, func(tx txn) error {
			ups := make([]weir.TaskUpdateParams, len(batch))
			for i, a := range batch {
				cand := a.lease.Candidate
				ups[i] = weir.TaskUpdateParams{ID: a.id, Update: weir.TaskUpdate{
					From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted,
					PlatformModel: leasePlatformModel(a.lease), Candidate: &cand, AdmittedAt: now,
				}}
			}
			ok, err := tm.updateFenced(ctx, tx, ups)
			if err != nil {
				return err
			}
			jobs := make([]river.InsertManyParams, 0, len(batch))
			for i := range batch {
				if !ok[i] {
					continue // cancelled meanwhile
				}
				pm := ups[i].Update.PlatformModel
				jobs = append(jobs, river.InsertManyParams{Args: RunArgs{TaskID: batch[i].id}, InsertOpts: s.runOpts(pm)})
				applied[i] = true
			}
			// The batch's jobs in one statement.
			return tx.jobInsertMany(ctx, jobs)
		})
	}
	if err != nil {
		clear(applied)
		for i := range errs {
			errs[i] = err
		}
	}
	return applied, errs, err
}

// updateFenced applies the updates of a commit of admissions in tx: in a
// fleet term after the store's fence, sent with them where the store
// can, and not at all when the term has passed (ErrDeposed).
func (tm *term) updateFenced(ctx context.Context, tx txn, ups []weir.TaskUpdateParams) ([]bool, error) {
	if !tm.fleet {
		return tx.taskUpdateMany(ctx, ups)
	}
	held, ok, err := tx.fencedUpdateMany(ctx, tm.s.cfg.Replica, tm.epoch, ups)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fmt.Errorf("%w: epoch %d", ErrDeposed, tm.epoch)
	}
	return ok, nil
}
