// Package admission is Weir's admission engine: one mechanism that admits
// every unit of work against named capacities ("scopes") — tenant and
// platform-model concurrency, rate limits, the async worker pool, an edge
// node's provider slots.
//
// A waiter (Request) lists candidates in preference order; each candidate
// is a set of (scope, amount) pairs plus the tokens it reserves against TPM
// and the cost it reserves against budgets.
// The grant is a Lease on exactly one candidate, all of its scopes at once.
//
// # The contract
//
//  1. Atomic: a waiter gets all of one candidate's scopes, or nothing.
//  2. Never over: no admission takes a scope past its limit. Lowering a limit
//     revokes nothing; it only stops admissions until usage is below it.
//     Restore re-creates a lease granted before a restart whatever the
//     limits, with the same effect.
//  3. Ordered: in each scope, waiters are ordered by priority (higher
//     first), then — in a RoundRobin scope — by their fairness key's turn,
//     then by arrival. See "Order" below for exactly when a later waiter may
//     pass an earlier one.
//  4. Prompt: capacity freed by a release, an expiry, a fence or a raised
//     limit goes to the next eligible waiter in the same critical section.
//  5. Exactly-once release: Release, expiry and fencing converge on one path
//     keyed by lease id; a second release is a no-op and a fenced owner
//     generation gets ErrStaleOwner.
//  6. Bounded: per-scope queue limits and wait limits, per-waiter
//     deadlines, cancellation. A scope's full queue or passed MaxWait drops
//     the candidates that touch it, so a fallback still serves when the
//     primary is saturated; the waiter fails (ErrQueueFull, ErrTimeout) only
//     when no candidate is left or its own deadline passes, with an error
//     naming the limit (QueueFullError, TimeoutError).
//  7. Observable: every transition is an Event to one Observer.
//  8. Cheap: admission and release cost O(log n) in the number of waiters.
//
// # Order
//
// A waiter is admitted to the first of its candidates, in its own preference
// order, whose scopes all have room and whose rate limits allow it. A
// candidate that cannot be admitted waits on one scope: the first of its
// scopes, in the candidate's order, that it may not take now (no room, no
// rate, or an earlier waiter waiting there). In each scope S the engine
// keeps, in S's order, the waiters that wait on S. A waiter W may take
// capacity in S only if no waiter waiting on S precedes W in S's order:
// nobody passes a waiter that is waiting for S itself, so a large request is
// never starved by small ones (as in golang.org/x/sync/semaphore). A waiter
// that S could serve but that waits on another scope can be passed in S —
// the only passing allowed, and only while it cannot be admitted at all —
// until it has waited FairnessWindow; from then on S holds the capacity it
// needs (one such waiter per scope at a time), and later waiters only use
// what is left beyond the hold. The waiter holding S may use it even ahead
// of waiters waiting on S.
//
// Arrival is the moment a waiter queues, unless its Request carries the
// Place of an earlier lease of the same work (Request.Place): work sent
// back to the queue then stands where it first arrived, and in a
// round-robin scope takes the turn of its key's first later waiter.
//
// Waiters with the same fairness key, priority and candidates form a class:
// they are blocked by the same scopes and ordered the same way everywhere,
// so the engine parks whole classes on the scopes that block them and wakes
// a class only when such a scope gains capacity. That keeps every event's
// work proportional to the classes it touches, not to the waiters queued.
//
// # Rate limits
//
// A scope's RPM and TPM are token buckets refilled evenly over a minute. A
// candidate whose scope is out of tokens is skipped; a waiter whose every
// candidate is rate-limited waits for the earliest refill, unless its
// deadline comes first.
//
// A candidate reserving more tokens than a scope's TPM can never be
// admitted: it is dropped at once (at arrival, or when SetScope lowers the
// TPM), and a request left with none fails with a TokenLimitError, an
// ErrNoCandidate, rather than waiting for a refill that never comes.
//
// # Budgets
//
// A scope's Budget limits spending over a window (ScopeConfig.Budget): a
// candidate reserves its Cost in every budget scope it needs, Reconcile
// settles the lease to its real cost, and the lease's end (release,
// expiry, fence: the one release path) counts that cost spent. The cost
// spent in the window plus the cost reserved never exceeds the Budget,
// but by what settlements add beyond the reservations of the leases in
// flight. A candidate whose Cost is more than the budget has left (Budget
// less spent) can never fit in the window: it is dropped at once — at
// arrival, when the end of a lease spends what it needed (whatever its
// waiter waits on), or when SetScope tightens the budget; a request left
// with none fails with a *BudgetExceededError (ErrBudgetExceeded) that
// says when the window resets. One that only the reservations in flight
// keep out waits, ordered as for capacity, and is admitted when
// settlements make room, or when the window ends: the engine then starts
// the next window itself, from the old end with nothing spent, until it is
// configured.
//
// # Shadow scopes
//
// A scope set to Shadow (ScopeConfig.Shadow) is outside the contract's
// limits: it decides as usual but enforces nothing, so a new limit can be
// rolled out safely. Its limits never make a request wait, drop a
// candidate or hold capacity, while its usage is kept as an enforced
// scope's (it may pass its Limit). Beside it the engine keeps what the
// scope would hold, and who would still wait, if it enforced, and counts
// (ScopeStats) and reports (OutcomeShadow events) every admission it
// would have made wait, refused or dropped at MaxWait — its Budget too. Setting Shadow
// false enforces from then on and revokes nothing, as a lowered limit.
//
// # Owners and fencing
//
// A lease has an Owner (a replica, or a node connection and its generation);
// a scope may have one too (a node's provider slots). Fence releases the
// owner's leases and every lease on its scopes through the release path,
// orphans its scopes, fails its queued waiters, and re-resolves every waiter
// that used an orphaned scope (Request.Resolve) or drops those candidates; a
// waiter left with none fails with ErrNoCandidate at once. Activate
// re-enables the scopes and re-dispatches in global order.
package admission
