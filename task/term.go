package task

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// term is the admission side of the service: the engine its tasks wait
// in, the leases held for them, and the dispatcher that commits
// admissions. A service alone has one term, from New to Stop, on
// Deps.Engine. In a fleet (Config.Fleet) the admission side runs only on
// the replica that leads: one term for each fleet term it leads (Lead),
// on the engine that term gives it, whose waiters and leases are the
// term's alone. When it ends they are forgotten, not released (the
// engine goes with the term), and the next leader's term recovers them
// from the store (ledger.go).
type term struct {
	s      *Service
	engine admission.Engine
	// fleet says the term is a fleet leader's ledger: it learns of the
	// other replicas' changes from notices and polls (ledger.go).
	fleet bool
	// epoch is the fleet term's (Lead), which the store's Fencer checks
	// at each commit.
	epoch uint64

	admitted chan admittedTask
	// stop is closed when the term ends; done when its dispatcher has
	// returned, loopDone when its ledger loop has (fleet).
	stop        chan struct{}
	done        chan struct{}
	loopDone    chan struct{}
	endOnce     sync.Once
	dispatching atomic.Bool
	looping     atomic.Bool
	// ready is set once a fleet term has recovered what the store holds:
	// until then the replica's own submissions go through notices.
	ready atomic.Bool

	// sync orders the dispatcher's commits with the reads of the store
	// that the ledger acts on (recovery, polls, notices): no commit of
	// this term lands between such a read and what is decided from it.
	// It is never held while calling the engine.
	sync sync.Mutex

	// commitFails counts the dispatcher's failed commits in a row,
	// okCommits those that took something, and refusedAt records, for a
	// task the store refused with all the others, okCommits then (all
	// the dispatcher goroutine's own).
	commitFails int
	okCommits   int
	refusedAt   map[string]int

	mu      sync.Mutex
	leases  map[string]*held   // task id → the lease held for it
	waiting map[string]*waiter // task id → its waiter in the engine
	// places are the arrival places of the tasks admitted in this term,
	// for a task sent back to the queue to wait where it first arrived
	// (admission.Request.Place). The term's engine gave them: the next
	// term's recovery queues what waits in submission order instead.
	places map[string]uint64
	// The fleet ledger's own (ledger.go).
	deferred     map[string]clock.Timer // task id → its wait before it queues again
	refused      map[string][]string    // task id → platform models that refused it since it last queued for all
	rounds       map[string]int         // task id → times every candidate refused it
	unrestorable map[string]bool        // task id → its lease could not be restored (logged once)
	inbox        []notice
	resyncWanted bool
	wake         chan struct{}
}

// held is a lease the term holds for a task.
type held struct {
	lease admission.Lease
	// pending: granted, and its commit not yet done; the store may still
	// say the task is queued.
	pending bool
	// restoring: a place kept while the lease is restored; lease is zero.
	restoring bool
}

// waiter is a task's place in the term's engine, told apart from a later
// one of the same task by its address. cands are the candidates it
// queued with (Replan compares them with a new plan).
type waiter struct {
	cands []admission.Candidate
}

type admittedTask struct {
	id    string
	lease admission.Lease
}

func newTerm(s *Service, engine admission.Engine, fleet bool, epoch uint64) *term {
	return &term{s: s, engine: engine, fleet: fleet, epoch: epoch,
		admitted: make(chan admittedTask, 4096),
		stop:     make(chan struct{}), done: make(chan struct{}), loopDone: make(chan struct{}),
		leases: make(map[string]*held), waiting: make(map[string]*waiter), places: make(map[string]uint64),
		deferred: make(map[string]clock.Timer), refused: make(map[string][]string), refusedAt: make(map[string]int),
		rounds: make(map[string]int), unrestorable: make(map[string]bool),
		wake: make(chan struct{}, 1)}
}

// startDispatch runs the dispatcher until the term ends.
func (tm *term) startDispatch() {
	tm.dispatching.Store(true)
	go tm.dispatch()
}

// end ends the term: the dispatcher and the ledger stop, and whatever
// the engine still says to the term is dropped.
func (tm *term) end() {
	tm.endOnce.Do(func() { close(tm.stop) })
}

// wait waits for the goroutines of an ended term to return.
func (tm *term) wait() {
	if tm.dispatching.Load() {
		<-tm.done
	}
	if tm.looping.Load() {
		<-tm.loopDone
	}
}

func (tm *term) ended() bool {
	select {
	case <-tm.stop:
		return true
	default:
		return false
	}
}

// enqueue makes a queued task, as the engine request req, a waiter.
func (tm *term) enqueue(ctx context.Context, req admission.Request) error {
	tm.mu.Lock()
	w := tm.reserveLocked(req.ID)
	tm.mu.Unlock()
	if w == nil {
		return admission.ErrDuplicate
	}
	return tm.enqueueReserved(ctx, req, w)
}

// reserveLocked records a waiter for task id, or returns nil if it has
// one already. A wait before it queues again (deferQueue) is over.
func (tm *term) reserveLocked(id string) *waiter {
	if tm.waiting[id] != nil {
		return nil
	}
	if d := tm.deferred[id]; d != nil {
		d.Stop()
		delete(tm.deferred, id)
	}
	w := new(waiter)
	tm.waiting[id] = w
	return w
}

// unreserve forgets waiter w of task id, if it is still its waiter.
func (tm *term) unreserve(id string, w *waiter) {
	tm.mu.Lock()
	if tm.waiting[id] == w {
		delete(tm.waiting, id)
	}
	tm.mu.Unlock()
}

// enqueueReserved queues req, whose waiter w is recorded, in the engine.
func (tm *term) enqueueReserved(ctx context.Context, req admission.Request, w *waiter) error {
	id := req.ID
	tm.mu.Lock()
	if req.Place == 0 {
		req.Place = tm.places[id]
	}
	w.cands = req.Candidates
	tm.mu.Unlock()
	err := tm.engine.Enqueue(ctx, req, func(l admission.Lease, err error) { tm.settle(id, w, l, err) })
	if err != nil {
		tm.unreserve(id, w)
	}
	return err
}

// settle hears how waiter w of task id ended: admitted with l, which
// the term holds from now on and the dispatcher commits, or err.
func (tm *term) settle(id string, w *waiter, l admission.Lease, err error) {
	tm.mu.Lock()
	if tm.waiting[id] == w {
		delete(tm.waiting, id)
	}
	if err == nil {
		// Held before the commit: once it commits, River may run the job
		// at once, and the lease must be found here.
		tm.leases[id] = &held{lease: l, pending: true}
		tm.places[id] = l.Place
	}
	tm.mu.Unlock()
	if err != nil {
		tm.s.waitEnded(id, err)
		return
	}
	select {
	case tm.admitted <- admittedTask{id: id, lease: l}:
	case <-tm.stop:
		// The term ended: its engine, and the lease with it, are gone.
	}
}

// lease returns the lease held for task id, if one is.
func (tm *term) lease(id string) (admission.Lease, bool) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	h := tm.leases[id]
	if h == nil || h.restoring {
		return admission.Lease{}, false
	}
	return h.lease, true
}

// setLease records l as the lease held for task id.
func (tm *term) setLease(id string, l admission.Lease) {
	tm.mu.Lock()
	tm.leases[id] = &held{lease: l}
	tm.keepPlaceLocked(id, l)
	tm.mu.Unlock()
}

// keepPlaceLocked records restored lease l's place as task id's, unless
// an admission in this term gave it one already.
func (tm *term) keepPlaceLocked(id string, l admission.Lease) {
	if _, ok := tm.places[id]; !ok {
		tm.places[id] = l.Place
	}
}

// forget forgets the place of task id, which ended.
func (tm *term) forget(id string) {
	tm.mu.Lock()
	delete(tm.places, id)
	tm.mu.Unlock()
}

// take forgets the lease held for task id and returns it, for its
// holder to release.
func (tm *term) take(id string) (admission.Lease, bool) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	h := tm.leases[id]
	delete(tm.leases, id)
	if h == nil || h.restoring {
		return admission.Lease{}, false
	}
	return h.lease, true
}

// restore gives an admitted task back the lease it held, in the term's
// engine; the caller records it.
func (tm *term) restore(ctx context.Context, t weir.Task) (admission.Lease, error) {
	req, err := tm.s.request(ctx, t)
	if err != nil {
		return admission.Lease{}, err
	}
	cand := -1
	for i, c := range req.Candidates {
		for _, n := range c.Needs {
			// Its platform model's scope, or the acceptance copy of it.
			if pm, ok := weir.PlatformModelOfScope(n.Scope); ok && pm == t.PlatformModel {
				cand = i
			}
		}
	}
	if cand < 0 {
		return admission.Lease{}, errors.New("platform model " + t.PlatformModel + " is no longer a candidate")
	}
	req.ID = t.ID + "/restored"
	return tm.engine.Restore(ctx, req, cand)
}

// dispatch commits admissions: each admitted task's status change and
// its River job in one transaction, batched while admissions keep
// coming.
func (tm *term) dispatch() {
	defer close(tm.done)
	batch := make([]admittedTask, 0, 64)
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
	applied, errs, err := tm.apply(ctx, batch)
	if isCommitFault(err) && len(batch) > 1 {
		for i := range batch {
			one, oneErrs, _ := tm.apply(ctx, batch[i:i+1])
			applied[i], errs[i] = one[0], oneErrs[0]
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
	var back []admission.Lease
	var moved, poison, again []string
	tm.mu.Lock()
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
		back = append(back, a.lease)
		switch {
		case errs[i] == nil:
			moved = append(moved, a.id)
		case !isCommitFault(errs[i]), ended:
		case !storeFault:
			poison = append(poison, a.id)
		default:
			if at, ok := tm.refusedAt[a.id]; ok && tm.okCommits > at {
				poison = append(poison, a.id)
				break
			}
			tm.refusedAt[a.id] = tm.okCommits
			again = append(again, a.id)
		}
		if errs[i] == nil || slices.Contains(poison, a.id) {
			delete(tm.refusedAt, a.id)
		}
	}
	tm.mu.Unlock()
	tm.sync.Unlock()
	if tm.fleet {
		// A task that was no longer queued: cancelled, or admitted by
		// the term before this one, whose late commit the ledger looks
		// at now rather than at its next poll (it restores the lease).
		for _, id := range moved {
			tm.post(notice{id: id})
		}
	}
	for i := range batch {
		if errs[i] == nil && applied[i] {
			s.cfg.Metrics.TaskTransition(weir.TaskAdmitted)
		}
	}
	// Not admitted after all: the capacity goes back.
	for _, l := range back {
		tm.s.dropped("release", tm.engine.Release(ctx, l.ID, l.Owner))
	}
	for i, a := range batch {
		if !slices.Contains(poison, a.id) {
			continue
		}
		s.logger.Error("the store refused one task's admission while it took others'; the task fails", "task", a.id, "error", errs[i])
		if _, ferr := s.finishID(ctx, a.id, []weir.TaskStatus{weir.TaskQueued}, weir.TaskUpdate{Status: weir.TaskFailed,
			ErrorCode: codeDispatchFailed, ErrorMessage: "the gateway could not record this task's admission; it was not started"}); ferr != nil {
			// Still queued in the store: it must not be left in no queue.
			tm.queueAgain(a.id, commitBackoff(1))
		}
	}
	switch {
	case errors.Is(err, ErrDeposed):
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
	for _, id := range again {
		tm.queueAgain(id, wait)
	}
	s.logger.Error("admission commit failed; tasks queue again", "tasks", len(again), "failures_in_a_row", tm.commitFails,
		"after_ms", wait.Milliseconds(), "error", err)
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
			if tm.fleet {
				held, err := tx.fence(ctx, s.cfg.Replica, tm.epoch)
				if err != nil {
					return err
				}
				if !held {
					return fmt.Errorf("%w: epoch %d", ErrDeposed, tm.epoch)
				}
			}
			for i, a := range batch {
				pm := ""
				for _, n := range a.lease.Needs {
					if name, ok := weir.PlatformModelOfScope(n.Scope); ok {
						pm = name
					}
				}
				cand := a.lease.Candidate
				ok, err := tx.taskUpdate(ctx, &weir.TaskUpdateParams{ID: a.id, Update: weir.TaskUpdate{
					From: []weir.TaskStatus{weir.TaskQueued}, Status: weir.TaskAdmitted,
					PlatformModel: pm, Candidate: &cand, AdmittedAt: now,
				}})
				if err != nil {
					return err
				}
				if !ok {
					continue // cancelled meanwhile
				}
				if err := tx.jobInsert(ctx, RunArgs{TaskID: a.id}, nil); err != nil {
					return err
				}
				applied[i] = true
			}
			return nil
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

// actions are what the ledger decided from one read of the store, done
// once the read's locks are let go: engine calls are never made under
// them.
type actions struct {
	release []admission.Lease
	cancel  []string
	restore []weir.Task
	queue   []queueAction
	requeue []requeueAction
}

// queueAction queues task t as waiter w (recorded already).
type queueAction struct {
	t weir.Task
	w *waiter
}

// requeueAction queues again a task its worker sent back (a notice).
type requeueAction struct {
	t weir.Task
	n notice
}

// decideLocked decides what the term does about task t as the store
// holds it (gone: not there, or deleted), having heard n of it (the zero
// notice: nothing, a look at the store). It holds tm.mu, and tm.sync
// from before the read of t.
func (tm *term) decideLocked(a *actions, t weir.Task, gone bool, n notice) {
	id := t.ID
	h, w := tm.leases[id], tm.waiting[id]
	switch {
	case gone || t.Status.Terminal():
		if w != nil {
			a.cancel = append(a.cancel, id)
		}
		// A pending lease is the dispatcher's: its commit finds the task
		// ended and gives the lease back.
		if h != nil && !h.pending {
			delete(tm.leases, id)
			if !h.restoring {
				a.release = append(a.release, h.lease)
			}
		}
		if d := tm.deferred[id]; d != nil {
			d.Stop()
			delete(tm.deferred, id)
		}
		delete(tm.refused, id)
		delete(tm.rounds, id)
		delete(tm.unrestorable, id)
		delete(tm.places, id)
	case t.Status == weir.TaskQueued:
		if n.kind == noticeDue {
			delete(tm.deferred, id)
		}
		if h != nil {
			if h.pending || h.restoring {
				return
			}
			// Committed, and queued again since: its worker sent it back
			// (requeue, retryFailedJob). The notice of it says how it
			// queues again; without one, the next look queues it.
			delete(tm.leases, id)
			a.release = append(a.release, h.lease)
			if n.kind != noticeRequeue {
				return
			}
		}
		switch {
		case w != nil:
		case n.kind == noticeRequeue:
			if d := tm.deferred[id]; d != nil {
				d.Stop()
				delete(tm.deferred, id)
			}
			a.requeue = append(a.requeue, requeueAction{t: t, n: n})
		case tm.deferred[id] != nil:
			// Waiting out its delay.
		default:
			delete(tm.refused, id)
			a.queue = append(a.queue, queueAction{t: t, w: tm.reserveLocked(id)})
		}
	default: // admitted, running
		if w != nil {
			// Admitted by another term (its commit came after this term
			// read the task as queued): this waiter goes, and the next
			// look restores the lease.
			a.cancel = append(a.cancel, id)
			return
		}
		if h == nil {
			tm.leases[id] = &held{restoring: true}
			a.restore = append(a.restore, t)
		}
	}
}

// act does what was decided, and returns how many leases it restored and
// tasks it queued.
func (tm *term) act(ctx context.Context, a actions) (restored, queued int) {
	s := tm.s
	for _, l := range a.release {
		tm.s.dropped("release", tm.engine.Release(ctx, l.ID, l.Owner))
	}
	for _, id := range a.cancel {
		tm.s.dropped("cancel", tm.engine.Cancel(ctx, id))
	}
	for _, t := range a.restore {
		l, err := tm.restore(ctx, t)
		tm.mu.Lock()
		kept := false
		if h := tm.leases[t.ID]; h != nil && h.restoring {
			if err == nil {
				tm.leases[t.ID] = &held{lease: l}
				tm.keepPlaceLocked(t.ID, l)
				kept = true
			} else {
				delete(tm.leases, t.ID)
			}
		}
		warn := err != nil && !tm.unrestorable[t.ID]
		if err != nil && tm.fleet {
			tm.unrestorable[t.ID] = true
		}
		tm.mu.Unlock()
		switch {
		case err == nil && !kept:
			// The task ended while its lease was restored.
			tm.s.dropped("release", tm.engine.Release(ctx, l.ID, l.Owner))
		case err == nil:
			restored++
		case warn && tm.fleet:
			s.logger.Warn("task lease not restored; the task runs uncounted, and the ledger tries again at each poll", "task", t.ID, "error", err)
		case warn:
			s.logger.Warn("task lease not restored; its job will retry", "task", t.ID, "error", err)
		}
	}
	for _, q := range a.queue {
		if q.w == nil {
			continue
		}
		req, err := s.request(ctx, q.t)
		if err != nil {
			tm.unreserve(q.t.ID, q.w)
			s.failQueued(ctx, q.t.ID, err)
			continue
		}
		if err := tm.enqueueReserved(ctx, req, q.w); err != nil {
			s.queueFailed(ctx, q.t.ID, err)
			continue
		}
		queued++
	}
	for _, r := range a.requeue {
		tm.requeue(ctx, r.t, r.n)
	}
	return restored, queued
}

// resync reads every task that has not ended and makes the term hold
// what the store says: a lease for each admitted and running task,
// restored if it has none; a waiter for each queued one, queued in
// submission order; no lease or waiter for a task that ended. At a term's
// start it is recovery; in a fleet, also the ledger's poll.
func (tm *term) resync(ctx context.Context) (restored, queued int, err error) {
	tm.sync.Lock()
	tm.mu.Lock()
	before := make(map[string]*waiter, len(tm.waiting))
	for id, w := range tm.waiting {
		before[id] = w
	}
	tm.mu.Unlock()
	tasks, err := tm.s.store.TaskList(ctx, weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning}})
	if err != nil {
		tm.sync.Unlock()
		return 0, 0, err
	}
	var a actions
	live := make(map[string]bool, len(tasks))
	tm.mu.Lock()
	// Leases first, so that capacity held is counted before anything
	// queued is admitted.
	for _, t := range tasks {
		live[t.ID] = true
		if t.Status != weir.TaskQueued {
			tm.decideLocked(&a, t, false, notice{})
		}
	}
	for _, t := range tasks {
		if t.Status == weir.TaskQueued {
			tm.decideLocked(&a, t, false, notice{})
		}
	}
	// What the term holds for tasks that have ended (or been deleted).
	// Waiters queued since the read may be of tasks created since.
	for id, h := range tm.leases {
		if !live[id] && !h.pending {
			tm.decideLocked(&a, weir.Task{ID: id}, true, notice{})
		}
	}
	for id, w := range before {
		if !live[id] && tm.waiting[id] == w {
			tm.decideLocked(&a, weir.Task{ID: id}, true, notice{})
		}
	}
	tm.mu.Unlock()
	tm.sync.Unlock()
	restored, queued = tm.act(ctx, a)
	return restored, queued, nil
}
