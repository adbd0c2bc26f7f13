package admissiontest

// The reference model that Model and ModelInput (model.go) check an engine
// against.
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
// ModelConfig.Lenient makes the model follow the engine where it deviates
// from the contract in ways already reported (see model.lenient), so that
// long runs can look for anything else.

import (
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

	// lenient (ModelConfig.Lenient) makes the model follow three engine
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
	// lenientFlag is how a failure report names the switch to lenient mode.
	lenientFlag string
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
			return fmt.Sprintf(" (note: %s was reselected; an engine that gives a reselected waiter a new round-robin turn behind later waiters of its key fails like this — compare with %s)", w.id, m.lenientFlag)
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
