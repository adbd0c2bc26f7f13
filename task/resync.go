package task

import (
	"context"
	"errors"
	"slices"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// The term against the store: what it decides from one read of a task
// (decideLocked), what it does about it once the read's locks are let
// go (act), and the read of every task that has not ended (resync), at
// a term's start and, in a fleet, as the ledger's poll.

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
// from before the read of t, or since a read during which no admission
// of t was committed (tm.readCommits), unless t had ended (or was gone)
// then: no commit changes such a task.
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
			// A planner that cannot plan now (the store failing) leaves
			// the task queued, to queue after a backoff; one that finds
			// no candidate ends it.
			tm.unreserve(q.t.ID, q.w)
			s.requeueFailed(ctx, q.t.ID, err, tm.later())
			continue
		}
		if err := tm.enqueueReserved(ctx, req, q.w); err != nil {
			// A full queue (more queued than the backlog's bound, after
			// it was lowered) waits too.
			s.requeueFailed(ctx, q.t.ID, err, tm.later())
			continue
		}
		s.forgetDeferrals(q.t.ID)
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
// start it is recovery, which reads every task whole; in a fleet, also
// the ledger's poll, which reads the tasks' states alone where the store
// lists them (StateLister), and whole only the tasks it acts on
// (readLive).
//
// The read runs outside the dispatcher's turn (tm.sync), so that no
// commit of admissions waits for it: the commits made meanwhile record
// their tasks (tm.readCommits), and the read decides nothing about
// those, whose status it may have read from before the commit; the next
// look does. Only the ledger's goroutine resyncs, one read at a time.
func (tm *term) resync(ctx context.Context, whole bool) (restored, queued int, err error) {
	tm.sync.Lock()
	tm.mu.Lock()
	before := make(map[string]*waiter, len(tm.waiting))
	for id, w := range tm.waiting {
		before[id] = w
	}
	tm.mu.Unlock()
	tm.readCommits = make(map[string]bool)
	tm.sync.Unlock()
	tasks, err := tm.readLive(ctx, whole)
	tm.sync.Lock()
	committed := tm.readCommits
	tm.readCommits = nil
	if err != nil {
		tm.sync.Unlock()
		return 0, 0, err
	}
	a := tm.decideListedLocked(tasks, before, committed)
	tm.sync.Unlock()
	restored, queued = tm.act(ctx, a)
	return restored, queued, nil
}

// liveStatuses are the statuses of the tasks that have not ended.
var liveStatuses = []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning}

// listed is a task as resync read it: its state, and the whole task if
// it was read whole (nil otherwise).
type listed struct {
	weir.TaskState
	whole *weir.Task
}

// task is the task l says, whole or as its state alone.
func (l listed) task() weir.Task {
	if l.whole != nil {
		return *l.whole
	}
	return weir.Task{ID: l.ID, Seq: l.Seq, Status: l.Status}
}

// readLive reads every task that has not ended, in submission order:
// whole if asked or if the store lists no states; otherwise each task's
// state, and whole only the tasks the term holds nothing for (no lease,
// no waiter, no wait before it queues again), which a look queues or
// restores the lease of (needsTaskLocked). A task read whole that is no
// longer stored has ended, and is left out.
func (tm *term) readLive(ctx context.Context, whole bool) ([]listed, error) {
	f := weir.TaskFilter{Statuses: liveStatuses}
	sl, ok := tm.s.store.(StateLister)
	if whole || !ok {
		tasks, err := tm.s.store.TaskList(ctx, f)
		out := make([]listed, len(tasks))
		for i := range tasks {
			t := &tasks[i]
			out[i] = listed{weir.TaskState{Seq: t.Seq, ID: t.ID, Status: t.Status}, t}
		}
		return out, err
	}
	states, err := sl.TaskStateList(ctx, f)
	if err != nil {
		return nil, err
	}
	var ids []string
	tm.mu.Lock()
	for _, st := range states {
		if tm.needsTaskLocked(st.ID, st.Status) {
			ids = append(ids, st.ID)
		}
	}
	tm.mu.Unlock()
	read := make(map[string]*weir.Task, len(ids))
	for chunk := range slices.Chunk(ids, readBatch) {
		get := tm.readMany(ctx, chunk)
		for _, id := range chunk {
			t, err := get(id)
			switch {
			case errors.Is(err, weir.ErrNotFound):
			case err != nil:
				return nil, err
			default:
				read[id] = &t
			}
		}
	}
	wanted := make(map[string]bool, len(ids))
	for _, id := range ids {
		wanted[id] = true
	}
	out := make([]listed, 0, len(states))
	for _, st := range states {
		t, ok := read[st.ID]
		switch {
		case ok:
			out = append(out, listed{weir.TaskState{Seq: t.Seq, ID: t.ID, Status: t.Status}, t})
		case !wanted[st.ID]:
			out = append(out, listed{TaskState: st})
		}
	}
	return out, nil
}

// needsTaskLocked reports whether decideLocked, looking at task id in
// status st with no notice of it, acts on the whole task: it queues a
// queued task the term holds nothing for, and restores the lease of an
// admitted or running one. It holds tm.mu.
func (tm *term) needsTaskLocked(id string, st weir.TaskStatus) bool {
	if tm.leases[id] != nil || tm.waiting[id] != nil {
		return false
	}
	switch st {
	case weir.TaskQueued:
		return tm.deferred[id] == nil
	case weir.TaskAdmitted, weir.TaskRunning:
		return true
	}
	return false
}

// decideListedLocked decides what resync does from tasks, every task
// that had not ended as read, and before, the term's waiters then;
// committed are the tasks whose admissions were committed during the
// read, left alone, and so is a task read as its state alone that the
// term now needs whole (it holds nothing for it since the read): the
// next look reads it. It holds tm.sync, and takes tm.mu.
func (tm *term) decideListedLocked(tasks []listed, before map[string]*waiter, committed map[string]bool) actions {
	var a actions
	live := make(map[string]bool, len(tasks))
	tm.mu.Lock()
	defer tm.mu.Unlock()
	decide := func(l listed) {
		if committed[l.ID] || l.whole == nil && tm.needsTaskLocked(l.ID, l.Status) {
			return
		}
		tm.decideLocked(&a, l.task(), false, notice{})
	}
	// Leases first, so that capacity held is counted before anything
	// queued is admitted.
	for _, l := range tasks {
		live[l.ID] = true
		if l.Status != weir.TaskQueued {
			decide(l)
		}
	}
	for _, l := range tasks {
		if l.Status == weir.TaskQueued {
			decide(l)
		}
	}
	// What the term holds for tasks that have ended (or been deleted).
	// Waiters queued since the read may be of tasks created since.
	for id, h := range tm.leases {
		if !live[id] && !h.pending && !committed[id] {
			tm.decideLocked(&a, weir.Task{ID: id}, true, notice{})
		}
	}
	for id, w := range before {
		if !live[id] && tm.waiting[id] == w && !committed[id] {
			tm.decideLocked(&a, weir.Task{ID: id}, true, notice{})
		}
	}
	return a
}

// recoverPage is how many queued tasks a recovery reads and queues at a
// time: the head of a long queue is admitted while the rest is read.
const recoverPage = 5_000

// recoverActive gives a fresh term the leases of the admitted and running
// tasks: the first step of a recovery.
func (tm *term) recoverActive(ctx context.Context) (restored int, err error) {
	_, restored, _, err = tm.recoverList(ctx, weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskAdmitted, weir.TaskRunning}})
	return restored, err
}

// recoverQueued queues the queued tasks in a fresh term in submission
// order, page at a time: the second step of a recovery, once the
// first has restored the leases. Nothing else queues meanwhile, but a
// task sent back by its worker, whose waiter the read then finds.
func (tm *term) recoverQueued(ctx context.Context, page int) (queued int, err error) {
	f := weir.TaskFilter{Statuses: []weir.TaskStatus{weir.TaskQueued}, Limit: page}
	for {
		tasks, _, n, err := tm.recoverList(ctx, f)
		queued += n
		if err != nil || len(tasks) < f.Limit {
			return queued, err
		}
		f.AfterSeq = tasks[len(tasks)-1].Seq
	}
}

// recoverList reads the tasks f selects and decides about each, as
// resync does, then acts.
func (tm *term) recoverList(ctx context.Context, f weir.TaskFilter) (tasks []weir.Task, restored, queued int, err error) {
	tm.sync.Lock()
	tasks, err = tm.s.store.TaskList(ctx, f)
	if err != nil {
		tm.sync.Unlock()
		return nil, 0, 0, err
	}
	var a actions
	tm.mu.Lock()
	for _, t := range tasks {
		tm.decideLocked(&a, t, false, notice{})
	}
	tm.mu.Unlock()
	tm.sync.Unlock()
	restored, queued = tm.act(ctx, a)
	return tasks, restored, queued, nil
}
