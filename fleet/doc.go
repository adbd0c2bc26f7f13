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
// waiters queued again. Syncs meet at two barriers: leases are restored
// only once every replica alive when the term began has given its
// scopes (a lease may be on a scope another replica configured), and the
// leader admits nothing until every such replica has restored its
// leases, or the session timeout has passed: a leader that admitted
// earlier could exceed a limit with leases it does not know yet. A waiter keeps its place within its replica;
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
// # Edge nodes
//
// A node dials one replica, whose Hub configures the node's scopes in
// the fleet's engine (owned by the node, as on one replica). Each
// replica publishes what its nodes serve on the Board, a row of its own
// in weir_fleet_nodes, and reads the others' rows, so that its gateway
// offers every node of the fleet (edge.Relay); a run for a node of
// another replica is relayed to that replica over HTTP, authenticated
// by the fleet's secret. The Board only lists candidates: the engine
// decides, and a node gone meanwhile is fenced at the leader before
// anything more is admitted there.
//
// # When the leader cannot be reached
//
// No leader answers when none can be dialled, or the one there is
// refuses to decide because its term has passed on its own clock (as
// when PostgreSQL is unreachable and it cannot renew). Calls wait for a
// leader for Config.Unavailable. Then, by default, they fail with
// ErrUnavailable: admissions fail closed. Work already admitted runs
// on; its releases are kept and synced to the next leader.
//
// A replica runs open instead once it has been without a leader for
// Config.Unavailable, if it knows the fleet's size (the replicas alive
// at the last term, refreshed from PostgreSQL while it answers:
// SetTerm, SetReplicas) and one of the scopes it configured fails open
// (admission.ScopeConfig.FailOpen). It then admits, at once and in its
// own memory engine, the requests of its callers that have a candidate
// whose scopes all fail open; a scope with no concurrency, rpm or tpm
// limit fails open whatever it says, an owner's scope never does. Each
// such scope there has its limit, rpm, tpm and queue limit divided by
// the fleet's size, rounded down, and a share of 0 admits nothing
// there, so that replicas that all run open never admit more than the
// limit between them. A shadow scope (admission.ScopeConfig.Shadow)
// enforces nothing and fails open whatever it says; its shadow counters
// then count against the share, in the open engine. The leases this replica's callers already hold
// count against its share. The other candidates are not used; a request
// left with none fails with ErrUnavailable. Waiters queued before, and
// those queued meanwhile, wait in that engine in their order if they
// have such a candidate; the others wait for the next leader.
//
// Leases granted open are held like any other: releases, renewals and
// reconciliations go to that engine (releases of older leases are kept,
// the others fail with ErrUnavailable). At the next sync with a leader
// the engine is dropped and everything goes to the leader: the leases
// are restored there (whatever the limits, as after a restart) and the
// waiters still queued join its queue, in their order. No replica runs
// open while a sync is under way; one that fails runs open again at
// once.
//
// A replica cut off from a leader that still decides for the others
// runs open too, and its share then comes on top of what the leader
// admits: the limits are exact across the fleet only while every
// replica is without a leader, which is what a PostgreSQL outage or a
// dead leader does. So does a replica that joined after the others
// last counted the fleet.
package fleet
