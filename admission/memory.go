package admission

import (
	"sync"

	"github.com/weir-gateway/weir/clock"
)

// Options configure a Memory engine.
type Options struct {
	// Clock defaults to clock.Real.
	Clock clock.Clock
	// Observer receives every event; default none.
	Observer Observer
	// OnSpend, if set, is told a budget scope's spend in its window each
	// time a lease's cost settles there (Spend). It is called with the
	// engine's lock held, in order, as the Observer is: it must be quick
	// and must not call back into the engine. Default nil.
	OnSpend func(Spend)
}

// Memory is the in-process home of the engine: exact, and fast enough to
// sit on every request.
//
// All state lives behind one mutex, mu: the engine's fields and every
// scope, class, waiter and lease reachable from them, so the methods of
// those types run with mu held too. Methods of Memory whose names end in
// Locked need it held. Each exported method runs as one critical section
// (Acquire as two, around its wait; Scopes as one per scope), opened by
// lockSettled and closed by pumpUnlockDeliver:
//
//   - lockSettled takes mu and first settles what fell due by now
//     (deadlines, MaxWaits, lease expiries, rate refills), handing the
//     capacity that frees to those already waiting, so the caller decides
//     on current time and cannot take that capacity ahead of them.
//   - pumpUnlockDeliver hands whatever the section freed on to the waiters
//     next in order (pumpLocked), arms the timer for the next due event,
//     releases mu, and only then runs the notifications of the waiters the
//     section settled, in the calling goroutine.
//
// The timer's callback (onTimer) takes mu directly and settles what fell
// due itself; Close takes it directly as it fails every waiter anyway; both
// close with pumpUnlockDeliver. The Observer is called with mu held;
// notifications never are.
type Memory struct {
	mu    sync.Mutex
	clock clock.Clock
	obs   Observer
	spend func(Spend) // Options.OnSpend

	closed  bool
	scopes  map[string]*scope
	waiters map[string]*waiter
	classes map[string]*class
	fenced  map[string]uint64 // owner id → highest fenced generation
	seq     uint64
	// The scopes and the queued waiters of each owner id, so that Fence
	// and Activate cost in proportion to what the owner has, not to all
	// scopes and waiters.
	ownedScopes  map[string]map[*scope]struct{}
	ownerWaiters map[string]map[*waiter]struct{}

	// Leases live in a slab: a LeaseID is the slot in its low 32 bits and
	// the slot's reuse count above, so a stale id never finds a newer lease.
	slots     []*lease
	freeSlots []uint32
	nLeases   int

	deadlines indexHeap[*waiter]
	expiries  indexHeap[*lease]
	rateWakes indexHeap[*scope]
	timer     clock.Timer
	timerAt   int64

	dirty []*scope
	// unsettled: classes whose candidates changed, to be settled, earliest
	// head first.
	unsettled indexHeap[*class]
	pending   []delivery
	spare     []delivery // the other half of pending's double buffer
	blk       []blocker  // scratch for evaluate, lock held
	keyBuf    []byte     // scratch for class keys, lock held
	tnow      int64      // the clock, read at most once per critical section
	sampled   uint32     // counts grants, to sample hold times
	// restoring is set while Restore grants: a shadow scope counts a
	// restored lease as it was, admitted (shadow.go).
	restoring bool
	// shadowScopes counts the scopes in shadow: while there are none, a
	// release has no would-be queue to serve.
	shadowScopes int
	// budgetScopes counts the scopes with a Budget: while there are none,
	// no waiter's candidate can have outgrown one.
	budgetScopes int
	// overChecks: budget scopes whose spend grew or budget tightened, for
	// the next pump to drop the waiters they have no room for.
	overChecks []*scope
}

var _ Engine = (*Memory)(nil)

type delivery struct {
	notify func(Lease, error)
	lease  Lease
	err    error
}

// NewMemory returns an empty engine.
func NewMemory(opts Options) *Memory {
	m := &Memory{
		clock:   opts.Clock,
		obs:     opts.Observer,
		spend:   opts.OnSpend,
		scopes:  make(map[string]*scope),
		waiters: make(map[string]*waiter),
		classes: make(map[string]*class),
		fenced:  make(map[string]uint64),

		ownedScopes:  make(map[string]map[*scope]struct{}),
		ownerWaiters: make(map[string]map[*waiter]struct{}),
	}
	if m.clock == nil {
		m.clock = clock.Real
	}
	m.deadlines = indexHeap[*waiter]{
		less: func(a, b *waiter) bool {
			return a.due < b.due || (a.due == b.due && a.seq < b.seq)
		},
		setIdx: func(w *waiter, i int) { w.didx = int32(i) },
	}
	m.expiries = indexHeap[*lease]{
		less:   func(a, b *lease) bool { return a.expires < b.expires },
		setIdx: func(l *lease, i int) { l.eidx = i },
	}
	m.rateWakes = indexHeap[*scope]{
		less:   func(a, b *scope) bool { return a.rateWakeAt < b.rateWakeAt },
		setIdx: func(s *scope, i int) { s.rateIdx = i },
	}
	m.unsettled = indexHeap[*class]{
		less:   func(a, b *class) bool { return earlier(a.head(), b.head()) },
		setIdx: func(c *class, i int) { c.uidx = i },
	}
	return m
}

// Close fails every queued waiter with ErrClosed and refuses new work.
// Held leases can still be released.
func (m *Memory) Close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		for _, w := range m.waiters {
			m.dropWaiterLocked(w, OutcomeCancelled, ErrClosed)
		}
		if m.timer != nil {
			m.timer.Stop()
			m.timer = nil
		}
	}
	m.pumpUnlockDeliver()
}

func (m *Memory) now() int64 { return m.clock.Now().UnixNano() }

// nowLocked reads the clock once per critical section, and only when a
// decision needs it: on this hot path a clock read can cost more than the
// rest of an admission.
func (m *Memory) nowLocked() int64 {
	if m.tnow == 0 {
		m.tnow = m.now()
	}
	return m.tnow
}

// lockSettled starts a critical section, first settling everything that
// fell due (deadlines, expiries, rate refills), so no decision is made on
// stale time.
func (m *Memory) lockSettled() {
	m.mu.Lock()
	if m.deadlines.len() > 0 || m.expiries.len() > 0 || m.rateWakes.len() > 0 {
		m.reapLocked(m.nowLocked())
		// Capacity that fell due goes to those already waiting before the
		// caller's own operation can take it.
		if len(m.dirty) > 0 || m.unsettled.len() > 0 || len(m.overChecks) > 0 {
			m.pumpLocked()
		}
	}
}

// pumpUnlockDeliver finishes a critical section: it hands freed capacity
// on, arms the timer for the next due event, releases the lock and then
// delivers the section's notifications.
func (m *Memory) pumpUnlockDeliver() {
	if len(m.dirty) > 0 || m.unsettled.len() > 0 || len(m.overChecks) > 0 {
		m.pumpLocked()
	}
	m.armLocked()
	m.tnow = 0
	if len(m.pending) == 0 {
		m.mu.Unlock()
		return
	}
	pending := m.pending
	m.pending = m.spare[:0]
	m.spare = nil
	m.mu.Unlock()
	for _, d := range pending {
		d.notify(d.lease, d.err)
	}
	clear(pending)
	m.mu.Lock()
	if m.spare == nil {
		m.spare = pending[:0]
	}
	m.mu.Unlock()
}

// emitLocked hands e to the Observer, in order, with the lock held.
func (m *Memory) emitLocked(e Event) {
	if m.obs != nil {
		m.obs.Observe(e)
	}
}
