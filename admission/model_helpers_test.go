package admission_test

// The reference model for TestModel and FuzzEngine (model_test.go).
//
// The model does not re-implement the engine's choices — which waiter a
// round-robin turn or a fairness hold favours is the engine's business. It
// keeps what is certain (who is queued with which candidates, which leases
// are live and what they hold, which scopes are orphaned, the rate buckets)
// and checks every event against the contract as it happens: the engine
// calls the Observer with its lock held and in order, so inside Observe the
// model sees exactly the state the engine decided on.
//
// What is checked precisely, and where:
//
//   - Never over (Observe, admitted): usage + amount ≤ the limit in force,
//     for every scope of the chosen candidate; no scope is orphaned; every
//     RPM and TPM bucket has the tokens.
//   - Atomic and exactly once: a waiter is admitted at most once, to one of
//     the candidates the engine still offers it, with all of that
//     candidate's needs; every lease ends exactly once (released, expired or
//     fenced), and only for a cause: its own Release, its TTL, a Fence that
//     covers its owner or one of its scopes. Lowering a limit ends nothing.
//   - Deadlines and wait limits: nobody is admitted after their own
//     deadline or at or after arrival + MaxWait of a scope of the chosen
//     candidate. A MaxWait drops exactly the candidates touching its scope,
//     when it passes (Queued shows it), with a reselected event while
//     candidates are left; a waiter times out only at its own deadline or
//     when a MaxWait dropped its last candidate, and its *TimeoutError names
//     that deadline or such a scope and its MaxWait. After the clock moves,
//     nobody is still queued past their own deadline and no lease is live
//     past its expiry.
//   - Refusals name their cause: a *QueueFullError names the first full
//     scope of the first candidate a full queue dropped; a request whose
//     every candidate reserves more tokens than a TPM gets a
//     *TokenLimitError naming the first such scope.
//   - Preference: a waiter admitted to candidate k had no earlier candidate
//     that surely fit (see fitsSurely).
//   - Order (doc.go "Order"): when W takes capacity in scope S, no queued W'
//     that precedes W in S's order is blocked by S alone. "Precedes" is known
//     exactly for priority, and for arrival in a plain scope or within one
//     fairness key in a round-robin scope (turns between keys are the
//     engine's). "Blocked by S alone" is claimed only when it is certain:
//     every candidate W' still has needs S, S lacks room for it, and every
//     other scope of that candidate surely fits W' (fitsScopeSurely). A
//     waiter blocked elsewhere may be passed, as the contract allows. Not
//     checked: passing by a waiter that has waited past S's fairness window
//     (it may be S's hold holder, which the contract lets use its hold).
//   - Holds: a hold (ScopeStats.Held) is for a queued waiter that has waited
//     the scope's fairness window and needs that amount there; a newcomer
//     admitted before anything else happens in its call, and outranking no
//     waiter the hold could be for, takes only what is beyond the hold.
//   - Prompt (after every step): no queued waiter has a candidate that
//     surely fits now. "Surely" is conservative: every scope has room beyond
//     any fairness hold in force (ScopeStats.Held), is not orphaned,
//     has rate tokens with a margin, and no other queued waiter touching the
//     scope precedes — or, in a round-robin scope, might precede — it.
//   - Bookkeeping (after every step): ScopeStats Used, Leases, Queued,
//     Orphaned, Limit, and the RPM/TPM bucket levels equal the model's;
//     Queued never exceeds QueueLimit; every waiter that ended was notified
//     exactly once, with the lease or the error its end event named, and a
//     waiter whose Enqueue failed is never notified.
//   - Owners: Release and Renew by a stale or foreign owner get
//     ErrStaleOwner and change nothing; releasing an ended lease is a no-op
//     (ErrStaleOwner once its owner is fenced); Renew returns now + the
//     lease's TTL; Activate of a fenced generation fails.
//   - Fencing: after Fence no live lease belongs to a fenced owner or uses an
//     orphaned scope, no queued waiter belongs to a fenced owner or is left
//     with no candidate, and every waiter with a Resolve that used an
//     orphaned scope was asked to resolve.
//   - Quiescence: after cancelling and releasing everything and letting the
//     clock run, every scope has Used, Leases, Queued and Held zero and full
//     rate buckets.
//
// Not checked: the order between fairness keys in a round-robin scope, which
// waiter a hold goes to and that holds end starvation (a liveness property
// random runs cannot pin down), Position's estimates, MeanHold.
//
// -admission.lenient makes the model follow the engine where it deviates
// from the contract in ways already reported (see model.lenient), so that
// long runs can look for anything else.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// rateMargin is how many tokens beyond what a candidate needs the model
// wants to see before it claims a rate bucket surely admits: the engine's
// bucket and the model's do the same arithmetic, but not necessarily the
// same float rounding, and the engine rounds its refill wake-ups up.
const rateMargin = 0.01

// bucketTolerance is how far ScopeStats' bucket levels may be from the
// model's before that is a failure.
const bucketTolerance = 1e-6

type waiterState uint8

const (
	waiterPending waiterState = iota // its Enqueue or TryAcquire is running
	waiterQueued                     // queued and not yet ended
	waiterEnded                      // an event ended it (admitted or failed)
	waiterRefused                    // Enqueue or TryAcquire returned an error
)

func (s waiterState) String() string {
	return [...]string{"pending", "queued", "ended", "refused"}[s]
}

// modelCandidate is one candidate of a waiter, as the model knows it.
type modelCandidate struct {
	admission.Candidate
	// dropped: the engine no longer offers it (an orphaned scope, or a full
	// queue when the waiter queued).
	dropped bool
	// queueFull: dropped because a queue was full (fullScope's). Such a
	// candidate is still offered while the waiter's own Enqueue tries to
	// admit it at once.
	queueFull bool
	fullScope string
	// tooMany: dropped because it reserves more tokens than overScope's
	// TPM. It is never offered.
	tooMany   bool
	overScope string
	// maxWaited: dropped because the MaxWait of one of its scopes passed.
	maxWaited bool
}

type modelWaiter struct {
	id       string
	seq      int // arrival order among all requests
	prio     int32
	key      string
	owner    admission.Owner
	arrival  time.Time
	deadline time.Time // its own; zero if none
	// lastMaxWait is when a MaxWait last dropped one of its candidates.
	lastMaxWait time.Time
	// wantTimeout is what its timeout's error must say.
	wantTimeout *admission.TimeoutError
	orig        []admission.Candidate // as requested
	cands       []modelCandidate
	hasResolve  bool
	resolved    int  // Resolve calls so far
	reselected  bool // a reselected event moved it to other candidates
	revived     bool // lenient: a Fence gave it back candidates dropped before
	try         bool
	state       waiterState
	end         admission.Outcome
	lease       admission.LeaseID
	notified    int
	enqueued    bool // Enqueue returned nil
}

// offered reports whether the engine offers candidate i now.
func (w *modelWaiter) offered(i int) bool {
	c := &w.cands[i]
	return !c.dropped || (c.queueFull && w.state == waiterPending)
}

func (w *modelWaiter) String() string {
	return fmt.Sprintf("%s(seq %d, prio %d, key %s)", w.id, w.seq, w.prio, w.key)
}

type modelLease struct {
	id       admission.LeaseID
	waiter   string
	needs    []admission.Need
	tokens   int64 // reserved against TPM, after Reconcile
	granted  int64 // the candidate's tokens at admission
	candIdx  int   // index in the waiter's candidate list then
	owner    admission.Owner
	admitted time.Time
	ttl      time.Duration
	expires  time.Time // zero if never
	expires0 time.Time // expiry at admission, for the notify check
	live     bool
	end      admission.Outcome
}

// modelBucket is the token bucket doc.go describes: perMinute tokens, full
// at first, refilled evenly over a minute, never above perMinute; a charge
// may leave it in debt.
type modelBucket struct {
	perMinute int64
	level     float64
	at        time.Time
}

func (b *modelBucket) levelAt(t time.Time) float64 {
	if b.perMinute == 0 {
		return math.Inf(1)
	}
	l := b.level
	if t.After(b.at) {
		l += float64(t.Sub(b.at)) * float64(b.perMinute) / float64(time.Minute)
	}
	return math.Min(l, float64(b.perMinute))
}

func (b *modelBucket) add(t time.Time, n float64) {
	if b.perMinute == 0 {
		return
	}
	b.level = math.Min(b.levelAt(t)+n, float64(b.perMinute))
	if t.After(b.at) {
		b.at = t
	}
}

type modelScope struct {
	name     string
	cfg      admission.ScopeConfig
	orphaned bool
	used     int64
	leases   int
	rpm, tpm modelBucket
}

// room reports whether amt more fits under the limit in force.
func (s *modelScope) room(amt int64) bool {
	return s.cfg.Limit == 0 || s.used+amt <= s.cfg.Limit
}

type modelOwner struct {
	gen       uint64 // current generation
	fenced    uint64 // highest fenced generation
	hasFenced bool
}

// op is the operation in progress, which some events must belong to.
type op struct {
	step   int    // the runner's operation index
	kind   string // enqueue, try, cancel, release, fence, activate, setscope, advance, ...
	waiter string
	lease  admission.LeaseID
	owner  string
	gen    uint64
	events int // events observed during the op
}

// scopeOrder summarizes the queued waiters touching one scope, for the
// "could anyone precede w here" question.
type scopeOrder struct {
	first, second *modelWaiter // by priority, then arrival
	// keys counts, per fairness key, the waiters at first's priority.
	keys []keyCount
	// reselectedAtTop: a waiter at first's priority was reselected.
	reselectedAtTop bool
}

// model is the reference model. Its mutex guards everything; the engine
// calls Observe, notify and Resolve while the test goroutine waits in an
// engine method, and the model never calls the engine.
type model struct {
	mu     sync.Mutex
	clk    *clock.Fake
	start  time.Time
	scopes map[string]*modelScope
	names  []string // scope names in a fixed order
	owners map[string]*modelOwner

	waiters map[string]*modelWaiter
	queued  []*modelWaiter // queued or pending, in seq order (lazily compacted)
	leases  map[admission.LeaseID]*modelLease
	live    []admission.LeaseID // live lease ids in admission order (lazily compacted)
	ended   []admission.LeaseID // recently ended leases, for releasing twice
	seq     int

	// lenient (-admission.lenient) makes the model follow three engine
	// deviations from the contract instead of failing on them, so that long
	// runs can look for anything else:
	//  1. a waiter that an operation leaves waiting for one scope alone may be
	//     passed there during that operation (see blockedBefore);
	//  2. a reselected waiter gets no FIFO order within its fairness key in
	//     round-robin scopes;
	//  3. a Fence that re-resolves a waiter without Resolve gives it back
	//     every requested candidate whose scopes are usable, also those
	//     dropped before (a full queue, an orphaned scope), with no
	//     QueueLimit check and no MaxWait from the candidates given back.
	lenient bool
	// blockedBefore holds the waiters blocked by one scope alone when the
	// operation began. The engine re-parks a waiter only when a scope it is
	// parked on is handed on, so one that a single release leaves waiting
	// for another scope alone can be passed there once; lenient mode lets
	// that pass, and strict mode says so in its failure.
	blockedBefore map[blockKey]bool

	counts map[string]int // what the run exercised, for the log
	// heldAtStart is ScopeStats.Held when the operation began.
	heldAtStart map[string]int64

	op         op
	changed    []*modelWaiter // waiters that ended or were notified since the last check
	violations []string
	events     ring // recent events, for failure reports
	kick       chan struct{}
}

func newModel(clk *clock.Fake) *model {
	return &model{
		clk:         clk,
		start:       clk.Now(),
		scopes:      make(map[string]*modelScope),
		owners:      make(map[string]*modelOwner),
		waiters:     make(map[string]*modelWaiter),
		leases:      make(map[admission.LeaseID]*modelLease),
		events:      ring{max: 40},
		kick:        make(chan struct{}, 1),
		counts:      make(map[string]int),
		heldAtStart: make(map[string]int64),
	}
}

func (m *model) violatef(format string, args ...any) {
	if len(m.violations) < 10 {
		m.violations = append(m.violations, fmt.Sprintf(format, args...))
	}
}

func (m *model) addScope(name string, cfg admission.ScopeConfig) {
	now := m.clk.Now()
	m.scopes[name] = &modelScope{
		name: name,
		cfg:  cfg,
		rpm:  modelBucket{perMinute: cfg.RPM, level: float64(cfg.RPM), at: now},
		tpm:  modelBucket{perMinute: cfg.TPM, level: float64(cfg.TPM), at: now},
	}
	m.names = append(m.names, name)
}

func (m *model) isFenced(o admission.Owner) bool {
	mo := m.owners[o.ID]
	return mo != nil && mo.hasFenced && o.Gen <= mo.fenced
}

// queuedWaiters returns the queued waiters in arrival order.
func (m *model) queuedWaiters() []*modelWaiter {
	out := m.queued[:0]
	for _, w := range m.queued {
		if w.state == waiterQueued || w.state == waiterPending {
			out = append(out, w)
		}
	}
	m.queued = out
	var q []*modelWaiter
	for _, w := range out {
		if w.state == waiterQueued {
			q = append(q, w)
		}
	}
	return q
}

// liveLeases returns the live leases in admission order.
func (m *model) liveLeases() []*modelLease {
	ids := m.live[:0]
	var out []*modelLease
	for _, id := range m.live {
		if l := m.leases[id]; l.live {
			ids = append(ids, id)
			out = append(out, l)
		}
	}
	m.live = ids
	return out
}

// touches reports whether one of w's offered candidates names scope name.
func (m *model) touches(w *modelWaiter, name string) bool {
	for i, c := range w.cands {
		if !w.offered(i) {
			continue
		}
		for _, n := range c.Needs {
			if n.Scope == name {
				return true
			}
		}
	}
	return false
}

// scopesOf appends to buf the distinct scopes w's offered candidates name.
func (m *model) scopesOf(w *modelWaiter, buf []string) []string {
	for i, c := range w.cands {
		if !w.offered(i) {
			continue
		}
		for _, n := range c.Needs {
			if !slices.Contains(buf, n.Scope) {
				buf = append(buf, n.Scope)
			}
		}
	}
	return buf
}

// queuedCount is the model's ScopeStats.Queued.
func (m *model) queuedCount(name string) int {
	n := 0
	for _, w := range m.queuedWaiters() {
		if m.touches(w, name) {
			n++
		}
	}
	return n
}

// queuedCounts is queuedCount for every scope at once.
func (m *model) queuedCounts() map[string]int {
	out := make(map[string]int, len(m.scopes))
	var buf [12]string
	for _, w := range m.queuedWaiters() {
		for _, name := range m.scopesOf(w, buf[:0]) {
			out[name]++
		}
	}
	return out
}

type keyCount struct {
	key string
	n   int
}

// orders summarizes every scope's queued waiters.
func (m *model) orders() map[string]*scopeOrder {
	out := make(map[string]*scopeOrder, len(m.scopes))
	var buf [12]string
	for _, w := range m.queuedWaiters() {
		for _, name := range m.scopesOf(w, buf[:0]) {
			o := out[name]
			if o == nil {
				o = &scopeOrder{}
				out[name] = o
			}
			switch {
			case o.first == nil || w.prio > o.first.prio:
				// Waiters arrive in seq order, so a tie keeps the earlier.
				o.second, o.first = o.first, w
				o.keys = append(o.keys[:0], keyCount{w.key, 1})
				o.reselectedAtTop = w.reselected
			case w.prio == o.first.prio:
				o.addKey(w.key)
				o.reselectedAtTop = o.reselectedAtTop || w.reselected
				if o.second == nil || w.prio > o.second.prio {
					o.second = w
				}
			case o.second == nil || w.prio > o.second.prio:
				o.second = w
			}
		}
	}
	return out
}

func (o *scopeOrder) addKey(key string) {
	for i := range o.keys {
		if o.keys[i].key == key {
			o.keys[i].n++
			return
		}
	}
	o.keys = append(o.keys, keyCount{key, 1})
}

// orderClear reports whether no queued waiter other than w that touches
// scope s precedes w in s's order, or might (a round-robin turn).
func (m *model) orderClear(w *modelWaiter, s *modelScope, ord map[string]*scopeOrder) bool {
	o := ord[s.name]
	if o == nil {
		return true
	}
	x := o.first
	if x == w {
		x = o.second
	}
	switch {
	case x == nil || x.prio < w.prio:
		return true
	case x.prio > w.prio:
		return false
	case s.cfg.RoundRobin:
		for _, k := range o.keys {
			if k.key != w.key {
				return false
			}
		}
		if m.lenient && (w.reselected || o.reselectedAtTop) {
			return false
		}
		return x.seq > w.seq
	default:
		return x.seq > w.seq
	}
}

// precedes reports whether a surely comes before b in scope s's order.
func (m *model) precedes(a, b *modelWaiter, s *modelScope) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if s.cfg.RoundRobin && a.key != b.key {
		return false // the turn decides; unknown to the model
	}
	if s.cfg.RoundRobin && m.lenient && (a.reselected || b.reselected) {
		return false
	}
	return a.seq < b.seq
}

// rateSurely reports whether s's buckets surely admit a candidate
// reserving tokens.
func (s *modelScope) rateSurely(now time.Time, tokens int64) bool {
	if s.cfg.RPM > 0 && s.rpm.levelAt(now) < 1+rateMargin {
		return false
	}
	if s.cfg.TPM > 0 && tokens > 0 && s.tpm.levelAt(now) < float64(tokens)+rateMargin {
		return false
	}
	return true
}

// fitsScopeSurely reports whether w could take amt of scope name now by
// every rule of the contract. held is ScopeStats.Held per scope when known
// (between steps); nil inside an event, where a fairness scope is never
// sure.
func (m *model) fitsScopeSurely(w *modelWaiter, name string, amt, tokens int64, held map[string]int64, ord map[string]*scopeOrder, now time.Time) bool {
	s := m.scopes[name]
	if s == nil || s.orphaned || !s.room(amt) || !s.rateSurely(now, tokens) {
		return false
	}
	if s.cfg.FairnessWindow > 0 {
		// A hold leaves later waiters only what is beyond it; the holder
		// itself may use it, so what is beyond it surely fits anyone.
		if held == nil || (held[name] != 0 && !s.room(amt+held[name])) {
			return false
		}
	}
	return m.orderClear(w, s, ord)
}

// tokensAvailable reports whether every TPM bucket c uses has its tokens.
func (m *model) tokensAvailable(c admission.Candidate, now time.Time) bool {
	for _, n := range c.Needs {
		if s := m.scopes[n.Scope]; s.cfg.TPM > 0 && c.Tokens > 0 && s.tpm.levelAt(now) < float64(c.Tokens)-1e-6 {
			return false
		}
	}
	return true
}

func (m *model) roomEverywhere(c admission.Candidate) bool {
	for _, n := range c.Needs {
		if s := m.scopes[n.Scope]; s.orphaned || !s.room(n.Amount) {
			return false
		}
	}
	return true
}

func (m *model) rateEverywhere(c admission.Candidate, now time.Time) bool {
	for _, n := range c.Needs {
		if !m.scopes[n.Scope].rateSurely(now, c.Tokens) {
			return false
		}
	}
	return true
}

// fitsSurely reports whether candidate i of w surely fits now.
func (m *model) fitsSurely(w *modelWaiter, i int, held map[string]int64, ord map[string]*scopeOrder, now time.Time) bool {
	if !w.offered(i) || m.isFenced(w.owner) {
		return false
	}
	c := w.cands[i]
	for _, n := range c.Needs {
		if !m.fitsScopeSurely(w, n.Scope, n.Amount, c.Tokens, held, ord, now) {
			return false
		}
	}
	return true
}

// blockedOnlyBy reports whether queued waiter w is surely waiting for scope
// s and nothing else: every candidate it still has needs s, s lacks room
// for it, and every other scope of that candidate surely fits it.
func (m *model) blockedOnlyBy(w *modelWaiter, s *modelScope, ord map[string]*scopeOrder, now time.Time) bool {
	if w.state != waiterQueued || m.isFenced(w.owner) {
		return false
	}
	any := false
	for i, c := range w.cands {
		if !w.offered(i) {
			continue
		}
		any = true
		blocked := false
		for _, n := range c.Needs {
			if n.Scope == s.name {
				if s.room(n.Amount) {
					return false
				}
				blocked = true
				continue
			}
			if !m.fitsScopeSurely(w, n.Scope, n.Amount, c.Tokens, nil, ord, now) {
				return false
			}
		}
		if !blocked {
			return false
		}
	}
	return any
}

type blockKey struct {
	w     *modelWaiter
	scope string
}

// noteBlocked records who waits for one scope alone.
func (m *model) noteBlocked(now time.Time) {
	clear(m.blockedBefore)
	if m.blockedBefore == nil {
		m.blockedBefore = make(map[blockKey]bool)
	}
	ord := m.orders()
	var buf [12]string
	for _, w := range m.queuedWaiters() {
		for _, name := range m.scopesOf(w, buf[:0]) {
			if m.blockedOnlyBy(w, m.scopes[name], ord, now) {
				m.blockedBefore[blockKey{w, name}] = true
			}
		}
	}
}

// reselectNote points at the known round-robin deviation when a waiter
// involved in a failure over round-robin scopes was reselected.
func (m *model) reselectNote(needs []admission.Need, ws ...*modelWaiter) string {
	if !slices.ContainsFunc(needs, func(n admission.Need) bool { return m.scopes[n.Scope].cfg.RoundRobin }) {
		return ""
	}
	for _, w := range ws {
		if w.reselected {
			return fmt.Sprintf(" (note: %s was reselected; an engine that gives a reselected waiter a new round-robin turn behind later waiters of its key fails like this — compare with -admission.lenient)", w.id)
		}
	}
	return ""
}

// usage describes the scopes of needs, for failure messages.
func (m *model) usage(needs []admission.Need) string {
	var b strings.Builder
	for _, n := range needs {
		s := m.scopes[n.Scope]
		fmt.Fprintf(&b, "%s: %d of %d used, held at start %d, orphaned %v; ", n.Scope, s.used, s.cfg.Limit, m.heldAtStart[n.Scope], s.orphaned)
	}
	return b.String()
}

// holdCandidates lists the queued waiters a hold in s can be for: those
// touching s that have waited its fairness window.
func (m *model) holdCandidates(s *modelScope, now time.Time) []*modelWaiter {
	var out []*modelWaiter
	for _, x := range m.queuedWaiters() {
		if now.Sub(x.arrival) >= s.cfg.FairnessWindow && m.touches(x, s.name) {
			out = append(out, x)
		}
	}
	return out
}

// ---- events ----

// Observe checks one event against the contract and applies it.
func (m *model) Observe(e admission.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	m.op.events++
	m.counts["event "+e.Outcome.String()]++
	m.events.add(fmt.Sprintf("%d @%s: %s waiter=%s lease=%d needs=%v", m.op.step, now.Sub(m.start), e.Outcome, e.WaiterID, e.Lease, e.Needs))
	// The engine settles what fell due before it decides anything else,
	// so by any event it has dropped every candidate whose MaxWait passed
	// (doing it here for a waiter it is yet to reach at this instant
	// changes no check of this event).
	m.applyMaxWait(now)
	switch e.Outcome {
	case admission.OutcomeQueued:
		w := m.waiters[e.WaiterID]
		if w == nil || w.state != waiterPending || m.op.waiter != w.id {
			m.violatef("queued event for %s, which is not being enqueued (%v)", e.WaiterID, describe(w))
			return
		}
		w.state = waiterQueued
	case admission.OutcomeAdmitted:
		m.admitted(e, now)
	case admission.OutcomeReleased, admission.OutcomeExpired:
		m.leaseEnded(e, now)
	case admission.OutcomeFenced:
		if e.Lease != 0 {
			m.leaseEnded(e, now)
		} else {
			m.waiterEnded(e, now)
		}
	case admission.OutcomeTimeout, admission.OutcomeCancelled, admission.OutcomeQueueFull, admission.OutcomeNoCandidate:
		m.waiterEnded(e, now)
	case admission.OutcomeRateLimited:
		w := m.waiters[e.WaiterID]
		if w == nil || (w.state != waiterPending && w.state != waiterQueued) {
			m.violatef("rate_limited event for %s, which is not waiting (%v)", e.WaiterID, describe(w))
		}
	case admission.OutcomeReselected:
		w := m.waiters[e.WaiterID]
		if w == nil || w.state != waiterQueued {
			m.violatef("reselected event for %s, which is not queued (%v)", e.WaiterID, describe(w))
			return
		}
		if k := m.op.kind; k == "fence" || k == "activate" {
			w.reselected = true // new candidates, from Resolve or fewer
			return
		}
		// Otherwise a MaxWait dropped some of its candidates, keeping its
		// place (no new turns): it must have some left.
		m.counts["max_wait: candidates dropped, others left"]++
		switch {
		case !w.lastMaxWait.Equal(now):
			m.violatef("reselected event for %s during %s, but no MaxWait of its candidates passed now: %s", w, m.op.kind, m.candString(w))
		case !slices.ContainsFunc(w.cands, func(c modelCandidate) bool { return !c.dropped }):
			m.violatef("reselected event for %s after a MaxWait, but it has no candidate left: %s", w, m.candString(w))
		}
	default:
		m.violatef("unknown event %v", e)
	}
}

func describe(w *modelWaiter) string {
	if w == nil {
		return "unknown waiter"
	}
	return fmt.Sprintf("%s is %s, ended %s", w, w.state, w.end)
}

func (m *model) admitted(e admission.Event, now time.Time) {
	w := m.waiters[e.WaiterID]
	if w == nil || (w.state != waiterQueued && w.state != waiterPending) {
		m.violatef("admitted %s, which is not waiting (%s)", e.WaiterID, describe(w))
		return
	}
	if w.state == waiterPending && m.op.waiter != w.id {
		m.violatef("admitted %s during another request's call", w)
	}
	if _, dup := m.leases[e.Lease]; dup || e.Lease == 0 {
		m.violatef("admitted %s with lease id %d, which was used before", w, e.Lease)
	}
	// The event names needs, not a candidate: among candidates with these
	// needs (they may differ in tokens) take the first whose tokens the TPM
	// buckets have, as the engine must.
	k := -1
	for i, c := range w.cands {
		if !w.offered(i) || !slices.Equal(c.Needs, e.Needs) {
			continue
		}
		if k < 0 {
			k = i
		}
		if m.tokensAvailable(c.Candidate, now) {
			k = i
			break
		}
	}
	if k < 0 {
		m.violatef("admitted %s with needs %v, not one of the candidates it still has %s", w, e.Needs, m.candString(w))
		return
	}
	cand := w.cands[k]
	if e.Waited != now.Sub(w.arrival) || e.Priority != w.prio {
		m.violatef("admitted event of %s says waited %s, priority %d; want %s, %d", w, e.Waited, e.Priority, now.Sub(w.arrival), w.prio)
	}
	if m.isFenced(w.owner) {
		m.violatef("admitted %s although its owner %s is fenced", w, w.owner)
	}
	if !w.deadline.IsZero() && now.After(w.deadline) {
		m.violatef("admitted %s at %s, after its deadline %s", w, now, w.deadline)
	}
	for _, n := range cand.Needs {
		s := m.scopes[n.Scope]
		if mw := s.cfg.MaxWait; mw > 0 && !now.Before(w.arrival.Add(mw)) && !w.revived {
			m.violatef("admitted %s at %s, after arrival %s + MaxWait %s of %s", w, now, w.arrival, mw, s.name)
		}
		if s.orphaned {
			m.violatef("admitted %s to orphaned scope %s", w, s.name)
		}
		if !s.room(n.Amount) {
			m.violatef("NEVER OVER: admitted %s taking %d of %s, which holds %d of limit %d", w, n.Amount, s.name, s.used, s.cfg.Limit)
		}
		if s.cfg.RPM > 0 {
			if l := s.rpm.levelAt(now); l < 1-1e-9 {
				m.violatef("admitted %s to %s with %.6f of RPM %d left", w, s.name, l, s.cfg.RPM)
			}
		}
		if s.cfg.TPM > 0 && cand.Tokens > 0 {
			if l := s.tpm.levelAt(now); l < float64(cand.Tokens)-1e-6 {
				m.violatef("admitted %s reserving %d tokens in %s with %.6f of TPM %d left", w, cand.Tokens, s.name, l, s.cfg.TPM)
			}
		}
	}

	// A hold: a newcomer admitted before anything else happened in the
	// operation, with no higher priority than any waiter the hold can be
	// for, uses only what is beyond the hold (doc.go "Order").
	if w.state == waiterPending && m.op.events == 1 {
		for _, n := range cand.Needs {
			s := m.scopes[n.Scope]
			h := m.heldAtStart[s.name]
			if h == 0 || s.cfg.Limit == 0 {
				continue
			}
			m.counts["hold: newcomers admitted to a scope with a hold"]++
			outranks := false
			for _, x := range m.holdCandidates(s, now) {
				outranks = outranks || w.prio > x.prio
			}
			if !outranks && !s.room(n.Amount+h) {
				m.violatef("HOLD: admitted newcomer %s taking %d of %s (%d of %d used) into the %d held for a waiter passed over", w, n.Amount, s.name, s.used, s.cfg.Limit, h)
			}
		}
	}

	ord := m.orders()
	for j := range k {
		if m.fitsSurely(w, j, nil, ord, now) {
			m.violatef("PREFERENCE: admitted %s to candidate %d %v although its earlier candidate %d %v fits (%s)%s", w, k, cand.Needs, j, w.cands[j].Needs, m.usage(w.cands[j].Needs), m.reselectNote(w.cands[j].Needs, w))
		}
	}
	for _, n := range cand.Needs {
		s := m.scopes[n.Scope]
		if fw := s.cfg.FairnessWindow; fw > 0 && w.state == waiterQueued && now.Sub(w.arrival) >= fw {
			continue // w may be s's hold holder, which may use its hold
		}
		for _, x := range m.queuedWaiters() {
			if x == w || !m.precedes(x, w, s) || !m.touches(x, s.name) {
				continue
			}
			m.counts["order: earlier waiter in a scope taken"]++
			if !m.blockedOnlyBy(x, s, ord, now) {
				continue
			}
			m.counts["order: earlier waiter blocked by that scope alone"]++
			if before := m.blockedBefore[blockKey{x, s.name}]; !m.lenient || before {
				note := m.reselectNote([]admission.Need{n}, w, x)
				if !before {
					note += fmt.Sprintf(" (note: when this operation began %s also waited for another scope; an engine that re-parks it only when that scope is handed on fails like this — compare with -admission.lenient)", x.id)
				}
				m.violatef("ORDER: admitted %s to %s (taking %d, %d of %d used) past %s, which precedes it there and waits for %s alone (candidates %s)%s",
					w, s.name, n.Amount, s.used, s.cfg.Limit, x, s.name, m.candString(x), note)
			}
		}
	}

	// Apply.
	l := &modelLease{
		id: e.Lease, waiter: w.id, needs: cand.Needs, tokens: cand.Tokens, granted: cand.Tokens,
		candIdx: k, owner: w.owner, admitted: now, live: true,
	}
	for _, n := range cand.Needs {
		s := m.scopes[n.Scope]
		s.used += n.Amount
		s.leases++
		s.rpm.add(now, -1)
		if cand.Tokens > 0 {
			s.tpm.add(now, -float64(cand.Tokens))
		}
		if t := s.cfg.LeaseTTL; t > 0 && (l.ttl == 0 || t < l.ttl) {
			l.ttl = t
		}
	}
	if l.ttl > 0 {
		l.expires = now.Add(l.ttl)
	}
	l.expires0 = l.expires
	m.leases[l.id] = l
	m.live = append(m.live, l.id)
	w.state, w.end, w.lease = waiterEnded, admission.OutcomeAdmitted, l.id
	m.changed = append(m.changed, w)
}

// recentlyChanged returns the waiters changed since the last call.
func (m *model) recentlyChanged() []*modelWaiter {
	out := m.changed
	m.changed = nil
	return out
}

func (m *model) leaseEnded(e admission.Event, now time.Time) {
	l := m.leases[e.Lease]
	if l == nil {
		m.violatef("%s event for lease %d, which was never admitted", e.Outcome, e.Lease)
		return
	}
	if !l.live {
		m.violatef("EXACTLY ONCE: %s event for lease %d, which already ended %s", e.Outcome, e.Lease, l.end)
		return
	}
	// Held is zero when the engine did not time the lease (admission.go).
	if !slices.Equal(e.Needs, l.needs) || e.WaiterID != l.waiter || (e.Held != 0 && e.Held != now.Sub(l.admitted)) {
		m.violatef("%s event for lease %d says waiter %s, needs %v, held %s; want %s, %v, %s", e.Outcome, l.id, e.WaiterID, e.Needs, e.Held, l.waiter, l.needs, now.Sub(l.admitted))
	}
	switch e.Outcome {
	case admission.OutcomeReleased:
		if !(m.op.kind == "release" && m.op.lease == l.id) && !(m.op.kind == "fence" && m.fencedBy(l)) {
			m.violatef("lease %d of %s released during %s", l.id, l.waiter, m.op.kind)
		}
	case admission.OutcomeExpired:
		if l.ttl == 0 || now.Before(l.expires) {
			m.violatef("lease %d of %s expired at %s, its expiry is %s (ttl %s)", l.id, l.waiter, now, l.expires, l.ttl)
		}
	case admission.OutcomeFenced:
		if m.op.kind != "fence" || !m.fencedBy(l) {
			m.violatef("lease %d of %s (owner %s, needs %v) fenced during %s %s@%d", l.id, l.waiter, l.owner, l.needs, m.op.kind, m.op.owner, m.op.gen)
		}
	}
	l.live, l.end = false, e.Outcome
	for _, n := range l.needs {
		s := m.scopes[n.Scope]
		s.used -= n.Amount
		s.leases--
	}
	m.ended = append(m.ended, l.id)
	if len(m.ended) > 64 {
		m.ended = m.ended[len(m.ended)-64:]
	}
}

// fencedBy reports whether the Fence in progress covers lease l.
func (m *model) fencedBy(l *modelLease) bool {
	if l.owner.ID == m.op.owner && l.owner.Gen <= m.op.gen {
		return true
	}
	for _, n := range l.needs {
		if s := m.scopes[n.Scope]; s.orphaned && s.cfg.Owner == m.op.owner && s.cfg.OwnerGen <= m.op.gen {
			return true
		}
	}
	return false
}

func (m *model) waiterEnded(e admission.Event, now time.Time) {
	w := m.waiters[e.WaiterID]
	if w == nil || (w.state != waiterQueued && w.state != waiterPending) {
		m.violatef("%s event for %s, which is not waiting (%s)", e.Outcome, e.WaiterID, describe(w))
		return
	}
	if w.state == waiterQueued && e.Waited != now.Sub(w.arrival) {
		m.violatef("%s event of %s says waited %s; it arrived %s ago", e.Outcome, w, e.Waited, now.Sub(w.arrival))
	}
	switch e.Outcome {
	case admission.OutcomeTimeout:
		w.wantTimeout = &admission.TimeoutError{Waited: now.Sub(w.arrival)}
		if !w.deadline.IsZero() && !now.Before(w.deadline) {
			w.wantTimeout.Setting = admission.SettingDeadline
			w.wantTimeout.Value = w.deadline.Sub(w.arrival)
			break
		}
		w.wantTimeout.Setting = admission.SettingMaxWait
		m.counts["max_wait: waiters timed out, no candidate left"]++
		switch {
		case slices.ContainsFunc(w.cands, func(c modelCandidate) bool { return !c.dropped }):
			m.violatef("%s timed out at %s, before its deadline %s and with candidates left: %s", w, now, w.deadline, m.candString(w))
		case !w.lastMaxWait.Equal(now):
			m.violatef("%s timed out at %s, before its deadline %s, but no MaxWait dropped a candidate now: %s", w, now, w.deadline, m.candString(w))
		}
	case admission.OutcomeCancelled:
		if m.op.kind != "cancel" || m.op.waiter != w.id {
			m.violatef("%s cancelled during %s %s", w, m.op.kind, m.op.waiter)
		}
	case admission.OutcomeFenced:
		if m.op.kind != "fence" || !m.isFenced(w.owner) {
			m.violatef("%s (owner %s) fenced during %s %s@%d", w, w.owner, m.op.kind, m.op.owner, m.op.gen)
		}
	case admission.OutcomeQueueFull:
		if w.state != waiterPending {
			m.violatef("%s failed queue_full after it was queued", w)
		}
	case admission.OutcomeNoCandidate:
		if k := m.op.kind; !(k == "fence" || k == "activate" || m.op.waiter == w.id) {
			m.violatef("%s failed no_candidate during %s", w, k)
		}
	}
	w.state, w.end = waiterEnded, e.Outcome
	m.changed = append(m.changed, w)
}

// wantErr is the error a waiter's notify must carry for its end.
func wantErr(o admission.Outcome) error {
	switch o {
	case admission.OutcomeTimeout:
		return admission.ErrTimeout
	case admission.OutcomeCancelled:
		return admission.ErrCancelled
	case admission.OutcomeFenced:
		return admission.ErrFenced
	case admission.OutcomeQueueFull:
		return admission.ErrQueueFull
	case admission.OutcomeNoCandidate:
		return admission.ErrNoCandidate
	}
	return nil
}

// notifier is the notify func for waiter id.
func (m *model) notifier(id string) func(admission.Lease, error) {
	return func(l admission.Lease, err error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		defer func() {
			select {
			case m.kick <- struct{}{}:
			default:
			}
		}()
		w := m.waiters[id]
		w.notified++
		m.changed = append(m.changed, w)
		m.events.add(fmt.Sprintf("%d: notify %s lease=%d err=%v", m.op.step, id, l.ID, err))
		switch {
		case w.notified > 1:
			m.violatef("EXACTLY ONCE: %s notified %d times (now lease %d, err %v)", w, w.notified, l.ID, err)
			return
		case w.state == waiterRefused:
			m.violatef("%s notified (lease %d, err %v) although its Enqueue failed", w, l.ID, err)
			return
		case w.state != waiterEnded:
			m.violatef("%s notified (lease %d, err %v) while %s, before any end event", w, l.ID, err, w.state)
			return
		}
		if w.end != admission.OutcomeAdmitted {
			if want := wantErr(w.end); err == nil || !errors.Is(err, want) {
				m.violatef("%s ended %s but was notified lease %d, err %v", w, w.end, l.ID, err)
			}
			if w.end == admission.OutcomeTimeout {
				m.checkTimeoutError(w, err)
			}
			return
		}
		if err != nil {
			m.violatef("%s was admitted (lease %d) but notified err %v", w, w.lease, err)
			return
		}
		m.checkLease(w, l)
	}
}

// checkTimeoutError checks that a timeout's error names the limit that
// fired: w's own deadline, or the MaxWait of a scope of a candidate that a
// MaxWait dropped.
func (m *model) checkTimeoutError(w *modelWaiter, err error) {
	var te *admission.TimeoutError
	want := w.wantTimeout
	if !errors.As(err, &te) || want == nil {
		m.violatef("%s timed out with %v, not a *TimeoutError", w, err)
		return
	}
	ok := te.Setting == want.Setting && te.Waited == want.Waited && te.RetryAfter >= 0 && te.WaitingOn != ""
	switch want.Setting {
	case admission.SettingDeadline:
		ok = ok && te.Scope == "" && te.Value == want.Value
	default:
		s := m.scopes[te.Scope]
		named := slices.ContainsFunc(w.cands, func(c modelCandidate) bool {
			return c.maxWaited && slices.ContainsFunc(c.Needs, func(n admission.Need) bool { return n.Scope == te.Scope })
		})
		ok = ok && s != nil && named && te.Value == s.cfg.MaxWait && !w.arrival.Add(s.cfg.MaxWait).After(m.clk.Now())
	}
	if !ok {
		m.violatef("%s timed out with %+v; want setting %s, waited %s, value %s, and a scope whose MaxWait dropped one of its candidates %s",
			w, *te, want.Setting, want.Waited, want.Value, m.candString(w))
	}
}

// passedScope is the first scope of c whose MaxWait, counted from w's
// arrival, has passed by now; nil if none has.
func (m *model) passedScope(w *modelWaiter, c admission.Candidate, now time.Time) *modelScope {
	for _, n := range c.Needs {
		if s := m.scopes[n.Scope]; s.cfg.MaxWait > 0 && !w.arrival.Add(s.cfg.MaxWait).After(now) {
			return s
		}
	}
	return nil
}

// applyMaxWait drops every queued waiter's candidates whose MaxWait has
// passed by now.
func (m *model) applyMaxWait(now time.Time) {
	for _, w := range m.queuedWaiters() {
		for i := range w.cands {
			c := &w.cands[i]
			if !c.dropped && m.passedScope(w, c.Candidate, now) != nil {
				c.dropped, c.queueFull, c.maxWaited = true, false, true
				w.lastMaxWait = now
			}
		}
	}
}

// newCandidate is c as a waiter arriving (or resolving) now has it: dropped
// if it uses an orphaned scope or reserves more tokens than a TPM before
// that; a full queue is the caller's to check.
func (m *model) newCandidate(c admission.Candidate) modelCandidate {
	mc := modelCandidate{Candidate: c}
	for _, n := range c.Needs {
		s := m.scopes[n.Scope]
		if s.orphaned {
			mc.dropped = true
			return mc
		}
		if s.cfg.TPM > 0 && c.Tokens > s.cfg.TPM {
			mc.dropped, mc.tooMany, mc.overScope = true, true, s.name
			return mc
		}
	}
	return mc
}

// checkLease compares a Lease handed out for w with the model's.
func (m *model) checkLease(w *modelWaiter, got admission.Lease) {
	ml := m.leases[w.lease]
	want := admission.Lease{
		ID: ml.id, WaiterID: w.id, Candidate: ml.candIdx, Needs: ml.needs, Tokens: ml.granted,
		Owner: ml.owner, Waited: ml.admitted.Sub(w.arrival), Expires: ml.expires0,
	}
	if got.ID != want.ID || got.WaiterID != want.WaiterID || got.Candidate != want.Candidate ||
		!slices.Equal(got.Needs, want.Needs) || got.Tokens != want.Tokens || got.Owner != want.Owner ||
		got.Waited != want.Waited || !got.Expires.Equal(want.Expires) {
		m.violatef("lease handed to %s is %+v, want %+v", w, got, want)
	}
}

// resolver is the Resolve func of waiter id: it answers with candidates
// drawn from gen and records them.
func (m *model) resolver(id string, gen func() []admission.Candidate) func(string) ([]admission.Candidate, error) {
	return func(got string) ([]admission.Candidate, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		w := m.waiters[id]
		if got != id {
			m.violatef("Resolve of %s called with id %q", id, got)
		}
		if k := m.op.kind; k != "fence" && k != "activate" {
			m.violatef("Resolve of %s called during %s", id, k)
		}
		cands := gen()
		m.events.add(fmt.Sprintf("%d: resolve %s -> %v", m.op.step, id, cands))
		if w.state != waiterQueued {
			m.violatef("Resolve of %s called while it is %s", w, w.state)
			return cands, nil
		}
		w.resolved++
		w.cands = w.cands[:0]
		for _, c := range cands {
			w.cands = append(w.cands, m.newCandidate(c))
		}
		return cands, nil
	}
}

func (m *model) usesOrphaned(c admission.Candidate) bool {
	for _, n := range c.Needs {
		if m.scopes[n.Scope].orphaned {
			return true
		}
	}
	return false
}

func (m *model) candString(w *modelWaiter) string {
	var b strings.Builder
	for i, c := range w.cands {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%v", i, c.Needs)
		if c.Tokens > 0 {
			fmt.Fprintf(&b, "+%dtok", c.Tokens)
		}
		switch {
		case c.maxWaited:
			b.WriteString("(dropped: max wait)")
		case c.tooMany:
			b.WriteString("(dropped: tokens)")
		case c.queueFull:
			b.WriteString("(dropped: queue full)")
		case c.dropped:
			b.WriteString("(dropped)")
		}
	}
	return b.String()
}

// ring keeps the last max strings.
type ring struct {
	max  int
	next int
	buf  []string
}

func (r *ring) add(s string) {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % r.max
}

func (r *ring) String() string {
	var b strings.Builder
	for i := range r.buf {
		b.WriteString("\t")
		b.WriteString(r.buf[(r.next+i)%len(r.buf)])
		b.WriteString("\n")
	}
	return b.String()
}
