package task

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// Several replicas (Deps.Leadership): see "Several replicas" in the package
// documentation.

// fleetLedger is the ledger of a replica of a fleet: the admission side
// is the term of the replica that leads (the fleet's Leadership gives
// it to this one while it does: followLead), and every replica tells that term's ledger (lead.go) what
// its workers and its API did to tasks, through notices.
type fleetLedger struct {
	s *Service
	// listenDone is closed when the listener of the replicas' notices
	// returns; stopListening ends it.
	listenDone    chan struct{}
	stopListening context.CancelFunc
}

var _ ledger = (*fleetLedger)(nil)

// start takes back the jobs this replica's previous run left running,
// listens for the replicas' notices, and begins the term this replica
// leads, if it was given one already.
func (fl *fleetLedger) start(ctx context.Context, workers func(context.Context) error) error {
	s := fl.s
	// River lets no two processes run with one client id at once, so
	// the jobs this id has running are this replica's previous run's.
	n, err := s.reclaimer.JobReclaimAttemptedBy(ctx, s.cfg.Replica, []string{RunArgs{}.Kind(), WebhookArgs{}.Kind()})
	if err != nil {
		return fmt.Errorf("reclaim the jobs of this replica's last run: %w", err)
	}
	if n > 0 {
		s.logger.Info("jobs left running by this replica's last run reclaimed", "jobs", n)
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.started = true
	fl.stopListening = cancel
	tm := s.term
	s.mu.Unlock()
	go fl.listen(lctx)
	if tm != nil {
		tm.begin()
	}
	return workers(ctx)
}

// stop ends the term this replica leads, tm, if any, and the listener.
func (fl *fleetLedger) stop(tm *term) {
	s := fl.s
	s.mu.Lock()
	if s.term == tm {
		s.term = nil
	}
	stopListening := fl.stopListening
	s.mu.Unlock()
	if tm != nil {
		tm.end()
		tm.wait()
	}
	if stopListening != nil {
		stopListening()
		<-fl.listenDone
	}
}

// submit queues a stored task at once if this replica leads, else
// through the leader's ledger, which hears of it (and its poll finds it
// if the notice is lost). A task that could not queue for its own fault
// ends; otherwise the ledger's next look queues it.
func (fl *fleetLedger) submit(ctx context.Context, t *weir.Task, req admission.Request) error {
	s := fl.s
	ctx = context.WithoutCancel(ctx)
	tm := s.current()
	if tm == nil {
		// The task is stored: its submission is answered without
		// waiting for the notice to go out.
		s.announce(ctx, t.ID)
		return nil
	}
	err := tm.enqueueSubmitted(ctx, req)
	if err == nil || !taskFault(err) {
		return nil // not queued for the engine's reason: the ledger's next look queues it
	}
	s.failQueued(ctx, t.ID, err)
	if ended, gerr := s.store.TaskGet(ctx, t.ID); gerr == nil {
		*t = ended
	}
	return err
}

// hold has nothing to do: the lease is the leader's ledger's, which
// holds and renews it while the store says the task runs.
func (fl *fleetLedger) hold(context.Context, weir.Task) error { return nil }

// done tells the leader's ledger: it releases the lease, and queues a
// task sent back again, on the candidates left or after the wait. On the
// replica that leads, the notice goes to its ledger in the process: no
// other replica acts on it, and a notice lost as the term passes is no
// worse than a NOTIFY lost then (the next leader reads the store).
func (fl *fleetLedger) done(ctx context.Context, id string, back *sentBack) {
	n := notice{kind: noticeEnded, id: id}
	if back != nil {
		n = notice{kind: noticeRequeue, id: id, refused: back.refused, after: back.after, failed: back.failed}
		if len(back.others) == 0 {
			n.refused = nil
		}
	}
	if tm := fl.s.current(); tm != nil {
		tm.post(n)
		return
	}
	fl.s.notify(ctx, n)
}

// cancel ends the task in the store, and every replica is told — the
// leader's ledger takes it out of the queue or releases its lease, and
// the replica running it stops waiting for its next poll.
func (fl *fleetLedger) cancel(ctx context.Context, t weir.Task, msg string) (weir.Task, error) {
	s := fl.s
	ok, err := s.finish(ctx, t, []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning},
		weir.TaskUpdate{Status: weir.TaskCancelled, ErrorCode: "cancelled", ErrorMessage: msg})
	if err != nil {
		return t, fmt.Errorf("cancel task %s: %w", t.ID, err)
	}
	if ok {
		s.endRun(t.ID)
		s.notify(ctx, notice{kind: noticeCancelled, id: t.ID})
		s.cancelUpstream(ctx, t)
	}
	return s.Get(ctx, t.ID)
}

// passing: a failure that is not the task's own (the term ending, the
// leader unreachable) leaves it queued for the ledger's next look.
func (fl *fleetLedger) passing(err error) bool { return !taskFault(err) }

// notifyTimeout bounds one notice: a store that does not answer must not
// hold a worker, and the ledger's poll catches up with a lost notice.
const notifyTimeout = 5 * time.Second

// followLead applies, in order, what the fleet says this replica leads,
// until ctx ends (Stop) or the subscription does.
func (s *Service) followLead(ctx context.Context, events <-chan admission.LeadEvent) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			switch e.Kind {
			case admission.TermBegan:
				s.lead(e.Engine, e.Epoch, e.Workers)
			case admission.TermEnded:
				s.lead(nil, 0, 0)
			case admission.WorkersChanged:
				s.setWorkers(e.Workers)
			case admission.ReplicaForgotten:
				s.reclaimForgotten(ctx, e.Replica)
			}
		}
	}
}

// reclaimTimeout bounds taking back a forgotten replica's jobs: the
// events after it wait for it.
const reclaimTimeout = 10 * time.Second

// reclaimForgotten takes back at once the jobs of a replica the fleet
// forgot (it is fenced): River would rescue them only after
// Config.RescueAfter.
func (s *Service) reclaimForgotten(ctx context.Context, replica string) {
	ctx, cancel := context.WithTimeout(ctx, reclaimTimeout)
	defer cancel()
	if _, err := s.ReclaimFrom(ctx, replica); err != nil {
		s.logger.Warn("fleet: the jobs of a forgotten replica were not taken back; River rescues them later", "replica", replica, "error", err)
	}
}

// lead gives the service the admission side of the fleet: e is the
// engine of the fleet term this replica now leads, epoch that term's
// (which the store's Fencer checks at each commit), on which it sets the
// workers scope to workers (if positive: the sum of the live replicas'
// workers; else the last value given), recovers what the store holds —
// the leases of admitted and running tasks, the queued tasks in
// submission order — and then commits admissions and keeps the ledger:
// it learns from the other replicas' notices, and polls the store every
// Config.FleetPoll, jittered. e nil says the term ended here: the
// admission side stops, and its waiters and leases are forgotten without
// being released (the engine goes with the term; the next leader
// recovers them from the store). lead does not block; a call after Stop
// is ignored.
func (s *Service) lead(e admission.Engine, epoch uint64, workers int) {
	if workers > 0 {
		s.workersMu.Lock()
		s.workers = workers
		s.workersMu.Unlock()
	}
	s.mu.Lock()
	old := s.term
	s.term = nil
	var tm *term
	if e != nil && !s.stopped {
		tm = newTerm(s, e, true, epoch)
		s.term = tm
	}
	begin := tm != nil && s.started
	s.mu.Unlock()
	if old != nil {
		old.end()
	}
	if begin {
		tm.begin()
	}
}

// setWorkers sets the limit of the workers scope (WorkersScope), and the
// acceptance runs' share of it (AcceptanceWorkersScope), in the term
// this replica leads if it leads one, and in every term it leads later:
// the sum of the live replicas' Config.Workers, as the fleet says. n
// must be positive.
func (s *Service) setWorkers(n int) {
	if n <= 0 {
		s.logger.Error("a workers limit that is not positive; ignored", "workers", n)
		return
	}
	s.workersMu.Lock()
	s.workers = n
	s.workersMu.Unlock()
	s.mu.Lock()
	tm := s.term
	s.mu.Unlock()
	if tm == nil {
		return // the next term sets it as it starts
	}
	if err := s.setWorkersScope(context.Background(), tm); err != nil {
		s.logger.Warn("the workers scope could not be set", "workers", n, "error", err)
	}
}

// setWorkersScope sets the workers scope, and the acceptance runs' share
// of it, in tm's engine to the current limit; the lock keeps a later
// limit from being overwritten by an earlier one.
func (s *Service) setWorkersScope(ctx context.Context, tm *term) error {
	s.workersMu.Lock()
	defer s.workersMu.Unlock()
	if err := tm.engine.SetScope(ctx, AcceptanceWorkersScope, admission.ScopeConfig{Limit: int64(acceptanceWorkers(s.workers)), LeaseTTL: s.cfg.LeaseTTL}); err != nil {
		return err
	}
	return tm.engine.SetScope(ctx, WorkersScope, admission.ScopeConfig{Limit: int64(s.workers), QueueLimit: s.cfg.QueueLimit, LeaseTTL: s.cfg.LeaseTTL})
}

// ReclaimFrom makes the jobs that replica (its Config.Replica, River's
// client id) was running when it went away available to every replica at
// once, instead of after Config.RescueAfter, and returns how many. Call
// it when the fleet declares replica gone (its heartbeats lapsed and it
// is fenced): a replica that is alive would find its jobs run twice. A
// replica may not reclaim its own jobs while it runs.
func (s *Service) ReclaimFrom(ctx context.Context, replica string) (int, error) {
	if s.reclaimer == nil {
		return 0, errors.New("task: the store cannot reclaim a replica's jobs (a fleet's store, PostgreSQL's, can)")
	}
	if replica == "" {
		return 0, fmt.Errorf("reclaim jobs: %w: no replica named", weir.ErrInvalid)
	}
	s.mu.Lock()
	running := s.started && !s.stopped
	s.mu.Unlock()
	if running && replica == s.cfg.Replica {
		return 0, fmt.Errorf("reclaim jobs: %w: replica %s is this one, and it is running", weir.ErrInvalid, replica)
	}
	n, err := s.reclaimer.JobReclaimAttemptedBy(ctx, replica, []string{RunArgs{}.Kind(), WebhookArgs{}.Kind()})
	if err != nil {
		return n, fmt.Errorf("reclaim the jobs of replica %s: %w", replica, err)
	}
	if n > 0 {
		s.logger.Info("jobs of a replica that is gone reclaimed", "replica", replica, "jobs", n)
	}
	return n, nil
}

// current is the term that admits this service's tasks here: always the
// one term of a service alone; in a fleet, the term this replica leads,
// once it has recovered, or nil.
func (s *Service) current() *term {
	s.mu.Lock()
	tm := s.term
	s.mu.Unlock()
	if tm != nil && tm.fleet && !tm.ready.Load() {
		return nil
	}
	return tm
}

// listen hears the replicas' notices until the service stops.
func (fl *fleetLedger) listen(ctx context.Context) {
	s := fl.s
	defer close(fl.listenDone)
	connects := 0
	defer s.notices.stopped()
	err := s.notifier.ListenTasks(ctx, func(event, id string) {
		if event == "" {
			s.notices.listening()
			if connects++; connects > 1 {
				s.logger.Info("task notices: listening again; the ledger reads everything again")
			}
			s.mu.Lock()
			tm := s.term
			s.mu.Unlock()
			if tm != nil {
				tm.wantResync()
			}
			return
		}
		s.heard(parseNotice(event, id))
	})
	if err != nil && ctx.Err() == nil {
		s.logger.Error("task notices: the listener stopped; the ledger relies on its poll", "error", err)
	}
}

// heard handles a notice from any replica: a cancel wakes this replica's
// worker if it waits for the task's next poll, and the ledger, if this
// replica leads, hears everything.
func (s *Service) heard(n notice) {
	if n.kind == noticeCancelled {
		s.notices.cancelHeard()
		s.endRun(n.id)
	}
	s.mu.Lock()
	tm := s.term
	s.mu.Unlock()
	if tm != nil {
		tm.post(n)
	}
}

// notify tells the fleet's leader (and every replica) of n. A notice
// that cannot be sent is logged: the leader's poll finds the change.
func (s *Service) notify(ctx context.Context, n notice) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
	defer cancel()
	if err := s.notifier.NotifyTask(ctx, n.event(), n.id); err != nil {
		s.logger.Warn("task notice not sent; the fleet leader's poll finds the change", "task", n.id, "notice", n.kind, "error", err)
	}
}

// announce tells the leader of task id, queued here, on a goroutine of
// its own, for a submission need not wait for the notice to go out: a
// lost notice is one the ledger's poll finds anyway. Until it has gone
// out, the leader has not heard of the task (unheard). Once Stop has
// begun, it is notify; Stop waits for the notices under way.
func (s *Service) announce(ctx context.Context, id string) {
	n := notice{kind: noticeQueued, id: id}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.notify(ctx, n)
		return
	}
	s.notifying.Add(1)
	s.unheard[id] = struct{}{}
	s.mu.Unlock()
	go func() {
		defer s.notifying.Done()
		s.notify(ctx, n)
		s.mu.Lock()
		delete(s.unheard, id)
		s.mu.Unlock()
	}()
}

// heardOf reports whether the leader may have heard of task id: false
// for one submitted here whose queued notice has not gone out, which
// only the leader's poll of the store could have found meanwhile.
func (s *Service) heardOf(id string) bool {
	s.mu.Lock()
	_, unheard := s.unheard[id]
	s.mu.Unlock()
	return !unheard
}

// endRun ends this replica's record of a task's run: a wait for its next
// poll ends.
func (s *Service) endRun(id string) {
	s.mu.Lock()
	if r := s.runs[id]; r != nil {
		close(r.ended)
		delete(s.runs, id)
	}
	s.mu.Unlock()
}

// queueFailed settles a queued task that the term's engine would not
// queue: a failure that is the task's own (no candidate, a full queue,
// its wait over) ends it; in a fleet, any other (the term ending, the
// leader unreachable) leaves it queued for the ledger's next look.
func (s *Service) queueFailed(ctx context.Context, id string, err error) {
	switch {
	case errors.Is(err, admission.ErrDuplicate):
		// Queued already.
	case s.ledger.passing(err):
		s.logger.Debug("a task could not be queued; the ledger tries again", "task", id, "error", err)
	default:
		s.failQueued(ctx, id, err)
	}
}

// taskFault reports whether err, from the engine's Enqueue of a task,
// is the task's own failure (no candidate left, a full queue, its wait
// over, a scope it needs unknown) rather than the engine's (the term
// ending, the leader unreachable).
func taskFault(err error) bool {
	for _, e := range []error{admission.ErrClosed, admission.ErrFenced, admission.ErrStaleOwner,
		admission.ErrDuplicate, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return false
		}
	}
	for _, e := range []error{admission.ErrInvalid, admission.ErrUnknownScope, admission.ErrQueueFull,
		admission.ErrTimeout, admission.ErrNoCandidate, admission.ErrRateLimited} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// noticeWatch tells a worker following a task on a fleet whether it may
// have missed the task's cancel on another replica since it last read
// the task. The cancel's notice ends the wait for the task's next poll
// (endRun), so a worker need not read its task before each poll, unless
// the notice may not have reached it: the listener was not listening
// (not yet connected, stopped, or between a lost connection and the
// next, which ends with a resync), or a cancel was heard (of any task:
// it may have come before the worker's run record existed). A mark
// taken before a read says which state of the notices that read covers;
// a later mark that differs, or zero, says to read again.
type noticeWatch struct {
	gen atomic.Uint64
	on  atomic.Bool
}

// mark returns the notices' state to note before a read of a task: zero
// while the listener is not listening.
func (w *noticeWatch) mark() uint64 {
	if !w.on.Load() {
		return 0
	}
	return w.gen.Load()
}

// missedSince reports whether a cancel may have gone unheard since mark
// m was taken.
func (w *noticeWatch) missedSince(m uint64) bool {
	return m == 0 || m != w.mark()
}

// listening is called as the listener begins to listen, on each
// connection; what was sent before it is lost.
func (w *noticeWatch) listening() {
	w.gen.Add(1)
	w.on.Store(true)
}

// stopped is called when the listener stops.
func (w *noticeWatch) stopped() {
	w.on.Store(false)
	w.gen.Add(1)
}

// cancelHeard is called with each cancel notice, before the run it ends
// is looked up.
func (w *noticeWatch) cancelHeard() { w.gen.Add(1) }
