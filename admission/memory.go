package admission

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// Options configure a Memory engine.
type Options struct {
	// Clock defaults to clock.Real.
	Clock clock.Clock
	// Observer receives every event; default none.
	Observer Observer
}

// Memory is the in-process home of the engine: exact, and fast enough to
// sit on every request. All state lives behind one mutex; every method is
// one critical section, and whatever it frees is handed on before the lock
// is let go. Notifications run after the lock is released, in the goroutine
// that caused them.
type Memory struct {
	mu    sync.Mutex
	clock clock.Clock
	obs   Observer

	closed  bool
	scopes  map[string]*scope
	waiters map[string]*waiter
	classes map[string]*class
	fenced  map[string]uint64 // owner id → highest fenced generation
	seq     uint64

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
}

var _ Engine = (*Memory)(nil)

type delivery struct {
	notify func(Lease, error)
	lease  Lease
	err    error
}

type scope struct {
	name     string
	cfg      ScopeConfig
	used     int64
	leases   int
	queued   int
	orphaned bool
	removed  bool
	// dirty: in m.dirty, to be pumped; again: made dirty while being
	// pumped; checkHolder: the holder has not been looked at since.
	dirty, again, checkHolder bool

	// waiting holds the classes waiting on this scope, in its order.
	waiting indexHeap[parked]
	// passed holds the classes passed over here while blocked elsewhere,
	// earliest arrival first; the first to outwait FairnessWindow becomes
	// the holder, for whom the scope keeps its share.
	passed  indexHeap[parked]
	holder  *waiter
	holdAmt int64

	rpm, tpm   bucket
	rateWakeAt int64
	rateIdx    int

	flows  map[string]*flow // round-robin turns by fairness key
	vclock int64

	meanHold float64 // EWMA of hold time, ns
	classes  map[*class]struct{}
}

type flow struct {
	pass    int64
	waiting int
}

// class is the set of queued waiters sharing a fairness key, a priority and
// candidates: they wait on the same scopes and keep the same order in each,
// so the engine parks and wakes them together.
type class struct {
	key     string
	prio    int32
	fkey    string
	cands   []cand
	scopes  []*scope // distinct scopes over all candidates
	rr      []*scope // the round-robin ones, in waiter.vts order
	flows   []*flow  // the class's fairness key's turn in each of rr
	members roster
	parks   []*parking // in scopes' waiting heaps
	// uidx is c's place in m.unsettled; -1 when it is not there.
	uidx int
	// offset: its members were moved here when that much of their wait
	// had passed (see keepCandsLocked); 0 for a class joined on arrival.
	offset int64
	// turnsMixed: some member's turn in a round-robin scope is out of
	// arrival order (a waiter re-resolved into the class can take one), so
	// Position walks the class instead of searching it.
	turnsMixed bool
	passes     []*parking // in scopes' passed heaps
}

type cand struct {
	idx   int // index in the waiter's candidate list
	needs []need
}

type need struct {
	s   *scope
	amt int64
}

type parking struct {
	c   *class
	s   *scope
	idx int
}

// parked is a heap entry: the parking and a copy of its class head's sort
// key in the scope. Comparisons read the heap's own array only, so a heap
// of a million classes costs a cache miss per level, not several per
// comparison.
type parked struct {
	prio int32
	vt   int64
	seq  uint64
	p    *parking
}

func (s *scope) entry(p *parking) parked {
	h := p.c.head()
	e := parked{prio: h.prio, seq: h.seq, p: p}
	if s.cfg.RoundRobin {
		e.vt = h.vtIn(s)
	}
	return e
}

func (s *scope) before(a, b parked) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.vt != b.vt {
		return a.vt < b.vt
	}
	return a.seq < b.seq
}

type waiter struct {
	id       string
	prio     int32
	didx     int32
	seq      uint64
	arrival  int64
	deadline int64 // its own; 0 if none
	// due is its key in m.deadlines: the earlier of its deadline and the
	// first moment a MaxWait of its scopes passes; 0 if neither.
	due     int64
	owner   Owner
	cands   []Candidate
	class   *class
	vt0     int64   // turn in the class's first round-robin scope
	vts     []int64 // turns in the others
	resolve func(string) ([]Candidate, error)
	notify  func(Lease, error)
}

type lease struct {
	id       LeaseID
	waiterID string
	candIdx  int
	needs    []need
	buf      [3]need
	pub      []Need
	tokens   int64
	owner    Owner
	admitted int64
	waited   int64
	ttl      int64
	expires  int64
	eidx     int
	prio     int32
}

// blocker is the scope one candidate waits on.
type blocker struct {
	s    *scope
	wake int64 // when a rate limit refills enough; 0 for capacity
}

// probe is a waiter's identity for ordering checks: a queued waiter, or a
// newcomer that has no waiter yet.
type probe struct {
	w    *waiter
	prio int32
	seq  uint64
	fkey string
}

// NewMemory returns an empty engine.
func NewMemory(opts Options) *Memory {
	m := &Memory{
		clock:   opts.Clock,
		obs:     opts.Observer,
		scopes:  make(map[string]*scope),
		waiters: make(map[string]*waiter),
		classes: make(map[string]*class),
		fenced:  make(map[string]uint64),
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
	m.unlock()
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

// unlock finishes a critical section: it hands freed capacity on, arms the
// timer for the next due event, releases the lock and delivers results.
func (m *Memory) unlock() {
	if len(m.dirty) > 0 || m.unsettled.len() > 0 {
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

// lock starts a critical section, first settling everything that fell due
// (deadlines, expiries, rate refills), so no decision is made on stale time.
func (m *Memory) lock() {
	m.mu.Lock()
	if m.deadlines.len() > 0 || m.expiries.len() > 0 || m.rateWakes.len() > 0 {
		m.reapLocked(m.nowLocked())
		// Capacity that fell due goes to those already waiting before the
		// caller's own operation can take it.
		if len(m.dirty) > 0 || m.unsettled.len() > 0 {
			m.pumpLocked()
		}
	}
}

func (m *Memory) emit(e Event) {
	if m.obs != nil {
		m.obs.Observe(e)
	}
}

// ---- scopes ----

// SetScope creates a scope or changes its configuration.
func (m *Memory) SetScope(ctx context.Context, name string, cfg ScopeConfig) error {
	if name == "" {
		return invalidf("scope has no name")
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("scope %s: %w", name, err)
	}
	m.lock()
	defer m.unlock()
	now := m.nowLocked()
	if m.closed {
		return ErrClosed
	}
	s := m.scopes[name]
	if s == nil {
		s = &scope{name: name, rateIdx: -1, classes: make(map[*class]struct{})}
		s.waiting = indexHeap[parked]{
			less:   s.before,
			setIdx: func(e parked, i int) { e.p.idx = i },
		}
		s.passed = indexHeap[parked]{
			less:   func(a, b parked) bool { return a.seq < b.seq },
			setIdx: func(e parked, i int) { e.p.idx = i },
		}
		m.scopes[name] = s
	}
	old := s.cfg
	s.cfg = cfg
	s.rpm.configure(cfg.RPM, now)
	s.tpm.configure(cfg.TPM, now)
	if cfg.Owner != "" && cfg.OwnerGen <= m.fenced[cfg.Owner] {
		s.orphaned = true
	} else if old.Owner != cfg.Owner || old.OwnerGen != cfg.OwnerGen {
		s.orphaned = false
	}
	if old.RoundRobin != cfg.RoundRobin {
		// The order changed: rebuild the waiting heap under it.
		items := s.waiting.items
		s.waiting.items = nil
		for _, e := range items {
			s.waiting.push(s.entry(e.p))
		}
	}
	if s.holder != nil && (cfg.FairnessWindow == 0 || cfg.Limit == 0) {
		s.holder = nil
	}
	tpmLowered := cfg.TPM > 0 && (old.TPM == 0 || cfg.TPM < old.TPM)
	if len(s.classes) > 0 && (tpmLowered || cfg.MaxWait != old.MaxWait) {
		m.rescopeLocked(s, now, tpmLowered)
	}
	m.markDirty(s)
	return nil
}

// RemoveScope retires a scope.
func (m *Memory) RemoveScope(ctx context.Context, name string) error {
	m.lock()
	defer m.unlock()
	now := m.nowLocked()
	s := m.scopes[name]
	if s == nil {
		return fmt.Errorf("%w: %s", ErrUnknownScope, name)
	}
	delete(m.scopes, name)
	s.removed = true
	s.orphaned = true
	m.reresolveLocked(now, []*scope{s}, false)
	return nil
}

// Scope reports one scope's state.
func (m *Memory) Scope(ctx context.Context, name string) (ScopeStats, error) {
	m.lock()
	defer m.unlock()
	now := m.nowLocked()
	s := m.scopes[name]
	if s == nil {
		return ScopeStats{}, fmt.Errorf("%w: %s", ErrUnknownScope, name)
	}
	st := ScopeStats{
		Name:     name,
		Config:   s.cfg,
		Used:     s.used,
		Leases:   s.leases,
		Queued:   s.queued,
		Orphaned: s.orphaned,
		MeanHold: time.Duration(s.meanHold),
	}
	if s.holder != nil {
		st.Held = s.holdAmt
	}
	if s.cfg.RPM > 0 {
		s.rpm.refill(now)
		st.RPMAvailable = s.rpm.level
	}
	if s.cfg.TPM > 0 {
		s.tpm.refill(now)
		st.TPMAvailable = s.tpm.level
	}
	return st, nil
}

// Scopes reports every scope, sorted by name.
func (m *Memory) Scopes(ctx context.Context) []ScopeStats {
	m.mu.Lock()
	names := make([]string, 0, len(m.scopes))
	for name := range m.scopes {
		names = append(names, name)
	}
	m.mu.Unlock()
	slices.Sort(names)
	out := make([]ScopeStats, 0, len(names))
	for _, name := range names {
		if st, err := m.Scope(ctx, name); err == nil {
			out = append(out, st)
		}
	}
	return out
}

func (m *Memory) markDirty(s *scope) {
	s.checkHolder = true
	if s.dirty {
		s.again = true
		return
	}
	s.dirty = true
	m.dirty = append(m.dirty, s)
}

// ---- ordering ----

func (w *waiter) vtIn(s *scope) int64 {
	for i, r := range w.class.rr {
		if r == s {
			return w.vtAt(i)
		}
	}
	return 0
}

func (c *class) head() *waiter { return c.members.head() }

func (w *waiter) vtAt(i int) int64 {
	if i == 0 {
		return w.vt0
	}
	return w.vts[i-1]
}

func (w *waiter) setVT(i int, vt int64) {
	if i == 0 {
		w.vt0 = vt
		return
	}
	if w.vts == nil {
		w.vts = make([]int64, len(w.class.rr)-1)
	}
	w.vts[i-1] = vt
}

// precedes reports whether a comes before b in s's order: priority, then in
// a round-robin scope the fairness turn, then arrival.
func (s *scope) precedes(a, b *waiter) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if s.cfg.RoundRobin {
		if va, vb := a.vtIn(s), b.vtIn(s); va != vb {
			return va < vb
		}
	}
	return a.seq < b.seq
}

func (p *probe) vtIn(s *scope) int64 {
	if p.w != nil {
		return p.w.vtIn(s)
	}
	return s.nextVT(p.fkey)
}

// flowLocked finds or makes fkey's turn in s.
func (s *scope) flowLocked(fkey string) *flow {
	if s.flows == nil {
		s.flows = make(map[string]*flow)
	}
	f := s.flows[fkey]
	if f == nil {
		f = &flow{}
		s.flows[fkey] = f
	}
	return f
}

func (s *scope) nextVT(fkey string) int64 {
	if f := s.flows[fkey]; f != nil && f.pass > s.vclock {
		return f.pass + 1
	}
	return s.vclock + 1
}

func (s *scope) probePrecedes(p *probe, b *waiter) bool {
	if p.prio != b.prio {
		return p.prio > b.prio
	}
	if s.cfg.RoundRobin {
		if va, vb := p.vtIn(s), b.vtIn(s); va != vb {
			return va < vb
		}
	}
	return p.seq < b.seq
}

// globallyPrecedes orders by priority and arrival only, the same in every
// scope, so that holds taken in different scopes can never wait on each
// other in a cycle.
func globallyPrecedes(p *probe, b *waiter) bool {
	if p.prio != b.prio {
		return p.prio > b.prio
	}
	return p.seq < b.seq
}

// ---- admission checks ----

// fitsLocked reports whether p may take amt (and tokens) of s now; if a rate
// limit stands in the way, wake says when it will have refilled enough.
func (m *Memory) fitsLocked(s *scope, p *probe, amt, tokens int64) (ok bool, wake int64) {
	if s.orphaned {
		return false, 0
	}
	if lim := s.cfg.Limit; lim > 0 {
		if s.used+amt > lim {
			return false, 0
		}
		if s.holder == nil && s.passed.len() > 0 {
			m.promoteHolderLocked(s)
		}
		if h := s.holder; h != nil && h != p.w && !globallyPrecedes(p, h) && s.used+s.holdAmt+amt > lim {
			return false, 0
		}
	}
	if s.waiting.len() > 0 && (p.w == nil || p.w != s.holder) {
		if top := s.waiting.top().p.c.head(); top != p.w && !s.probePrecedes(p, top) {
			return false, 0
		}
	}
	if s.cfg.RPM > 0 {
		if ok, wake := s.rpm.has(m.nowLocked(), 1); !ok {
			return false, wake
		}
	}
	if s.cfg.TPM > 0 && tokens > 0 {
		if ok, wake := s.tpm.has(m.nowLocked(), float64(tokens)); !ok {
			return false, wake
		}
	}
	return true, 0
}

// evaluateLocked admits w to its first candidate that fits, or collects in
// m.blk the scope each candidate waits on.
func (m *Memory) evaluateLocked(w *waiter) bool {
	m.blk = m.blk[:0]
	p := probe{w: w, prio: w.prio, seq: w.seq}
	for j := range w.class.cands {
		cd := &w.class.cands[j]
		tokens := w.cands[cd.idx].Tokens
		b, ok := m.candidateBlockerLocked(&p, cd.needs, tokens)
		if ok {
			m.admitLocked(w, j)
			return true
		}
		m.addBlocker(b)
	}
	return false
}

func (m *Memory) addBlocker(b blocker) {
	for i := range m.blk {
		if m.blk[i].s == b.s {
			if b.wake != 0 && (m.blk[i].wake == 0 || b.wake < m.blk[i].wake) {
				m.blk[i].wake = b.wake
			}
			return
		}
	}
	m.blk = append(m.blk, b)
}

func (m *Memory) candidateBlockerLocked(p *probe, needs []need, tokens int64) (blocker, bool) {
	for _, n := range needs {
		if ok, wake := m.fitsLocked(n.s, p, n.amt, tokens); !ok {
			return blocker{s: n.s, wake: wake}, false
		}
	}
	return blocker{}, true
}

// ---- acquiring ----

// Restore re-creates a lease granted before a restart.
func (m *Memory) Restore(ctx context.Context, req Request, cand int) (Lease, error) {
	if err := req.Validate(); err != nil {
		return Lease{}, err
	}
	if cand < 0 || cand >= len(req.Candidates) {
		return Lease{}, invalidf("restore of %s names candidate %d of %d", req.ID, cand, len(req.Candidates))
	}
	m.lock()
	defer m.unlock()
	if m.closed {
		return Lease{}, ErrClosed
	}
	if req.Owner.ID != "" && m.isFenced(req.Owner) {
		return Lease{}, fmt.Errorf("%w: %s", ErrFenced, req.Owner)
	}
	c := &req.Candidates[cand]
	needs, err := m.resolveNeedsLocked(c.Needs, nil)
	if err != nil {
		return Lease{}, err
	}
	if needs == nil {
		return Lease{}, fmt.Errorf("%w: candidate %d of %s uses an orphaned scope", ErrNoCandidate, cand, req.ID)
	}
	m.seq++
	return m.grantLocked(req.ID, req.Priority, cand, needs, c, req.Owner, 0), nil
}

// TryAcquire admits at once or fails without queueing.
func (m *Memory) TryAcquire(ctx context.Context, req Request) (Lease, error) {
	if err := req.Validate(); err != nil {
		return Lease{}, err
	}
	m.lock()
	defer m.unlock()
	l, err, _ := m.admitNowLocked(&req, true)
	return l, err
}

// Enqueue queues a waiter; notify gets its lease or error exactly once.
func (m *Memory) Enqueue(ctx context.Context, req Request, notify func(Lease, error)) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if notify == nil {
		return invalidf("enqueue of %s without notify", req.ID)
	}
	m.lock()
	defer m.unlock()
	l, err, done := m.admitNowLocked(&req, false)
	if done {
		if err == nil {
			m.pending = append(m.pending, delivery{notify: notify, lease: l})
		}
		return err
	}
	_, err = m.queueLocked(&req, notify)
	return err
}

// Acquire waits for admission until ctx is done or the deadline passes.
func (m *Memory) Acquire(ctx context.Context, req Request) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	if err := req.Validate(); err != nil {
		return Lease{}, err
	}
	type result struct {
		lease Lease
		err   error
	}
	m.lock()
	l, err, done := m.admitNowLocked(&req, false)
	if done {
		m.unlock()
		return l, err
	}
	ch := make(chan result, 1)
	w, err := m.queueLocked(&req, func(l Lease, err error) { ch <- result{l, err} })
	m.unlock()
	if err != nil {
		return Lease{}, err
	}
	select {
	case r := <-ch:
		return r.lease, r.err
	case <-ctx.Done():
	}
	m.lock()
	if m.waiters[req.ID] == w && w.notify != nil {
		m.dropWaiterLocked(w, OutcomeCancelled, ErrCancelled)
	}
	m.unlock()
	// The waiter was settled one way or the other; a lease granted while we
	// were giving up goes straight back.
	r := <-ch
	if r.err == nil {
		_ = m.Release(context.WithoutCancel(ctx), r.lease.ID, r.lease.Owner)
	}
	return Lease{}, ctx.Err()
}

// admitNowLocked tries to admit a newcomer without queueing it. done says
// whether the request was settled (admitted or refused); otherwise it must
// queue. With try set, it is always settled.
func (m *Memory) admitNowLocked(req *Request, try bool) (l Lease, err error, done bool) {
	if m.closed {
		return Lease{}, ErrClosed, true
	}
	if req.Owner.ID != "" && m.isFenced(req.Owner) {
		return Lease{}, fmt.Errorf("%w: %s", ErrFenced, req.Owner), true
	}
	if len(m.waiters) > 0 {
		if _, dup := m.waiters[req.ID]; dup {
			return Lease{}, fmt.Errorf("%w: %s", ErrDuplicate, req.ID), true
		}
	}
	p := probe{prio: req.Priority, seq: m.seq + 1, fkey: req.FairnessKey}
	var buf [3]need
	rateOnly, usable, orphaned := true, false, false
	var tooMany *TokenLimitError
	var wake int64
	for i := range req.Candidates {
		c := &req.Candidates[i]
		needs, b, over, err := m.checkCandidateLocked(&p, c, buf[:0])
		if err != nil {
			return Lease{}, err, true
		}
		if needs == nil {
			// It touches an orphaned scope, or can never fit a TPM.
			if over == nil {
				orphaned = true
			} else if tooMany == nil {
				tooMany = tokenLimitError(over, c.Tokens)
			}
			continue
		}
		usable = true
		if b.s == nil {
			// Bad input changes nothing, even in a candidate not taken.
			for _, rest := range req.Candidates[i+1:] {
				for _, n := range rest.Needs {
					if m.scopes[n.Scope] == nil {
						return Lease{}, fmt.Errorf("%w: %s", ErrUnknownScope, n.Scope), true
					}
				}
			}
			m.seq++
			l := m.grantLocked(req.ID, req.Priority, i, needs, c, req.Owner, 0)
			return l, nil, true
		}
		if b.wake == 0 {
			rateOnly = false
		} else if wake == 0 || b.wake < wake {
			wake = b.wake
		}
	}
	if !usable {
		m.emit(Event{Outcome: OutcomeNoCandidate, WaiterID: req.ID, Priority: req.Priority})
		if !orphaned {
			// No candidate could ever be admitted; an orphaned one could
			// once its owner is back.
			return Lease{}, tooMany, true
		}
		return Lease{}, fmt.Errorf("%w: every candidate of %s uses an orphaned scope or more tokens than a TPM", ErrNoCandidate, req.ID), true
	}
	if !try {
		return Lease{}, nil, false
	}
	if rateOnly {
		m.emit(Event{Outcome: OutcomeRateLimited, WaiterID: req.ID, Priority: req.Priority})
		return Lease{}, &RateLimitedError{RetryAfter: time.Duration(wake - m.nowLocked())}, true
	}
	return Lease{}, ErrWouldWait, true
}

func (m *Memory) isFenced(o Owner) bool {
	g, ok := m.fenced[o.ID]
	return ok && o.Gen <= g
}

// checkCandidateLocked resolves c's scopes into buf and finds the scope it
// would wait on (none if it fits now). It returns nil needs when a scope is
// orphaned or c reserves more tokens than its TPM (then over is that
// scope), and ErrUnknownScope when one does not exist.
func (m *Memory) checkCandidateLocked(p *probe, c *Candidate, buf []need) (needs []need, b blocker, over *scope, err error) {
	for _, n := range c.Needs {
		s := m.scopes[n.Scope]
		if s == nil {
			return nil, b, nil, fmt.Errorf("%w: %s", ErrUnknownScope, n.Scope)
		}
		if s.orphaned {
			return nil, b, nil, nil
		}
		if s.tooManyTokens(c.Tokens) {
			return nil, b, s, nil
		}
		buf = append(buf, need{s: s, amt: n.Amount})
		if b.s == nil {
			if ok, wake := m.fitsLocked(s, p, n.Amount, c.Tokens); !ok {
				b = blocker{s: s, wake: wake}
			}
		}
	}
	return buf, b, nil, nil
}

// resolveNeedsLocked maps scope names to scopes. It returns nil needs (and
// no error) when a scope is orphaned.
func (m *Memory) resolveNeedsLocked(in []Need, buf []need) ([]need, error) {
	out := buf
	for _, n := range in {
		s := m.scopes[n.Scope]
		if s == nil {
			return nil, fmt.Errorf("%w: %s", ErrUnknownScope, n.Scope)
		}
		if s.orphaned {
			return nil, nil
		}
		out = append(out, need{s: s, amt: n.Amount})
	}
	return out, nil
}

// queueLocked turns a newcomer that could not be admitted into a waiter.
func (m *Memory) queueLocked(req *Request, notify func(Lease, error)) (*waiter, error) {
	now := m.nowLocked()
	// Candidates whose scopes' queues are full are dropped; the class key
	// keeps each candidate's index in the request. The key is built in a
	// reused buffer and the candidates resolved only for a new class, so
	// joining an existing class allocates nothing but the waiter.
	var live uint64
	var full *scope // of the most preferred candidate a full queue dropped
	b := appendKeyHead(m.keyBuf[:0], req.FairnessKey, req.Priority)
	for i := range req.Candidates {
		c := &req.Candidates[i]
		if ok, f := m.queueableLocked(c.Needs, c.Tokens); !ok {
			if full == nil {
				full = f
			}
			continue
		}
		live |= 1 << i
		b = appendKeyCand(b, i, c.Needs)
	}
	m.keyBuf = b
	if live == 0 {
		// admitNowLocked found a usable candidate, so a queue was full.
		m.emit(Event{Outcome: OutcomeQueueFull, WaiterID: req.ID, Priority: req.Priority})
		return nil, &QueueFullError{Scope: full.name, Limit: full.cfg.QueueLimit, RetryAfter: full.waitEstimate(1)}
	}
	c := m.classes[string(b)]
	if c == nil {
		var cands []cand
		for i := range req.Candidates {
			if live&(1<<i) != 0 {
				needs, _ := m.resolveNeedsLocked(req.Candidates[i].Needs, nil)
				cands = append(cands, cand{idx: i, needs: needs})
			}
		}
		c = m.newClassLocked(string(b), req.FairnessKey, req.Priority, cands)
	}
	m.seq++
	w := &waiter{
		id:       req.ID,
		prio:     req.Priority,
		didx:     -1,
		seq:      m.seq,
		arrival:  now,
		owner:    req.Owner,
		cands:    req.Candidates,
		resolve:  req.Resolve,
		notify:   notify,
		deadline: req.Deadline.UnixNano(),
	}
	if req.Deadline.IsZero() {
		w.deadline = 0
	}
	if w.deadline != 0 && w.deadline <= now {
		on := c.waitingOn()
		m.dropClassIfEmpty(c)
		m.emit(Event{Outcome: OutcomeTimeout, WaiterID: req.ID, Priority: req.Priority})
		return nil, &TimeoutError{Setting: SettingDeadline, WaitingOn: on.name, RetryAfter: on.waitEstimate(on.queued + 1)}
	}
	m.joinClassLocked(w, c)
	m.waiters[w.id] = w
	m.scheduleLocked(w)
	m.emit(Event{Outcome: OutcomeQueued, WaiterID: w.id, Priority: w.prio})
	if c.head() == w {
		m.settleLocked(c)
	}
	return w, nil
}

// queueableLocked reports whether a candidate's scopes exist, are usable,
// can hold its tokens and have room in their queues; if not for a full
// queue alone, full is that scope.
func (m *Memory) queueableLocked(needs []Need, tokens int64) (ok bool, full *scope) {
	for _, n := range needs {
		s := m.scopes[n.Scope]
		if s == nil || s.orphaned || s.tooManyTokens(tokens) {
			return false, nil
		}
		if q := s.cfg.QueueLimit; q > 0 && s.queued >= q && full == nil {
			full = s
		}
	}
	return full == nil, full
}

// Class keys: priority, fairness key, then each live candidate's index and
// scopes with amounts. Every variable part is length-prefixed, so no name
// can make two different classes share a key.
func appendKeyHead(b []byte, fkey string, prio int32) []byte {
	b = strconv.AppendInt(b, int64(prio), 10)
	return appendKeyString(b, fkey)
}

func appendKeyCand(b []byte, idx int, needs []Need) []byte {
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(idx), 10)
	for _, n := range needs {
		b = appendKeyString(b, n.Scope)
		b = strconv.AppendInt(b, n.Amount, 10)
	}
	return b
}

func appendKeyString(b []byte, s string) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

func (m *Memory) newClassLocked(key, fkey string, prio int32, cands []cand) *class {
	c := &class{key: key, prio: prio, fkey: fkey, cands: cands, uidx: -1}
	for _, cd := range cands {
		for _, n := range cd.needs {
			if !slices.Contains(c.scopes, n.s) {
				c.scopes = append(c.scopes, n.s)
				n.s.classes[c] = struct{}{}
				if n.s.cfg.RoundRobin {
					c.rr = append(c.rr, n.s)
					c.flows = append(c.flows, n.s.flowLocked(fkey))
				}
			}
		}
	}
	m.classes[key] = c
	return c
}

func (m *Memory) dropClassIfEmpty(c *class) {
	if c.members.len() > 0 {
		return
	}
	for len(c.parks) > 0 {
		m.unparkLocked(c.parks[len(c.parks)-1])
	}
	for len(c.passes) > 0 {
		m.unpassLocked(c.passes[len(c.passes)-1])
	}
	for _, s := range c.scopes {
		delete(s.classes, c)
	}
	if c.uidx >= 0 {
		m.unsettled.remove(c.uidx)
	}
	delete(m.classes, c.key)
}

// joinClassLocked puts w in class c and counts it in c's scopes.
func (m *Memory) joinClassLocked(w *waiter, c *class) {
	w.class = c
	w.vt0, w.vts = 0, nil
	for i, s := range c.rr {
		f := c.flows[i]
		vt := max(f.pass, s.vclock) + 1
		f.pass = vt
		f.waiting++
		w.setVT(i, vt)
	}
	for _, s := range c.scopes {
		s.queued++
	}
	var wasHead *waiter
	if c.members.len() > 0 {
		wasHead = c.head()
	}
	c.members.push(w)
	if wasHead != nil && c.head() != wasHead {
		m.classHeadChangedLocked(c)
	}
}

// leaveClassLocked takes w out of its class and uncounts it.
func (m *Memory) leaveClassLocked(w *waiter) {
	c := w.class
	wasHead := c.head() == w
	c.members.remove(w)
	for _, s := range c.scopes {
		s.queued--
		if s.holder == w {
			s.holder = nil
			m.markDirty(s)
		}
	}
	// A key's turn is forgotten once it has nobody waiting and the scope
	// has caught up with it; a class holds its flows only while it has
	// members, so a forgotten flow is never used again.
	for i, s := range c.rr {
		f := c.flows[i]
		f.waiting--
		if f.waiting <= 0 && f.pass <= s.vclock {
			delete(s.flows, c.fkey)
		}
	}
	w.class = nil
	if c.members.len() == 0 {
		m.dropClassIfEmpty(c)
		return
	}
	if wasHead {
		m.classHeadChangedLocked(c)
	}
}

// classHeadChangedLocked re-orders c wherever it is parked; the scopes it
// is parked on may now admit a different waiter first.
func (m *Memory) classHeadChangedLocked(c *class) {
	if c.uidx >= 0 {
		m.unsettled.fix(c.uidx)
	}
	for _, p := range c.parks {
		p.s.waiting.items[p.idx] = p.s.entry(p)
		p.s.waiting.fix(p.idx)
		m.markDirty(p.s)
	}
	for _, p := range c.passes {
		p.s.passed.items[p.idx] = p.s.entry(p)
		p.s.passed.fix(p.idx)
	}
}

// passLocked records that c was passed over in s while blocked elsewhere.
func (m *Memory) passLocked(c *class, s *scope) {
	for _, p := range c.passes {
		if p.s == s {
			return
		}
	}
	p := &parking{c: c, s: s, idx: -1}
	c.passes = append(c.passes, p)
	s.passed.push(s.entry(p))
}

func (m *Memory) unpassLocked(p *parking) {
	p.s.passed.remove(p.idx)
	p.c.passes = slices.DeleteFunc(p.c.passes, func(q *parking) bool { return q == p })
}

// promoteHolderLocked makes the earliest class passed over in s its holder
// once its head has waited s's fairness window.
func (m *Memory) promoteHolderLocked(s *scope) {
	if s.holder != nil || s.passed.len() == 0 || s.cfg.FairnessWindow == 0 || s.cfg.Limit == 0 {
		return
	}
	p := s.passed.top().p
	h := p.c.head()
	if m.nowLocked()-h.arrival < int64(s.cfg.FairnessWindow) {
		return
	}
	m.unpassLocked(p)
	s.holder = h
	s.holdAmt = h.amountIn(s)
}

func (m *Memory) parkLocked(c *class, s *scope) {
	for _, p := range c.parks {
		if p.s == s {
			return
		}
	}
	p := &parking{c: c, s: s, idx: -1}
	c.parks = append(c.parks, p)
	s.waiting.push(s.entry(p))
}

func (m *Memory) unparkLocked(p *parking) {
	c := p.c
	if p.idx == 0 {
		m.markDirty(p.s) // the next class in p.s may now go
	}
	p.s.waiting.remove(p.idx)
	for i, q := range c.parks {
		if q == p {
			c.parks = slices.Delete(c.parks, i, i+1)
			break
		}
	}
}

// parkOnBlockersLocked makes c wait on exactly the scopes in m.blk.
func (m *Memory) parkOnBlockersLocked(c *class) {
	for i := len(c.parks) - 1; i >= 0; i-- {
		p := c.parks[i]
		if !m.isBlocker(p.s) {
			m.unparkLocked(p)
		}
	}
	for _, b := range m.blk {
		m.parkLocked(c, b.s)
		if b.wake != 0 {
			m.scheduleRateWake(b.s, b.wake)
		}
	}
}

func (m *Memory) isBlocker(s *scope) bool {
	for _, b := range m.blk {
		if b.s == s {
			return true
		}
	}
	return false
}

func (m *Memory) scheduleRateWake(s *scope, at int64) {
	switch {
	case s.rateIdx < 0:
		s.rateWakeAt = at
		m.rateWakes.push(s)
	case at < s.rateWakeAt:
		s.rateWakeAt = at
		m.rateWakes.fix(s.rateIdx)
	}
}

// settleLocked admits c's waiters in order while they fit, then parks the
// class on whatever its head waits on.
func (m *Memory) settleLocked(c *class) {
	for c.members.len() > 0 {
		w := c.head()
		if m.evaluateLocked(w) {
			continue
		}
		m.parkOnBlockersLocked(c)
		return
	}
}

// pumpLocked hands capacity on in every scope that gained some. The scopes
// are served one waiter at a time, the earliest waiter (priority, then
// arrival) across all of them first: a waiter whose scope just freed is
// re-evaluated, and moves to wait on the next scope it needs, before a
// later waiter can take that scope's capacity.
func (m *Memory) pumpLocked() {
	for len(m.dirty) > 0 || m.unsettled.len() > 0 {
		i, w := m.nextDirtyLocked()
		if cw := m.nextUnsettledLocked(); cw != nil && (i < 0 || (w != nil && earlier(cw, w))) {
			m.stepUnsettledLocked()
			continue
		}
		if i < 0 {
			continue // only stale unsettled classes were left, now gone
		}
		s := m.dirty[i]
		if m.stepScopeLocked(s) {
			continue
		}
		if s.again {
			s.again = false
			continue
		}
		last := len(m.dirty) - 1
		m.dirty[i] = m.dirty[last]
		m.dirty = m.dirty[:last]
		s.dirty = false
	}
}

// nextWaiter is the waiter s would look at next, if any.
func (s *scope) nextWaiter() *waiter {
	if h := s.holder; s.checkHolder && h != nil && h.class.head() == h {
		return h
	}
	if s.waiting.len() > 0 {
		return s.waiting.top().p.c.head()
	}
	return nil
}

// nextDirtyLocked picks the dirty scope whose next waiter comes first, and
// that waiter; a scope with nobody to look at comes first of all (with a
// nil waiter), to be dropped. It returns -1 when nothing is dirty.
func (m *Memory) nextDirtyLocked() (int, *waiter) {
	best := -1
	var bw *waiter
	for i, s := range m.dirty {
		w := s.nextWaiter()
		if w == nil {
			return i, nil
		}
		if bw == nil || earlier(w, bw) {
			best, bw = i, w
		}
	}
	return best, bw
}

// earlier orders waiters across scopes: priority, then arrival.
func earlier(a, b *waiter) bool {
	return a.prio > b.prio || (a.prio == b.prio && a.seq < b.seq)
}

// unsettle queues c to be settled by the next pump, in its turn among the
// waiters the pump looks at.
func (m *Memory) unsettle(c *class) {
	if c.uidx < 0 && c.members.len() > 0 {
		m.unsettled.push(c)
	}
}

// nextUnsettledLocked is the earliest head among the unsettled classes:
// the heap keeps them in head order (classHeadChangedLocked re-orders a
// class whose head changes; an emptied class leaves it).
func (m *Memory) nextUnsettledLocked() *waiter {
	if m.unsettled.len() == 0 {
		return nil
	}
	return m.unsettled.top().head()
}

// stepUnsettledLocked admits the head of the earliest unsettled class, or
// parks the class on what its head waits for and takes it off the heap.
func (m *Memory) stepUnsettledLocked() {
	c := m.unsettled.top()
	if m.evaluateLocked(c.head()) {
		return
	}
	m.parkOnBlockersLocked(c)
	if c.uidx >= 0 {
		m.unsettled.remove(c.uidx)
	}
}

// stepScopeLocked looks at s's next waiter: it admits it, or moves it to
// wait where it must. It reports whether s may have more to hand on. A
// waiter that s could serve but that must wait elsewhere is passed; once it
// has waited s's fairness window, s holds its share for it.
func (m *Memory) stepScopeLocked(s *scope) bool {
	if h := s.holder; s.checkHolder && h != nil && h.class.head() == h {
		// The waiter s holds for goes first, wherever it is parked.
		s.checkHolder = false
		if !m.evaluateLocked(h) {
			m.parkOnBlockersLocked(h.class)
		}
		return true
	}
	s.checkHolder = false
	if s.waiting.len() == 0 {
		return false
	}
	c := s.waiting.top().p.c
	if m.evaluateLocked(c.head()) {
		return true
	}
	if m.isBlocker(s) {
		m.parkOnBlockersLocked(c)
		return false
	}
	if s.cfg.FairnessWindow > 0 && s.cfg.Limit > 0 {
		m.passLocked(c, s)
		m.promoteHolderLocked(s)
	}
	m.parkOnBlockersLocked(c)
	return true
}

func (w *waiter) amountIn(s *scope) int64 {
	for _, cd := range w.class.cands {
		for _, n := range cd.needs {
			if n.s == s {
				return n.amt
			}
		}
	}
	return 0
}

// ---- granting and releasing ----

// admitLocked grants w its class's candidate j.
func (m *Memory) admitLocked(w *waiter, j int) {
	now := m.nowLocked()
	c := w.class
	cd := c.cands[j]
	pub := &w.cands[cd.idx]
	for i, s := range c.rr {
		if vt := w.vtAt(i); vt > s.vclock && slices.ContainsFunc(cd.needs, func(n need) bool { return n.s == s }) {
			s.vclock = vt
		}
	}
	m.removeWaiterLocked(w)
	l := m.grantLocked(w.id, w.prio, cd.idx, cd.needs, pub, w.owner, now-w.arrival)
	m.pending = append(m.pending, delivery{notify: w.notify, lease: l})
	w.notify = nil
}

// removeWaiterLocked takes w out of every index.
func (m *Memory) removeWaiterLocked(w *waiter) {
	delete(m.waiters, w.id)
	if w.didx >= 0 {
		m.deadlines.remove(int(w.didx))
	}
	m.leaveClassLocked(w)
}

// dropWaiterLocked ends w's wait with err.
func (m *Memory) dropWaiterLocked(w *waiter, o Outcome, err error) {
	now := m.nowLocked()
	m.removeWaiterLocked(w)
	m.emit(Event{Outcome: o, WaiterID: w.id, Priority: w.prio, Waited: time.Duration(now - w.arrival)})
	if w.notify != nil {
		m.pending = append(m.pending, delivery{notify: w.notify, err: err})
		w.notify = nil
	}
}

func (m *Memory) grantLocked(waiterID string, prio int32, candIdx int, needs []need, c *Candidate, owner Owner, waited int64) Lease {
	l := m.newLeaseLocked()
	l.waiterID = waiterID
	l.candIdx = candIdx
	l.needs = append(l.buf[:0], needs...)
	l.pub = c.Needs
	l.tokens = c.Tokens
	l.owner = owner
	l.waited = waited
	l.prio = prio
	l.ttl = 0
	for _, n := range needs {
		s := n.s
		s.used += n.amt
		s.leases++
		if s.cfg.RPM > 0 {
			s.rpm.add(m.nowLocked(), -1)
		}
		if s.cfg.TPM > 0 && c.Tokens > 0 {
			s.tpm.add(m.nowLocked(), -float64(c.Tokens))
		}
		if t := int64(s.cfg.LeaseTTL); t > 0 && (l.ttl == 0 || t < l.ttl) {
			l.ttl = t
		}
	}
	// The admission time feeds hold-time figures (Event.Held and the mean
	// hold behind wait estimates). A clock read costs as much as the rest of
	// an admission on some machines, so unless the clock was read anyway it
	// is taken for one lease in 16: a sample, not a census.
	m.sampled++
	l.admitted = 0
	if m.tnow != 0 || l.ttl > 0 || m.sampled%16 == 0 {
		l.admitted = m.nowLocked()
	}
	l.expires = 0
	if l.ttl > 0 {
		l.expires = l.admitted + l.ttl
		m.expiries.push(l)
	}
	out := l.public()
	m.emit(Event{Outcome: OutcomeAdmitted, WaiterID: waiterID, Priority: prio, Lease: l.id, Needs: l.pub, Waited: time.Duration(waited)})
	return out
}

func (l *lease) public() Lease {
	out := Lease{
		ID:        l.id,
		WaiterID:  l.waiterID,
		Candidate: l.candIdx,
		Needs:     l.pub,
		Tokens:    l.tokens,
		Owner:     l.owner,
		Waited:    time.Duration(l.waited),
	}
	if l.expires != 0 {
		out.Expires = time.Unix(0, l.expires)
	}
	return out
}

func (m *Memory) newLeaseLocked() *lease {
	var slot uint32
	if n := len(m.freeSlots); n > 0 {
		slot = m.freeSlots[n-1]
		m.freeSlots = m.freeSlots[:n-1]
	} else {
		slot = uint32(len(m.slots))
		m.slots = append(m.slots, &lease{})
	}
	l := m.slots[slot]
	reuse := uint64(l.id>>32) + 1
	l.id = LeaseID(reuse<<32 | uint64(slot))
	l.eidx = -1
	m.nLeases++
	return l
}

func (m *Memory) leaseLocked(id LeaseID) *lease {
	slot := uint64(id) & math.MaxUint32
	if slot >= uint64(len(m.slots)) {
		return nil
	}
	if l := m.slots[slot]; l.id == id && l.needs != nil {
		return l
	}
	return nil
}

// releaseLocked is the one path by which a lease ends, whatever the cause.
func (m *Memory) releaseLocked(l *lease, o Outcome) {
	var held int64
	if l.admitted != 0 {
		held = m.nowLocked() - l.admitted
	}
	for _, n := range l.needs {
		s := n.s
		s.used -= n.amt
		s.leases--
		switch {
		case l.admitted == 0: // hold time not sampled
		case s.meanHold == 0:
			s.meanHold = float64(held)
		default:
			s.meanHold += (float64(held) - s.meanHold) / 16
		}
		if s.waiting.len() > 0 {
			m.markDirty(s)
		}
	}
	if l.eidx >= 0 {
		m.expiries.remove(l.eidx)
	}
	m.emit(Event{Outcome: o, WaiterID: l.waiterID, Priority: l.prio, Lease: l.id, Needs: l.pub, Held: time.Duration(held)})
	l.needs = nil
	l.pub = nil
	l.waiterID = ""
	m.nLeases--
	m.freeSlots = append(m.freeSlots, uint32(uint64(l.id)&math.MaxUint32))
}

// checkOwnerLocked refuses fenced or foreign owners.
func (m *Memory) checkOwnerLocked(l *lease, owner Owner) error {
	if owner.ID != "" && m.isFenced(owner) {
		return fmt.Errorf("%w: %s was fenced", ErrStaleOwner, owner)
	}
	if l != nil && l.owner != owner {
		return fmt.Errorf("%w: lease %d belongs to %s, not %s", ErrStaleOwner, l.id, l.owner, owner)
	}
	return nil
}

// Release returns a lease's capacity; a second release is a no-op.
func (m *Memory) Release(ctx context.Context, id LeaseID, owner Owner) error {
	m.lock()
	defer m.unlock()
	l := m.leaseLocked(id)
	if err := m.checkOwnerLocked(l, owner); err != nil {
		return err
	}
	if l != nil {
		m.releaseLocked(l, OutcomeReleased)
	}
	return nil
}

// Renew extends a lease by its TTL.
func (m *Memory) Renew(ctx context.Context, id LeaseID, owner Owner) (time.Time, error) {
	m.lock()
	defer m.unlock()
	now := m.nowLocked()
	l := m.leaseLocked(id)
	if err := m.checkOwnerLocked(l, owner); err != nil {
		return time.Time{}, err
	}
	if l == nil {
		return time.Time{}, fmt.Errorf("%w: lease %d", ErrLeaseNotHeld, id)
	}
	if l.ttl == 0 {
		return time.Time{}, nil
	}
	l.expires = now + l.ttl
	m.expiries.fix(l.eidx)
	return time.Unix(0, l.expires), nil
}

// Reconcile settles a lease's TPM reservation against the tokens used.
func (m *Memory) Reconcile(ctx context.Context, id LeaseID, owner Owner, tokens int64) error {
	if tokens < 0 {
		return invalidf("reconcile with %d tokens", tokens)
	}
	m.lock()
	defer m.unlock()
	now := m.nowLocked()
	l := m.leaseLocked(id)
	if err := m.checkOwnerLocked(l, owner); err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("%w: lease %d", ErrLeaseNotHeld, id)
	}
	diff := l.tokens - tokens
	l.tokens = tokens
	for _, n := range l.needs {
		if n.s.cfg.TPM > 0 && diff != 0 {
			n.s.tpm.add(now, float64(diff))
			if diff > 0 && n.s.waiting.len() > 0 {
				m.markDirty(n.s)
			}
		}
	}
	return nil
}

// ---- waiting ----

// Cancel removes a queued waiter.
func (m *Memory) Cancel(ctx context.Context, waiterID string) error {
	m.lock()
	defer m.unlock()
	w := m.waiters[waiterID]
	if w == nil {
		return fmt.Errorf("%w: %s", ErrNotQueued, waiterID)
	}
	m.dropWaiterLocked(w, OutcomeCancelled, ErrCancelled)
	return nil
}

// Position reports where a queued waiter stands. It counts, in each class
// parked on the scope the waiter waits on, the members ahead of it: all or
// none of a class of another priority, else those before it in the class's
// order, which is its members' arrival order (see aheadIn). So it costs
// O(classes there × log members), not O(waiters there).
func (m *Memory) Position(ctx context.Context, waiterID string) (Position, error) {
	m.lock()
	defer m.unlock()
	w := m.waiters[waiterID]
	if w == nil {
		return Position{}, fmt.Errorf("%w: %s", ErrNotQueued, waiterID)
	}
	c := w.class
	s := c.waitingOn()
	ahead := 0
	counted := false
	for _, e := range s.waiting.items {
		counted = counted || e.p.c == c
		ahead += e.p.c.aheadIn(s, w)
	}
	if !counted {
		// Not parked there yet: only its own class is known to be ahead.
		ahead += c.members.before(w.seq)
	}
	return Position{Scope: s.name, Ahead: ahead, Queued: s.queued, EstimatedWait: s.waitEstimate(ahead + 1)}, nil
}

// aheadIn counts c's members that precede w in s's order (s.precedes). A
// class has one priority, so it is all of them or none unless it has w's.
// Then, in a FIFO scope, those that arrived before w are counted by a
// binary search. In a round-robin scope the order is by turn, then
// arrival; a class is one fairness key, whose turns are handed out in
// arrival order, so its members in arrival order are in turn order too and
// those that precede w are a prefix, found by a binary search. A member
// re-resolved into the class can break that (c.turnsMixed); such a class is
// walked.
func (c *class) aheadIn(s *scope, w *waiter) int {
	switch {
	case c.prio > w.prio:
		return c.members.len()
	case c.prio < w.prio:
		return 0
	case !s.cfg.RoundRobin:
		return c.members.before(w.seq)
	}
	vt := w.vtIn(s)
	i := slices.Index(c.rr, s) // -1 if s turned round-robin after c began
	precedes := func(o *waiter) bool {
		var ovt int64
		if i >= 0 {
			ovt = o.vtAt(i)
		}
		return ovt < vt || (ovt == vt && o.seq < w.seq)
	}
	if !c.turnsMixed {
		return c.members.countWhile(precedes)
	}
	n := 0
	c.members.each(func(o *waiter) {
		if precedes(o) {
			n++
		}
	})
	return n
}

// noteTurns marks c turnsMixed if w, just given its turns, has a turn in
// some round-robin scope out of arrival order among c's members.
func (c *class) noteTurns(w *waiter) {
	if c.turnsMixed || len(c.rr) == 0 {
		return
	}
	prev, next := c.members.neighbors(w)
	for i := range c.rr {
		vt := w.vtAt(i)
		if (prev != nil && prev.vtAt(i) > vt) || (next != nil && next.vtAt(i) < vt) {
			c.turnsMixed = true
			return
		}
	}
}

// ---- time ----

// reapLocked settles what fell due by now: waiters past their deadline or
// a MaxWait, leases past their expiry, scopes whose rate limits refilled.
func (m *Memory) reapLocked(now int64) {
	for m.deadlines.len() > 0 && m.deadlines.top().due <= now {
		m.dueLocked(m.deadlines.top(), now)
	}
	for m.expiries.len() > 0 && m.expiries.top().expires <= now {
		m.releaseLocked(m.expiries.top(), OutcomeExpired)
	}
	for m.rateWakes.len() > 0 && m.rateWakes.top().rateWakeAt <= now {
		s := m.rateWakes.top()
		m.rateWakes.remove(0)
		s.rateWakeAt = 0
		m.markDirty(s)
	}
}

// armLocked makes sure the timer fires by the next due event.
func (m *Memory) armLocked() {
	if m.closed {
		return
	}
	var next int64
	if m.deadlines.len() > 0 {
		next = m.deadlines.top().due
	}
	if m.expiries.len() > 0 {
		if t := m.expiries.top().expires; next == 0 || t < next {
			next = t
		}
	}
	if m.rateWakes.len() > 0 {
		if t := m.rateWakes.top().rateWakeAt; next == 0 || t < next {
			next = t
		}
	}
	if next == 0 || (m.timer != nil && m.timerAt <= next) {
		return
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	m.timerAt = next
	m.timer = m.clock.AfterFunc(time.Duration(next-m.now()), m.onTimer)
}

func (m *Memory) onTimer() {
	m.mu.Lock()
	m.timer = nil
	m.timerAt = 0
	m.reapLocked(m.now())
	m.unlock()
}

// ---- owners ----

// Fence declares an owner's generations up to gen gone.
func (m *Memory) Fence(ctx context.Context, id string, gen uint64) error {
	if id == "" {
		return invalidf("fence of an empty owner")
	}
	m.lock()
	defer m.unlock()
	now := m.nowLocked()
	if gen > m.fenced[id] {
		m.fenced[id] = gen
	} else if _, ok := m.fenced[id]; !ok {
		m.fenced[id] = gen
	}
	gone := func(o string, g uint64) bool { return o == id && g <= gen }

	var orphaned []*scope
	for _, s := range m.scopes {
		if !s.orphaned && gone(s.cfg.Owner, s.cfg.OwnerGen) {
			s.orphaned = true
			orphaned = append(orphaned, s)
		}
	}
	slices.SortFunc(orphaned, func(a, b *scope) int { return cmp.Compare(a.name, b.name) })
	for _, l := range m.slots {
		if l.needs == nil {
			continue
		}
		hit := gone(l.owner.ID, l.owner.Gen)
		for _, n := range l.needs {
			hit = hit || (n.s.orphaned && gone(n.s.cfg.Owner, n.s.cfg.OwnerGen))
		}
		if hit {
			m.releaseLocked(l, OutcomeFenced)
		}
	}
	var owned []*waiter
	for _, w := range m.waiters {
		if gone(w.owner.ID, w.owner.Gen) {
			owned = append(owned, w)
		}
	}
	// In arrival order, so that a replay sees the same events.
	slices.SortFunc(owned, func(a, b *waiter) int { return cmp.Compare(a.seq, b.seq) })
	for _, w := range owned {
		m.dropWaiterLocked(w, OutcomeFenced, fmt.Errorf("%w: %s", ErrFenced, w.owner))
	}
	m.reresolveLocked(now, orphaned, false)
	return nil
}

// Activate makes an owner's scopes usable again at generation gen.
func (m *Memory) Activate(ctx context.Context, id string, gen uint64) error {
	if id == "" {
		return invalidf("activate of an empty owner")
	}
	m.lock()
	defer m.unlock()
	now := m.nowLocked()
	if m.isFenced(Owner{ID: id, Gen: gen}) {
		return fmt.Errorf("%w: generation %d of %s is fenced", ErrStaleOwner, gen, id)
	}
	var active []*scope
	for _, s := range m.scopes {
		if s.cfg.Owner == id {
			s.cfg.OwnerGen = gen
			if s.orphaned {
				s.orphaned = false
				active = append(active, s)
			}
		}
	}
	m.reresolveLocked(now, active, true)
	return nil
}

// liveCandidatesLocked works out w's candidates after a change of usable
// scopes. Without a resolver it keeps what it has, less candidates on
// unusable scopes (never regaining ones dropped earlier). With one, it asks
// for fresh candidates and keeps those on usable scopes that have room in
// their queues (a scope w is already counted in has room for it).
func (m *Memory) liveCandidatesLocked(w *waiter) ([]Candidate, []cand, error) {
	old := w.class
	var live []cand
	if w.resolve == nil {
		for _, cd := range old.cands {
			tokens := w.cands[cd.idx].Tokens
			if !slices.ContainsFunc(cd.needs, func(n need) bool { return n.s.orphaned || n.s.tooManyTokens(tokens) }) {
				live = append(live, cd)
			}
		}
		return w.cands, live, nil
	}
	fresh, err := w.resolve(w.id)
	if err != nil {
		return nil, nil, err
	}
	for i := range fresh {
		if i >= MaxCandidates || fresh[i].validate() != nil {
			continue
		}
		needs, err := m.resolveNeedsLocked(fresh[i].Needs, nil)
		if err != nil || needs == nil {
			continue
		}
		tokens := fresh[i].Tokens
		if slices.ContainsFunc(needs, func(n need) bool { return n.s.tooManyTokens(tokens) }) {
			continue
		}
		full := slices.ContainsFunc(needs, func(n need) bool {
			q := n.s.cfg.QueueLimit
			return q > 0 && n.s.queued >= q && !slices.Contains(old.scopes, n.s)
		})
		if !full {
			live = append(live, cand{idx: i, needs: needs})
		}
	}
	return fresh, live, nil
}

// sortGlobally sorts ws in global order: priority, then arrival.
func sortGlobally(ws []*waiter) {
	slices.SortFunc(ws, func(a, b *waiter) int {
		return cmp.Or(cmp.Compare(b.prio, a.prio), cmp.Compare(a.seq, b.seq))
	})
}

// firstTurnAfter finds the earliest turn in rs held by a waiter of key fkey
// that arrived after w. Within a class turns follow arrival, so a class's
// candidate is its first member that arrived after w — not its head, which
// may have arrived before — unless the class's turns are mixed, when each
// later member is looked at. Cost: the classes touching rs, a search in
// each; only reselection uses it.
func firstTurnAfter(rs *scope, fkey string, w *waiter) (int64, bool) {
	var best int64
	found := false
	consider := func(o *waiter) {
		if o == nil || o == w || o.seq <= w.seq {
			return
		}
		if vt := o.vtIn(rs); !found || vt < best {
			best, found = vt, true
		}
	}
	for cc := range rs.classes {
		if cc.fkey != fkey || cc.members.len() == 0 {
			continue
		}
		if cc.turnsMixed {
			cc.members.each(consider)
			continue
		}
		consider(cc.members.firstAfter(w.seq))
	}
	return best, found
}

// reresolveLocked gives fresh candidates to the waiters affected by a
// change of usable scopes, fails those left with none, and settles the rest
// in global order. With all set, every waiter that has a resolver is
// asked (a scope coming back may serve anyone); otherwise only waiters that
// touch the changed scopes.
func (m *Memory) reresolveLocked(now int64, changed []*scope, all bool) {
	var affected []*waiter
	if all {
		for _, w := range m.waiters {
			if w.resolve != nil {
				affected = append(affected, w)
			}
		}
	} else {
		seen := make(map[*class]bool)
		for _, s := range changed {
			for c := range s.classes {
				if !seen[c] {
					seen[c] = true
					affected = c.members.appendTo(affected)
				}
			}
		}
	}
	sortGlobally(affected)
	var touched []*class
	for _, w := range affected {
		old := w.class
		if old == nil {
			continue
		}
		cands, live, err := m.liveCandidatesLocked(w)
		if err != nil {
			m.dropWaiterLocked(w, OutcomeNoCandidate, fmt.Errorf("%w: resolve %s: %v", ErrNoCandidate, w.id, err))
			continue
		}
		if len(live) == 0 {
			m.dropWaiterLocked(w, OutcomeNoCandidate, fmt.Errorf("%w: %s", ErrNoCandidate, w.id))
			continue
		}
		if key := m.classKeyLocked(old.fkey, w.prio, live, old.offset); string(key) == old.key {
			w.cands = cands
			touched = append(touched, old)
			continue
		}
		m.moveLocked(w, string(m.classKeyLocked(old.fkey, w.prio, live, 0)), live, cands, 0)
		m.emit(Event{Outcome: OutcomeReselected, WaiterID: w.id, Priority: w.prio})
		// The MaxWait of scopes it newly waits on may have passed.
		if m.maxWaitLocked(w, now) {
			touched = append(touched, w.class)
		}
	}
	// The pump settles them in global order, together with the waiters of
	// the scopes this change freed.
	for _, c := range touched {
		m.unsettle(c)
	}
	for _, s := range changed {
		m.markDirty(s)
	}
}
