// Package fleet is the admission engine's second home: several replicas
// of Weir sharing one PostgreSQL, with one order per scope and limits
// exact across all of them.
//
// # Who decides
//
// One replica at a time leads: PostgreSQL elects it (Coordinator,
// Elector) for a term with an epoch. The leader runs the memory engine
// (admission.Memory) for the whole fleet; every replica's Engine — the
// leader's own included — is a peer of that leader and asks it for every
// decision: the other replicas over one TCP session each (see wire.go for
// the protocol), the leader's own in process. A release on replica A that
// admits a waiter of replica B is one critical section in the leader's
// engine, and B's caller holds the lease before A's Release returns
// (the leader waits for B to acknowledge the outcome), so "prompt" holds
// across replicas as it does in one process. There is no poll: a session
// pushes outcomes as they happen.
//
// # A new leader
//
// A new term starts with an empty engine. Each replica keeps what its
// callers hold — the scopes it configured, its leases, its queued waiters
// in arrival order — and syncs all of it to each leader it reaches: scopes
// are set, leases restored (whatever the limits, as after a restart),
// waiters queued again. The leader admits nothing until every replica
// alive when the term began has synced, or the session timeout has
// passed: a leader that admitted earlier could exceed a limit with leases
// it does not know yet. A waiter keeps its place within its replica;
// between replicas, the order after a change of leader is the order in
// which they synced.
//
// # Fencing
//
// Every frame carries its term's epoch, and lease ids carry it too (the
// epoch is in their top bits). A replica takes outcomes only from the
// session of the term it is in and drops a session once a newer term is
// known; a leader answers only calls of its own epoch. A leader grants
// only while its term is valid on its own clock (Config.Valid, the
// elector's deadline, which runs while the process is paused), so a
// leader stopped past its term and resumed grants nothing more: its late
// grants go back to its engine, never to a caller, and its sessions are
// refused or already closed.
//
// # Replicas that go away
//
// A session that breaks leaves the replica's state at the leader for the
// session timeout; a replica that comes back in time syncs, and its
// waiters keep their places. One that does not is dropped: its leases go
// back through the engine's release path and its waiters are cancelled.
// Sync waiters die with their replica; durable tasks and their leases are
// the task store's, and are recovered from it.
//
// # What does not cross
//
// A Request's Resolve is a function: it reaches the leader only from the
// leader's own replica. A waiter of another replica whose scope is fenced
// loses the candidates that touch it instead of re-resolving.
//
// # When the leader cannot be reached
//
// Calls wait for a leader for Config.Unavailable and then fail with
// ErrUnavailable: admissions fail closed. Work already admitted runs on;
// its releases are kept and synced to the next leader.
package fleet
