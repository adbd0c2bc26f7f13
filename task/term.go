package task

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// term is the admission side of the service: the engine its tasks wait
// in, the leases held for them, and the dispatcher that commits
// admissions. A service alone has one term, from New to Stop, on
// Deps.Engine. In a fleet (Config.Fleet) the admission side runs only on
// the replica that leads: one term for each fleet term it leads (followLead),
// on the engine that term gives it, whose waiters and leases are the
// term's alone. When it ends they are forgotten, not released (the
// engine goes with the term), and the next leader's term recovers them
// from the store (lead.go).
type term struct {
	s      *Service
	engine admission.Engine
	// fleet says the term is a fleet leader's ledger: it learns of the
	// other replicas' changes from notices and polls (lead.go).
	fleet bool
	// epoch is the fleet term's (followLead), which the store's Fencer checks
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

	// sync orders the dispatcher's commits with what the ledger decides
	// from its reads of the store (recovery, polls, notices): a read
	// either holds it throughout, or records the tasks whose admissions
	// are committed meanwhile (readCommits) and decides nothing about
	// them, so that nothing is decided from a status a commit has since
	// changed. It is never held while calling the engine.
	sync sync.Mutex
	// readCommits, while the ledger reads the store outside tm.sync
	// (resync, reconcile), records the tasks whose admissions the
	// dispatcher commits meanwhile (commit, under tm.sync); nil
	// otherwise.
	readCommits map[string]bool

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
	// The fleet ledger's own (lead.go).
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

// enqueueSubmitted is enqueue for a task its submission has just
// stored: one the term holds a lease for already is not queued
// (admission.ErrDuplicate). Between the store's commit of the task and
// this call, the ledger's poll or a notice may have found it queued and
// had it admitted; queued again, it would be admitted again, and the
// term, which holds one lease a task, would lose one of the two.
func (tm *term) enqueueSubmitted(ctx context.Context, req admission.Request) error {
	tm.mu.Lock()
	var w *waiter
	if tm.leases[req.ID] == nil {
		w = tm.reserveLocked(req.ID)
	}
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

// releaseUnspent gives back lease l of work that cost nothing (it never
// reached its upstream, or the upstream refused it): the cost it reserved
// against budgets is settled to nothing first, where a plain release
// counts it as spent (an ended task's, priced by what it asked for).
func (tm *term) releaseUnspent(ctx context.Context, l admission.Lease) {
	if l.Cost > 0 {
		tm.s.dropped("reconcile", tm.engine.Reconcile(ctx, l.ID, l.Owner, admission.Settlement{Tokens: l.Tokens}))
	}
	tm.s.dropped("release", tm.engine.Release(ctx, l.ID, l.Owner))
}
