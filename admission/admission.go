package admission

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ScopeConfig is one named capacity. Every limit field uses zero for "no
// limit", so the zero ScopeConfig admits everything at once.
type ScopeConfig struct {
	// Limit is the concurrent capacity: the sum of the amounts of the leases
	// held in the scope never exceeds it. Default 0: unlimited.
	Limit int64
	// QueueLimit bounds how many waiters may be queued with a candidate that
	// touches the scope; past it the candidate is dropped, and a waiter left
	// with none gets a *QueueFullError. Default 0: unbounded.
	QueueLimit int
	// MaxWait bounds how long a waiter may wait on the candidates that
	// touch the scope, counted from its arrival: once it has passed, those
	// candidates are dropped (as a full queue drops them) and the waiter
	// waits on its others. A waiter left with none fails with a
	// *TimeoutError naming the scope. A change applies to the waiters
	// already queued. Default 0: no bound.
	MaxWait time.Duration
	// LeaseTTL is how long a lease in the scope lives without Renew; an
	// expired lease is reaped and its capacity returned. A lease takes the
	// smallest TTL of its scopes. Default 0: leases never expire.
	LeaseTTL time.Duration
	// FairnessWindow is how long a waiter may be passed over in the scope by
	// later waiters (allowed only while it cannot be admitted) before the
	// scope holds the capacity it needs. Counted from the waiter's arrival.
	// Default 0: never held.
	FairnessWindow time.Duration
	// RoundRobin orders waiters of the same priority by fairness key in
	// turn (FIFO within a key) instead of by arrival alone. Default false.
	RoundRobin bool
	// RPM is the requests-per-minute rate limit: a token bucket of RPM
	// requests refilled evenly over a minute. Default 0: no limit.
	RPM int64
	// TPM is the tokens-per-minute rate limit: a bucket of TPM tokens
	// refilled evenly over a minute; a lease reserves its candidate's Tokens
	// and Reconcile settles the difference. A candidate reserving more than
	// TPM tokens can never be admitted and is dropped at once; a request
	// left with none fails with a *TokenLimitError. Default 0: no limit.
	TPM int64
	// Owner, when set, makes the scope belong to a process or node
	// connection: Fence of that owner at OwnerGen or later orphans the
	// scope, and Activate makes it usable again. Default "": no owner.
	Owner string
	// OwnerGen is the owner's generation that the scope belongs to.
	OwnerGen uint64
	// FailOpen says what a home that can lose its decider (a fleet whose
	// leader no replica reaches) does with the scope meanwhile: admit on
	// each replica up to that replica's share of the scope's limits
	// (true), or nothing (false). A scope with no concurrency, rpm or
	// tpm limit, or a shadow one, has nothing to exceed and fails open
	// whatever it says.
	// The memory home always decides and ignores it. An owner's scope
	// cannot fail open: its owner's fencing is the decider's to know.
	// A scope with a Budget (not shadow) fails closed whatever it says:
	// spend is counted by the decider alone, and a share of it per
	// replica would let the fleet spend the whole budget once per
	// replica. Default false: fail closed.
	FailOpen bool
	// Paused stops the scope admitting: its leases stay held and are
	// released as usual, and its waiters stay queued, or are admitted on
	// their other candidates, or (with a Resolve) get fresh candidates at
	// the moment of the pause. Setting it false again admits at once what
	// waits. Operators and the gateway pause a scope for a while (an
	// upstream's Retry-After, a node draining); a pause is not a fence.
	// Default false.
	Paused bool
	// Shadow makes the scope decide as usual but enforce nothing, so that
	// a new limit can be tried on live traffic: its Limit, QueueLimit,
	// MaxWait, RPM, TPM and FairnessWindow never make a request wait and
	// never drop a candidate, while its usage (Used, Leases, the rate
	// buckets) is kept as for an enforced scope. Beside it the engine keeps
	// what the scope would hold if it enforced, and counts (ScopeStats
	// Shadow*) and reports (an OutcomeShadow Event) each admission it
	// would have made wait, refused or dropped at MaxWait (see shadow.go
	// for exactly what is simulated). A shadow scope's rate buckets are
	// charged but never left in debt. Setting it false enforces from then
	// on, as a lowered limit does: nothing held is revoked. Default false.
	Shadow bool

	// Budget is the scope's spending limit in its window [BudgetFrom,
	// BudgetUntil): the cost settled in the window plus the cost reserved
	// by the leases held never exceeds it, except by what settlements
	// (Reconcile) add beyond the reservations of the leases in flight
	// (one request's real cost less its estimate, each). A lease reserves its
	// candidate's Cost at admission and settles it when it ends (Release,
	// expiry, fence: the last reconciled cost, else the whole
	// reservation). A candidate whose Cost can never fit what is left of
	// the window is dropped at once, and a waiter left with none fails
	// with a *BudgetExceededError; one that only the reservations in
	// flight keep out waits for them to settle. When the window ends the
	// engine starts the next itself, from BudgetUntil with nothing spent
	// and no known end, until it is configured. The unit is the caller's
	// (a fixed-point amount of money). Default 0: no budget.
	Budget int64
	// BudgetFrom and BudgetUntil bound the budget's window; with a
	// Budget, BudgetUntil must come after BudgetFrom, and neither may be
	// zero.
	BudgetFrom, BudgetUntil time.Time
	// BudgetSpent is what the window had spent before this configuration
	// (the caller reads it from its store). It is applied only when the
	// window in force changes: a new scope, a budget added, or a
	// BudgetFrom other than the start of the window in force. A
	// reconfiguration within the window keeps what the engine has
	// counted since. A home that starts afresh (a restart, a fleet's
	// new leader) starts from it too, so callers keep it current from
	// their store. Default 0.
	BudgetSpent int64
}

// Validate reports a configuration that can never be meaningful.
func (c ScopeConfig) Validate() error {
	switch {
	case c.Limit < 0:
		return invalidf("scope limit %d is negative", c.Limit)
	case c.QueueLimit < 0:
		return invalidf("scope queue limit %d is negative", c.QueueLimit)
	case c.MaxWait < 0, c.LeaseTTL < 0, c.FairnessWindow < 0:
		return invalidf("scope durations must not be negative")
	case c.RPM < 0, c.TPM < 0:
		return invalidf("scope rate limits must not be negative")
	case c.Owner == "" && c.OwnerGen != 0:
		return invalidf("scope owner generation set without an owner")
	case c.Owner != "" && c.FailOpen:
		return invalidf("scope of owner %s cannot fail open", c.Owner)
	case c.Budget < 0, c.BudgetSpent < 0:
		return invalidf("scope budget and budget spent must not be negative")
	case c.Budget > 0 && (c.BudgetFrom.IsZero() || !c.BudgetUntil.After(c.BudgetFrom)):
		return invalidf("scope budget window [%s, %s) is empty or unbounded", c.BudgetFrom, c.BudgetUntil)
	}
	return nil
}

// Need is an amount of one scope.
type Need struct {
	Scope  string
	Amount int64
}

// Candidate is one way to serve a request: every scope it needs, taken all
// at once, plus the tokens it reserves against the TPM of those scopes and
// the cost it reserves against their Budget (scopes without a TPM or a
// Budget ignore them).
type Candidate struct {
	Needs  []Need
	Tokens int64
	// Cost is the estimated cost of the work, in the unit of the scopes'
	// Budget; Reconcile settles it to the real cost. Not negative.
	Cost int64
}

// Settlement is what a lease's work really used, for Reconcile: its tokens
// (against TPM) and its cost (against Budget). Both replace what the lease
// reserved; a caller that knows only one passes the lease's own value of
// the other (Lease.Tokens, Lease.Cost).
type Settlement struct {
	Tokens, Cost int64
}

// Owner says which process or node connection holds a lease. Gen grows with
// each reconnect; a fenced generation can never renew or release again.
type Owner struct {
	ID  string
	Gen uint64
}

func (o Owner) String() string { return fmt.Sprintf("%s@%d", o.ID, o.Gen) }

// MaxCandidates bounds a request's candidate list.
const MaxCandidates = 64

// Request is a waiter: one unit of work asking for admission.
type Request struct {
	// ID names the waiter; it must be unique among queued waiters.
	ID string
	// Priority: higher is admitted first.
	Priority int32
	// FairnessKey is the tenant, for round-robin scopes.
	FairnessKey string
	// Deadline, if set, is when waiting gives up with a *TimeoutError,
	// whatever candidates are left.
	Deadline time.Time
	// Owner holds the lease once granted.
	Owner Owner
	// Candidates in preference order; the first that fits is taken.
	Candidates []Candidate
	// Place, if not zero, is where the waiter stands in arrival order: the
	// Place of a lease this engine granted earlier for the same work, so
	// that work sent back to the queue (a retry, an upstream's refusal)
	// waits where it first arrived, not behind all that arrived since. A
	// place the engine cannot have given (another engine's, after a
	// restart) is ignored, and the waiter arrives now. Zero: it arrives
	// now.
	Place uint64
	// Hold bounds how long the work a lease admits runs once granted:
	// its holder ends that work within Hold of the grant (the gateway's
	// call timeout). A home that loses sight of a holder without proof
	// that it died (a fleet replica gone silent) keeps the lease's
	// capacity held for that long, so that work it cannot see end is
	// never run beside work admitted in its place. The memory home sees
	// every holder and ignores it. Zero: no bound; such a lease is held
	// until its holder speaks again or is proven dead. Not negative.
	Hold time.Duration
	// Resolve, if set, is asked for fresh candidates when a scope this
	// waiter uses is fenced, orphaned or re-activated. Without it the waiter
	// just loses candidates that touch unusable scopes. It is called with
	// the engine's lock held and must not call the engine.
	Resolve func(id string) ([]Candidate, error)
	// Spec describes the waiter's candidates, for a home whose deciding
	// process cannot call this process's Resolve (a fleet's leader, for a
	// waiter of another replica): its caller's encoding, which that home
	// hands to a resolver its caller registered there. The memory home
	// ignores it. Nil: none.
	Spec []byte
}

// Validate reports malformed requests. It checks shape only; unknown scopes
// are the engine's to report.
func (r Request) Validate() error {
	if r.ID == "" {
		return invalidf("request has no id")
	}
	if len(r.Candidates) == 0 {
		return invalidf("request %s has no candidates", r.ID)
	}
	if r.Hold < 0 {
		return invalidf("request %s has a negative hold bound", r.ID)
	}
	if len(r.Candidates) > MaxCandidates {
		return invalidf("request %s has %d candidates; at most %d", r.ID, len(r.Candidates), MaxCandidates)
	}
	for i, c := range r.Candidates {
		if err := c.validate(); err != nil {
			return fmt.Errorf("request %s candidate %d: %w", r.ID, i, err)
		}
	}
	return nil
}

func (c Candidate) validate() error {
	if len(c.Needs) == 0 {
		return invalidf("candidate needs no scope")
	}
	if c.Tokens < 0 {
		return invalidf("candidate reserves %d tokens", c.Tokens)
	}
	if c.Cost < 0 {
		return invalidf("candidate reserves a cost of %d", c.Cost)
	}
	for i, n := range c.Needs {
		if n.Scope == "" {
			return invalidf("need %d names no scope", i)
		}
		if n.Amount < 0 {
			return invalidf("need %d of scope %s is negative", i, n.Scope)
		}
		for _, m := range c.Needs[:i] {
			if m.Scope == n.Scope {
				return invalidf("scope %s is named twice in one candidate", n.Scope)
			}
		}
	}
	return nil
}

// LeaseID identifies a lease.
type LeaseID uint64

// Lease is an admission: the chosen candidate's amounts, held until Release,
// expiry or fencing, whichever comes first.
type Lease struct {
	ID       LeaseID
	WaiterID string
	// Candidate is the index of the chosen candidate in the request.
	Candidate int
	// Needs, Tokens and Cost are what the lease holds (the chosen
	// candidate's).
	Needs  []Need
	Tokens int64
	Cost   int64
	Owner  Owner
	// Waited is how long the waiter queued (zero if admitted at once). The
	// engine reads the clock only when a decision needs it, so a lease
	// carries no admission time; a caller that wants one reads its clock.
	Waited time.Duration
	// Expires is when the lease is reaped unless renewed; zero if never.
	Expires time.Time
	// Place is the waiter's place in arrival order, for a Request that
	// sends the same work back to the queue.
	Place uint64
}

// Position is where a queued waiter stands.
type Position struct {
	// Scope is the scope the waiter is waiting on now (its first
	// candidate's blocking scope).
	Scope string
	// Ahead counts, exactly, the waiters queued on that scope that come
	// before it in the scope's order (or, until it is first parked there,
	// the waiters of its own class that arrived before it).
	Ahead int
	// Queued counts every waiter queued on that scope.
	Queued int
	// EstimatedWait is a guess from recent hold times in that scope (and
	// its RPM): the waiters up to this one, served Limit at a time.
	EstimatedWait time.Duration
	// Place is the waiter's place in arrival order (Request.Place), for
	// a caller that takes it out and queues the same work again, with
	// other candidates, where it stood.
	Place uint64
}

// ScopeStats is a scope's state at one moment.
type ScopeStats struct {
	Name   string
	Config ScopeConfig
	// Used is the sum of held amounts; it may exceed a lowered Limit.
	Used int64
	// Leases counts held leases in the scope.
	Leases int
	// Queued counts waiters with a candidate touching the scope.
	Queued int
	// Orphaned scopes belong to a fenced owner and admit nothing.
	Orphaned bool
	// Held is the amount reserved for a waiter passed over too long.
	Held int64
	// RPMAvailable and TPMAvailable are the rate buckets' current levels.
	RPMAvailable, TPMAvailable float64
	// MeanHold is the recent mean lease hold time.
	MeanHold time.Duration
	// ShadowWaits, ShadowRefusals and ShadowTimeouts count what the scope
	// would have done while it was a shadow scope (ScopeConfig.Shadow),
	// had it enforced its limits: admissions it would have made wait (for
	// capacity or a rate limit), admissions it would have refused (a full
	// queue, more tokens than its TPM), and would-be waits it would have
	// ended at MaxWait. They count from the scope's creation and stay when
	// Shadow is turned off.
	ShadowWaits, ShadowRefusals, ShadowTimeouts int64
	// ShadowQueued is how many of the leases held in a shadow scope would
	// still be waiting if it enforced its limits.
	ShadowQueued int
	// BudgetSpent is the cost settled in the budget's window in force
	// (BudgetFrom, BudgetUntil: zero BudgetUntil while the engine runs a
	// window it started itself, whose end is not yet configured), and
	// BudgetReserved the cost the leases held reserve. They are counted
	// whether or not the scope has a Budget.
	BudgetSpent, BudgetReserved int64
	BudgetFrom, BudgetUntil     time.Time
}

// Engine is the admission contract. The memory home (Memory) implements
// it; every home passes admissiontest.Exercise.
type Engine interface {
	// SetScope creates a scope or changes its configuration. Lowering a
	// limit revokes nothing; raising one admits waiters at once.
	SetScope(ctx context.Context, name string, cfg ScopeConfig) error
	// RemoveScope retires a scope: waiters lose candidates that touch it
	// (or re-resolve); held leases run out normally.
	RemoveScope(ctx context.Context, name string) error
	// Scope reports one scope's state.
	Scope(ctx context.Context, name string) (ScopeStats, error)
	// Scopes reports every scope's state, sorted by name.
	Scopes(ctx context.Context) []ScopeStats

	// Acquire waits for admission until ctx is done or the waiter's deadline
	// passes. Cancelling ctx removes the waiter at once.
	Acquire(ctx context.Context, req Request) (Lease, error)
	// TryAcquire admits at once or fails without queueing: ErrWouldWait when
	// capacity (or a budget's reservations) is missing, a *RateLimitedError
	// when only rate limits stand in the way, a *TokenLimitError or a
	// *BudgetExceededError when no candidate could ever be admitted.
	TryAcquire(ctx context.Context, req Request) (Lease, error)
	// Enqueue queues the waiter and returns; notify is called exactly once,
	// outside the engine's lock, with the lease or the error that ended the
	// wait. If Enqueue returns an error notify is never called. notify may
	// run before Enqueue returns.
	Enqueue(ctx context.Context, req Request, notify func(Lease, error)) error
	// Cancel removes a queued waiter; its notify gets ErrCancelled.
	// Cancelling a waiter that is no longer queued returns ErrNotQueued.
	Cancel(ctx context.Context, waiterID string) error
	// Position reports where a queued waiter stands. Ahead is exact, not an
	// estimate; clients may poll it, so a home must answer without walking
	// the queue (the memory home: O(classes waiting on the scope × log of
	// their sizes)).
	Position(ctx context.Context, waiterID string) (Position, error)

	// Renew extends a lease by its TTL and returns the new expiry.
	Renew(ctx context.Context, id LeaseID, owner Owner) (time.Time, error)
	// Release returns a lease's capacity. Releasing a lease that is gone is a
	// no-op; a fenced or foreign owner gets ErrStaleOwner.
	Release(ctx context.Context, id LeaseID, owner Owner) error
	// Reconcile replaces a lease's TPM and Budget reservations with what
	// its work really used, refunding or charging the difference; the
	// cost settles into the budget's spent when the lease ends.
	Reconcile(ctx context.Context, id LeaseID, owner Owner, used Settlement) error
	// Restore grants candidate cand of req at once, whatever the limits:
	// it re-creates, after a restart, a lease that was granted before it
	// (durable work that was admitted and is still running). Usage may then
	// exceed a limit lowered meanwhile, as after SetScope; nothing more is
	// admitted there until it is back below.
	Restore(ctx context.Context, req Request, cand int) (Lease, error)

	// Fence declares owner id at generations up to gen gone: its leases (and
	// leases in scopes it owns) are released, its queued waiters fail with
	// ErrFenced, its scopes are orphaned, and waiters that used them
	// re-resolve or lose those candidates.
	Fence(ctx context.Context, id string, gen uint64) error
	// Activate makes the owner's scopes usable again at generation gen and
	// re-dispatches waiters in global order.
	Activate(ctx context.Context, id string, gen uint64) error
}

// Outcome is the low-cardinality name of a transition, used as a metrics
// label and a log field.
type Outcome uint8

const (
	OutcomeQueued Outcome = iota + 1
	OutcomeAdmitted
	OutcomeQueueFull
	OutcomeTimeout
	OutcomeCancelled
	OutcomeExpired
	OutcomeReleased
	OutcomeFenced
	OutcomeNoCandidate
	OutcomeRateLimited
	OutcomeReselected
	// OutcomeShadow: a shadow scope (ScopeConfig.Shadow) admitted what it
	// would have made wait, refused or dropped; Event.Would says which.
	OutcomeShadow
	// OutcomeBudgetExceeded: a waiter failed because no candidate left
	// can fit what its budgets have left in their windows.
	OutcomeBudgetExceeded
)

var outcomeNames = [...]string{
	OutcomeQueued:      "queued",
	OutcomeAdmitted:    "admitted",
	OutcomeQueueFull:   "queue_full",
	OutcomeTimeout:     "timeout",
	OutcomeCancelled:   "cancelled",
	OutcomeExpired:     "expired",
	OutcomeReleased:    "released",
	OutcomeFenced:      "fenced",
	OutcomeNoCandidate: "no_candidate",
	OutcomeRateLimited: "rate_limited",
	OutcomeReselected:  "reselected",
	OutcomeShadow:      "shadow",

	OutcomeBudgetExceeded: "budget_exceeded",
}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", o)
}

// Outcomes lists every outcome, for pre-registering metric labels.
func Outcomes() []Outcome {
	out := make([]Outcome, 0, len(outcomeNames)-1)
	for o := OutcomeQueued; int(o) < len(outcomeNames); o++ {
		out = append(out, o)
	}
	return out
}

// Event is one transition. Waiter events (queued, admitted, queue_full,
// timeout, cancelled, fenced, no_candidate, rate_limited, reselected) carry
// WaiterID; lease events (admitted, released, expired, fenced) carry Lease.
// Shadow events carry both, and Scope and Would.
type Event struct {
	Outcome Outcome
	// Would is set for shadow events, with Scope: what the shadow scope
	// would have done had it enforced its limits — queued (made the
	// request wait for capacity), rate_limited (wait for a rate limit),
	// queue_full, no_candidate (more tokens than its TPM), budget_exceeded
	// (more cost than its budget has left), or timeout (its
	// MaxWait passed while the request would have waited; then Waited is
	// that would-be wait). It sits beside Outcome, in what would be
	// padding, to keep the Event that every transition copies small.
	Would    Outcome
	WaiterID string
	Priority int32
	// Lease is set for admitted, and for released/expired/fenced leases.
	Lease LeaseID
	// Needs is the chosen candidate for lease events.
	Needs []Need
	// Waited is the time spent queued (waiter events); Held the time a
	// lease was held (release, expiry and fence events), measured for the
	// leases whose admission the engine timed: every one that queued or has
	// a TTL or a rate limit, and a sample of the others — zero means not
	// measured. Events carry no timestamp: an observer that wants one reads
	// its own clock.
	Waited time.Duration
	Held   time.Duration
	// Scope is the shadow scope of a shadow event.
	Scope string
}

// Observer receives every event. It is called with the engine's lock held,
// in order: it must be quick and must not call back into the engine.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Errors. Each wraps or is one of these sentinels, for errors.Is.
var (
	ErrInvalid      = errors.New("invalid admission request")
	ErrUnknownScope = errors.New("unknown scope")
	ErrDuplicate    = errors.New("waiter id already queued")
	ErrQueueFull    = errors.New("queue full")
	ErrTimeout      = errors.New("queue timeout")
	ErrCancelled    = errors.New("waiter cancelled")
	ErrNoCandidate  = errors.New("no candidate left")
	ErrRateLimited  = errors.New("rate limited")
	ErrWouldWait    = errors.New("no capacity without waiting")
	ErrStaleOwner   = errors.New("stale lease owner")
	ErrFenced       = errors.New("owner fenced")
	ErrLeaseNotHeld = errors.New("lease not held")
	ErrNotQueued    = errors.New("waiter not queued")
	ErrClosed       = errors.New("admission engine closed")
	// ErrUnavailable: the engine cannot decide now (a fleet with no
	// leader that answers); nothing was admitted, and a later call may
	// succeed.
	ErrUnavailable = errors.New("admission unavailable")
	// ErrBudgetExceeded: no candidate can fit what its budgets have left
	// in their windows (BudgetExceededError).
	ErrBudgetExceeded = errors.New("budget exceeded")
)

// Routine reports whether err is one that a step taken on the engine's
// own account — a release, a cancel, a fence that no caller waits for —
// meets in the normal course, and so is neither logged nor counted: the
// engine closing, a lease already released or expired, a waiter already
// admitted or gone, a scope already retired, an owner already fenced at a
// newer generation, or the step's context ended.
func Routine(err error) bool {
	for _, r := range [...]error{ErrClosed, ErrLeaseNotHeld, ErrNotQueued, ErrUnknownScope, ErrStaleOwner, ErrFenced, context.Canceled} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// QueueFullError says which queue refused a waiter: the full scope of its
// most preferred candidate, when a full queue dropped every candidate it
// could still use.
type QueueFullError struct {
	Scope string
	// Limit is the scope's QueueLimit.
	Limit int
	// RetryAfter guesses when the queue has room: how long the scope takes
	// to admit one waiter at its recent hold times. Zero if it has nothing
	// to go on.
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("queue full: the queue of scope %s is full (queue_limit %d)", e.Scope, e.Limit)
}

// Unwrap makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }

// Settings a TimeoutError can name.
const (
	// SettingMaxWait is a scope's MaxWait.
	SettingMaxWait = "max_wait"
	// SettingDeadline is the waiter's own Request.Deadline.
	SettingDeadline = "deadline"
)

// TimeoutError says which limit ended a wait. When the waiter's own
// deadline passed, Scope is empty and Setting is SettingDeadline; when
// scopes' MaxWait dropped its candidates one after another, it names the
// one that dropped the last (of several at once, the one of its most
// preferred candidate).
type TimeoutError struct {
	// Scope is the scope whose MaxWait passed; empty for the waiter's own
	// deadline.
	Scope string
	// Setting is SettingMaxWait or SettingDeadline.
	Setting string
	// Value is the limit: the scope's MaxWait, or the waiter's deadline
	// less its arrival.
	Value time.Duration
	// Waited is how long the waiter queued.
	Waited time.Duration
	// WaitingOn is the scope the waiter was waiting on when it gave up
	// (its Position's scope).
	WaitingOn string
	// RetryAfter guesses how long a request arriving now would wait in
	// that scope, from its queue and recent hold times (as
	// Position.EstimatedWait). Zero if it has nothing to go on.
	RetryAfter time.Duration
}

func (e *TimeoutError) Error() string {
	if e.Scope == "" {
		return fmt.Sprintf("queue timeout: waited %s, its deadline (%s after arrival) passed", e.Waited, e.Value)
	}
	return fmt.Sprintf("queue timeout: waited %s, the max_wait of scope %s (%s) passed", e.Waited, e.Scope, e.Value)
}

// Unwrap makes errors.Is(err, ErrTimeout) true.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// TokenLimitError says that a request can never be admitted because every
// candidate left reserves more tokens than the TPM of one of its scopes:
// the bucket never holds that many. It names the first such candidate's
// scope.
type TokenLimitError struct {
	Scope string
	// TPM is the scope's TPM; Tokens what the candidate reserves.
	TPM, Tokens int64
}

func (e *TokenLimitError) Error() string {
	return fmt.Sprintf("no candidate: %d tokens can never fit the tpm of scope %s (%d)", e.Tokens, e.Scope, e.TPM)
}

// Unwrap makes errors.Is(err, ErrNoCandidate) true.
func (e *TokenLimitError) Unwrap() error { return ErrNoCandidate }

// BudgetExceededError says that a request can never be admitted in its
// budgets' windows: every candidate left reserves more cost than a
// Budget of one of its scopes has left (Budget less the cost settled in
// the window). It names the first such candidate's scope.
type BudgetExceededError struct {
	Scope string
	// ResetAt is when the scope's window ends (its BudgetUntil); zero
	// when the engine runs a window it started itself, whose end is not
	// yet configured.
	ResetAt time.Time
}

func (e *BudgetExceededError) Error() string {
	if e.ResetAt.IsZero() {
		return fmt.Sprintf("budget exceeded: the budget of scope %s has too little left", e.Scope)
	}
	return fmt.Sprintf("budget exceeded: the budget of scope %s has too little left until %s", e.Scope, e.ResetAt.UTC().Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrBudgetExceeded) true.
func (e *BudgetExceededError) Unwrap() error { return ErrBudgetExceeded }

// RateLimitedError says when a rate-limited request could next be admitted.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limited: retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
