package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// The fleet leader's ledger: a term (term.go) that learns what the other
// replicas did to tasks from notices (Notifier) and, as the safety net,
// from a jittered poll of the store, and acts on each as decideLocked
// says. One goroutine (lead) does all of it, in order, so that what it
// reads of the store and what it holds move together.

// noticeKind says what a notice tells of a task.
type noticeKind string

const (
	// noticeQueued: the task was submitted, and waits to be queued.
	noticeQueued noticeKind = "queued"
	// noticeCancelled: the task was cancelled. Every replica hears it: a
	// worker waiting for the task's next poll stops waiting.
	noticeCancelled noticeKind = "cancelled"
	// noticeEnded: the task's worker is done with its admission (the
	// task ended); the ledger releases its lease.
	noticeEnded noticeKind = "ended"
	// noticeRequeue: the task's worker sent it back to the queue; the
	// notice says how it queues again.
	noticeRequeue noticeKind = "requeue"
	// noticeDue: the ledger's own, never sent: a task's wait before it
	// queues again is over.
	noticeDue noticeKind = "due"
)

// notice is what a replica tells the ledger of a task.
type notice struct {
	kind noticeKind
	id   string
	// refused, after and failed are a requeue's: the platform models
	// that refused the task (to leave out while another candidate is
	// left); how long it waits before it queues for all its candidates;
	// and whether the refusals were failures (5xx, unreachable) rather
	// than a full platform (429), which end the task once every
	// candidate has failed it MaxAttempts times.
	refused []string
	after   time.Duration
	failed  bool
}

// requeueParams is a requeue notice's event after its kind.
type requeueParams struct {
	Refused []string `json:"refused,omitempty"`
	AfterMS int64    `json:"after_ms,omitempty"`
	Failed  bool     `json:"failed,omitempty"`
}

// event is n as a Notifier event.
func (n notice) event() string {
	if n.kind != noticeRequeue {
		return string(n.kind)
	}
	p, _ := json.Marshal(requeueParams{Refused: n.refused, AfterMS: n.after.Milliseconds(), Failed: n.failed})
	return string(n.kind) + " " + string(p)
}

// parseNotice reads a Notifier event of task id. An event it does not
// know is a look at the task all the same.
func parseNotice(event, id string) notice {
	kind, params, _ := strings.Cut(event, " ")
	n := notice{kind: noticeKind(kind), id: id}
	if n.kind == noticeRequeue {
		var p requeueParams
		if json.Unmarshal([]byte(params), &p) != nil {
			return notice{id: id}
		}
		n.refused, n.after, n.failed = p.Refused, time.Duration(p.AfterMS)*time.Millisecond, p.Failed
	}
	return n
}

// inboxMax bounds the notices waiting for the ledger; past it they are
// dropped for a resync, which reads everything they could say but how a
// requeued task queues again.
const inboxMax = 65536

// post hands a notice to the ledger.
func (tm *term) post(n notice) {
	tm.mu.Lock()
	if len(tm.inbox) >= inboxMax {
		tm.inbox, tm.resyncWanted = nil, true
	} else {
		tm.inbox = append(tm.inbox, n)
	}
	tm.mu.Unlock()
	tm.signal()
}

// wantResync asks the ledger to read everything again: notices may have
// been lost.
func (tm *term) wantResync() {
	tm.mu.Lock()
	tm.resyncWanted = true
	tm.mu.Unlock()
	tm.signal()
}

func (tm *term) signal() {
	select {
	case tm.wake <- struct{}{}:
	default:
	}
}

// begin runs a fleet term: its dispatcher, and its ledger.
func (tm *term) begin() {
	tm.startDispatch()
	tm.looping.Store(true)
	go tm.lead()
}

// leadRetry is how long the ledger waits before it tries again a start
// that failed (the store could not be read).
const leadRetry = time.Second

// lead starts the term — the workers scope, then recovery — and then
// keeps the ledger until the term ends.
func (tm *term) lead() {
	defer close(tm.loopDone)
	s := tm.s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-tm.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// The replica's own scopes reach the leader when its engine syncs
	// with it: a task queued before that would find its platform's scope
	// unknown.
	if r, ok := s.engine.(interface{ Ready(context.Context) error }); ok {
		_ = r.Ready(ctx)
	}
	for {
		err := s.setWorkersScope(ctx, tm)
		if err == nil {
			break
		}
		s.logger.Warn("the workers scope could not be set in the fleet term; trying again", "error", err)
		if !tm.pause(leadRetry) {
			return
		}
	}
	start := s.clock.Now()
	for {
		restored, queued, err := tm.resync(ctx, true)
		if err == nil {
			s.logger.Info("tasks recovered for the fleet term", "restored", restored, "queued", queued,
				"took_ms", float64(s.clock.Now().Sub(start).Microseconds())/1000)
			break
		}
		s.logger.Warn("tasks could not be recovered for the fleet term; trying again", "error", err)
		if !tm.pause(leadRetry) {
			return
		}
	}
	tm.ready.Store(true)
	poll := make(chan struct{}, 1)
	var timer clock.Timer
	// took is how long the last poll took to read and decide, which
	// paces the next (pollPace).
	arm := func(took time.Duration) {
		d := max(s.cfg.FleetPoll/2+rand.N(s.cfg.FleetPoll), pollPace*took)
		timer = s.clock.AfterFunc(d, func() {
			select {
			case poll <- struct{}{}:
			default:
			}
		})
	}
	arm(0)
	defer func() { timer.Stop() }()
	for {
		select {
		case <-tm.stop:
			return
		case <-tm.wake:
			tm.drain(ctx)
		case <-poll:
			tm.renew(ctx)
			began := s.clock.Now()
			if _, _, err := tm.resync(ctx, false); err != nil && ctx.Err() == nil {
				s.logger.Warn("the task ledger's poll could not read the store", "error", err)
			}
			arm(s.clock.Now().Sub(began))
		}
	}
}

// pollPace paces the ledger's poll by its own cost: the next poll waits
// at least pollPace times as long as the last one took, so that with
// many tasks not ended the poll takes a small share of the replica's
// time, whatever Config.FleetPoll says.
const pollPace = 10

// pause waits d on the service's clock; false if the term ends first.
func (tm *term) pause(d time.Duration) bool {
	done := make(chan struct{})
	t := tm.s.clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-tm.stop:
		return false
	}
}

// noticeBatch is how many notices the ledger reads the tasks of in one
// turn of the store's reads (tm.sync): one turn a notice would let each
// wait for a whole commit of admissions while they come hundreds a
// second.
const noticeBatch = 128

// drain handles the notices that came, after a resync if one is wanted:
// the ended tasks' first (releaseEnded), then one turn's batch of the
// others; what is left goes back ahead of the inbox for the next
// round, so that a task that ends meanwhile waits for one turn at most.
func (tm *term) drain(ctx context.Context) {
	tm.mu.Lock()
	inbox, resync := tm.inbox, tm.resyncWanted
	tm.inbox, tm.resyncWanted = nil, false
	tm.mu.Unlock()
	if resync {
		if _, _, err := tm.resync(ctx, false); err != nil && ctx.Err() == nil {
			tm.s.logger.Warn("the task ledger could not resync; its poll tries again", "error", err)
		}
	}
	inbox = tm.releaseEnded(ctx, inbox)
	batch, left := nextBatch(inbox)
	if len(batch) > 0 && ctx.Err() == nil {
		left = append(tm.reconcile(ctx, batch), left...)
	}
	if len(left) == 0 || ctx.Err() != nil {
		return
	}
	tm.mu.Lock()
	tm.inbox = append(left, tm.inbox...)
	tm.mu.Unlock()
	tm.signal()
}

// nextBatch splits notices into the batch the ledger reads in one turn
// and those left for the next: at most noticeBatch, of distinct tasks (a
// second notice of a task waits for what the first decided to be done).
// A notice repeated at once says nothing new, unless it carries how the
// task queues again, and is dropped.
func nextBatch(notices []notice) (batch, left []notice) {
	in := make(map[string]bool, min(len(notices), noticeBatch))
	for i, n := range notices {
		if i > 0 && n.kind != noticeRequeue && n.kind != noticeDue && notices[i-1].id == n.id {
			continue
		}
		if len(batch) == noticeBatch || in[n.id] {
			return batch, notices[i:]
		}
		batch = append(batch, n)
		in[n.id] = true
	}
	return batch, nil
}

// releaseEnded reads the tasks that notices say ended, outside the
// dispatcher's turn (tm.sync), and acts on those it finds ended: an
// ended task never changes status again, so no commit of admissions can
// undo what is decided from its read, and its lease goes back without
// waiting for a commit to end or for the notices ahead of it. It returns
// the other notices, in order; the ended ones it could not decide on
// among them are read again in turn.
func (tm *term) releaseEnded(ctx context.Context, notices []notice) []notice {
	var ended []notice
	seen := make(map[string]bool)
	for _, n := range notices {
		if n.kind == noticeEnded && !seen[n.id] {
			seen[n.id] = true
			ended = append(ended, n)
		}
	}
	if len(ended) == 0 {
		return notices
	}
	decided := make(map[string]bool, len(ended))
	for chunk := range slices.Chunk(ended, readBatch) {
		if ctx.Err() != nil {
			return notices
		}
		var a actions
		read := tm.readMany(ctx, noticeIDs(chunk))
		for _, n := range chunk {
			decided[n.id] = tm.decideEnded(&a, n, read)
		}
		tm.act(ctx, a)
	}
	return slices.DeleteFunc(notices, func(n notice) bool { return n.kind == noticeEnded && decided[n.id] })
}

// decideEnded decides on ended notice n from what read says of its task,
// and reports whether it did: only if the task has ended (or is gone)
// and its admission is not being committed.
func (tm *term) decideEnded(a *actions, n notice, read func(id string) (weir.Task, error)) bool {
	t, err := read(n.id)
	gone := errors.Is(err, weir.ErrNotFound)
	switch {
	case err != nil && !gone:
		return false
	case gone:
		t = weir.Task{ID: n.id}
	case !t.Status.Terminal() && !t.Deleted():
		return false
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if h := tm.leases[n.id]; h != nil && h.pending {
		// Its commit is under way, and may have landed before the task
		// ran and ended: the commit, not this read, says which.
		return false
	}
	tm.decideLocked(a, t, gone || t.Deleted(), n)
	return true
}

// reconcile reads the task of each of ns, notices of distinct tasks, and
// acts on what the store says of it and what its notice says. It
// returns the notices it left for the next round.
//
// The read runs outside the dispatcher's turn (tm.sync), as resync's
// does: the commits of admissions made meanwhile record their tasks
// (tm.readCommits), and the notices of those, whose status the read may
// have taken from before the commit, are left for the next round, which
// reads them again.
func (tm *term) reconcile(ctx context.Context, ns []notice) (left []notice) {
	tm.sync.Lock()
	tm.readCommits = make(map[string]bool)
	tm.sync.Unlock()
	read := tm.readMany(ctx, noticeIDs(ns))
	var a actions
	tm.sync.Lock()
	committed := tm.readCommits
	tm.readCommits = nil
	for _, n := range ns {
		if committed[n.id] {
			left = append(left, n)
			continue
		}
		t, err := read(n.id)
		gone := errors.Is(err, weir.ErrNotFound)
		if err != nil && !gone {
			tm.s.logger.Warn("a task the ledger heard of could not be read; its poll looks again", "task", n.id, "error", err)
			continue
		}
		if gone {
			t = weir.Task{ID: n.id}
		}
		tm.mu.Lock()
		tm.decideLocked(&a, t, gone || t.Deleted(), n)
		tm.mu.Unlock()
	}
	tm.sync.Unlock()
	tm.act(ctx, a)
	return left
}

// requeue queues again task t, which its worker sent back as n says: at
// once on the candidates no platform that refused it offers, if one is
// left (refusals gather here from every replica's workers until it
// queues for all its candidates again); otherwise for all of them once
// n.after has passed, or, if every candidate refused it, after a backoff
// that grows each time they all have, so that platforms that keep
// refusing do not pass it back and forth. Platforms that all keep
// failing it (not full: failing) end it after MaxAttempts rounds, as
// River's retries would on one replica.
func (tm *term) requeue(ctx context.Context, t weir.Task, n notice) {
	s := tm.s
	t.PlatformModel = ""
	req, err := s.request(ctx, t)
	if err != nil {
		s.requeueFailed(ctx, t.ID, err, tm.deferQueue)
		return
	}
	wait := n.after
	tm.mu.Lock()
	if len(n.refused) > 0 {
		refused := tm.refused[t.ID]
		for _, pm := range n.refused {
			if !slices.Contains(refused, pm) {
				refused = append(refused, pm)
			}
		}
		tm.refused[t.ID] = refused
		others := req.Candidates
		for _, pm := range refused {
			others = withoutScope(others, weir.PlatformModelScope(pm))
		}
		if len(others) > 0 {
			w := tm.reserveLocked(t.ID)
			tm.mu.Unlock()
			if w == nil {
				return
			}
			req.Candidates = others
			if err := tm.enqueueReserved(ctx, req, w); err != nil {
				s.queueFailed(ctx, t.ID, err)
			}
			return
		}
		tm.rounds[t.ID]++
		if rounds := tm.rounds[t.ID]; n.failed && rounds >= s.cfg.MaxAttempts {
			delete(tm.refused, t.ID)
			tm.mu.Unlock()
			_, _ = s.finishID(ctx, t.ID, []weir.TaskStatus{weir.TaskQueued}, weir.TaskUpdate{Status: weir.TaskFailed,
				ErrorCode: "upstream_error", ErrorMessage: fmt.Sprintf("every candidate failed the task's submit, %d times", rounds)})
			return
		}
		wait = max(wait, s.retryBackoff(tm.rounds[t.ID]-1))
	}
	delete(tm.refused, t.ID)
	var w *waiter
	if wait <= 0 {
		w = tm.reserveLocked(t.ID)
	}
	tm.mu.Unlock()
	switch {
	case wait > 0:
		tm.deferQueue(t.ID, wait)
	case w != nil:
		if err := tm.enqueueReserved(ctx, req, w); err != nil {
			s.queueFailed(ctx, t.ID, err)
		}
	}
}

// deferQueue queues task id again, if it is still queued then, once d
// has passed; until then the poll leaves it waiting.
func (tm *term) deferQueue(id string, d time.Duration) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if old := tm.deferred[id]; old != nil {
		old.Stop()
	}
	tm.deferred[id] = tm.s.clock.AfterFunc(d, func() { tm.post(notice{kind: noticeDue, id: id}) })
}

// readBatch is how many tasks the ledger reads in one query.
const readBatch = 512

// readMany reads the tasks of ids, distinct, before it returns: in one
// query where the store can (ManyReader), each alone where it cannot or
// the query failed. It returns how to get each: the task read, or the
// error of its read (weir.ErrNotFound: not stored).
func (tm *term) readMany(ctx context.Context, ids []string) func(id string) (weir.Task, error) {
	type result struct {
		t   weir.Task
		err error
	}
	got := make(map[string]result, len(ids))
	read := func(id string) (weir.Task, error) {
		if r, ok := got[id]; ok {
			return r.t, r.err
		}
		return weir.Task{}, weir.ErrNotFound
	}
	if mr, ok := tm.s.store.(ManyReader); ok && len(ids) > 0 {
		tasks, err := mr.TaskGetMany(ctx, ids)
		if err == nil {
			for _, t := range tasks {
				got[t.ID] = result{t: t}
			}
			return read
		}
		tm.s.logger.Warn("the tasks the ledger reads could not be read at once; it reads them one by one", "tasks", len(ids), "error", err)
	}
	for _, id := range ids {
		t, err := tm.s.store.TaskGet(ctx, id)
		got[id] = result{t, err}
	}
	return read
}

// noticeIDs are the ids of the tasks of ns.
func noticeIDs(ns []notice) []string {
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.id
	}
	return ids
}

// deferral is a wait, in term.deferred, before a task of a term alone
// queues again (deferLocal). Its timer and stopped are guarded by the
// term's mu; timer is nil until the wait starts.
type deferral struct {
	timer   clock.Timer
	stopped bool
}

// Stop keeps the wait from starting, or its timer from running; the
// term's mu is held.
func (h *deferral) Stop() bool {
	h.stopped = true
	return h.timer == nil || h.timer.Stop()
}

// deferLocal records task id in tm.deferred, where decideLocked sees it
// waiting out its delay, and returns start, which starts the wait: f is
// called d after start is, unless the wait was stopped first (the task
// queued, or ended). This is the service's enqueueAfter, on a term
// alone. An earlier wait of the task still runs its f, which finds what
// the store says then.
func (tm *term) deferLocal(id string, f func()) (start func(d time.Duration)) {
	h := &deferral{}
	tm.mu.Lock()
	tm.deferred[id] = h
	tm.mu.Unlock()
	return func(d time.Duration) {
		tm.mu.Lock()
		defer tm.mu.Unlock()
		if h.stopped {
			return
		}
		h.timer = tm.s.clock.AfterFunc(d, func() {
			tm.mu.Lock()
			if tm.deferred[id] == clock.Timer(h) {
				delete(tm.deferred, id)
			}
			tm.mu.Unlock()
			f()
		})
	}
}

// renew extends the leases the ledger holds that are past half their
// life: in a fleet the ledger, not the worker, holds a task's lease, for
// as long as the store says the task is admitted or running.
func (tm *term) renew(ctx context.Context) {
	s := tm.s
	now := s.clock.Now()
	type due struct {
		id string
		l  admission.Lease
	}
	var dues []due
	tm.mu.Lock()
	for id, h := range tm.leases {
		if !h.pending && !h.restoring && !h.lease.Expires.IsZero() && h.lease.Expires.Sub(now) < s.cfg.LeaseTTL/2 {
			dues = append(dues, due{id, h.lease})
		}
	}
	tm.mu.Unlock()
	for _, d := range dues {
		exp, err := tm.engine.Renew(ctx, d.l.ID, d.l.Owner)
		tm.mu.Lock()
		if h := tm.leases[d.id]; h != nil && h.lease.ID == d.l.ID && !h.pending {
			switch {
			case err == nil:
				h.lease.Expires = exp
			case errors.Is(err, admission.ErrLeaseNotHeld):
				// Expired: the next look restores it.
				delete(tm.leases, d.id)
			}
		}
		tm.mu.Unlock()
	}
}
