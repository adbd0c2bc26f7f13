// Package fleet is the admission engine's second home: several replicas
// of Weir sharing one PostgreSQL, with one order per scope and limits
// exact across all of them.
//
// # Who decides
//
// One replica at a time leads: PostgreSQL elects it (Coordinator,
// Elector) for a term with an epoch. The fleet speaks to PostgreSQL only
// through the coordination it declares (Coordination and NodeBoard, in
// coordination.go), which the store implements (postgres.DB) and package
// coordtest checks; it imports no database driver, and its own tests
// elect through an in-memory store. The leader runs the memory engine
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
// waiters queued again. The scopes it removed are removed there too, as
// far as it remembers them: for a while and up to a count (removed.go). Syncs meet at two barriers: leases are restored
// only once every replica alive when the term began has given its
// scopes (a lease may be on a scope another replica configured), and the
// leader admits nothing until every such replica has restored its
// leases, or the session timeout has passed: a leader that admitted
// earlier could exceed a limit with leases it does not know yet. It
// does not wait for a replica proven dead (see below). A waiter keeps its place within its replica;
// between replicas, the order after a change of leader is the order in
// which they synced.
//
// A budget's window starts, at a new leader, from what the old one had
// counted: the leader tells each budget scope's spend, as a lease
// settles there, to the replica that released it (in the release's
// reply) and, for a lease of its own replica, to every replica (with
// the mirror's removal of it); each replica gives the latest it was
// told for the window as the scope's BudgetSpent, where that is more
// than its configuration says, and the leader keeps the largest any
// replica gives (spend.go).
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
// # The sessions
//
// A leader runs each call a session brings on a goroutine of its own,
// for a call may wait for acknowledgements that the session's reader
// must keep reading; at most 4096 calls of one session run at once
// (maxSessionCalls), far more than a replica has in flight. A
// call beyond them is answered at once, unrun, with an error the
// replica takes as it takes a lost session: it drops the session, dials
// again and syncs, and asks the call again on the new one; what it had
// posted without waiting (a lazy release) is settled by that sync.
//
// # Goroutines
//
// Every goroutine of the engine has an owner that joins it: Close joins
// the engine's own (the way to the leader, each session's reader and
// writer, the sessions its listener accepted, its timers' callbacks),
// and a term's leader, when the term ends here, joins the sessions it
// served with their calls, its probes of replicas that went away, and
// its timers' callbacks. Each owner first closes what they may block
// on — connections, listeners, the waits of its term — so that none is
// left waiting on the network.
//
// # Replicas that go away
//
// A replica that goes away has either died — its process is gone, and
// with it every call it ran — or gone silent: paused (SIGSTOP, a frozen
// VM), stalled or cut off, its calls perhaps still running upstream.
// The two are told apart by proof of death, never by a timeout: a
// replica is proven dead when PostgreSQL no longer holds its life
// session (a session-level advisory lock each replica holds on a
// connection of its own, which PostgreSQL frees as soon as the process's
// socket closes) and its fleet listener refuses connections (the kernel
// closed it) or its registration is gone. A paused or cut-off process
// keeps both its backend and its listener; a live process whose
// PostgreSQL connection alone was ended keeps its listener, and takes
// its lock again on a new connection.
//
// A session that breaks leaves the replica's state at the leader for the
// session timeout; a replica that comes back in time syncs, and its
// waiters keep their places. The leader asks at once, and again within
// the timeout, whether the replica died: one proven dead is dropped, its
// leases go back through the engine's release path and its waiters are
// cancelled. One that is silent when the timeout passes is dropped too —
// its waiters cancelled — but its leases stay held (Config.ReleaseSilent,
// ReleaseAtBound, the default), each until whichever comes first:
//
//   - its bound: the lease's Request.Hold (the gateway's call timeout,
//     by which the call is over) plus the session timeout, counted from
//     the grant on the leader's clock. A lease without a Hold has no
//     bound;
//   - the replica's own word: it syncs again, and what it no longer
//     names goes back, what it still holds stays held once;
//   - proof of its death, asked again every session timeout.
//
// So a limit holds while a silent replica's calls may run, at the price
// of that capacity for as long as they may; the bound assumes the
// upstream does not work on a call longer than the gateway waits for it.
// With ReleaseAtTimeout the leases go back at the drop instead, and the
// fleet may exceed a limit until the silent replica's calls end.
//
// A silent replica is also fenced once its heartbeats lapse: the leader
// forgets its registration, and when it resumes its next heartbeat tells
// it so; it stops, and its process cuts the calls it still runs.
//
// The leader's own replica cannot be dropped by itself: if the leader
// goes silent, the next leader must learn from the others what its
// callers held. So the leader mirrors, to every replica synced with it,
// the leases no live replica could re-assert to a next leader: its own
// replica's and those it holds for silent replicas, each with the time
// left to its bound. A grant of the leader's own replica reaches its
// caller only once its mirror has been written to those replicas'
// connections (or a short bound passed): the kernel delivers it even if
// the leader is paused the moment after. Every replica keeps the last mirror it got and
// sends it with its next sync; the next leader holds those leases as a
// silent replica's — before that replica counts as synced — until their
// holder syncs itself, their bounds pass, or it is proven dead.
//
// Sync waiters die with their replica; durable tasks and their leases
// are the task store's, and are recovered from it.
//
// # A leader that dies
//
// A replica whose session the leader closed, or whose dial the leader's
// listener refused, dials the listener again: if it refuses (the kernel
// closed it: the leader's process died, or it stopped leading — a
// replica closes its engine, and with it every grant, before its
// listener), the replica takes the term at once (Coordinator.TakeOver),
// and the statement that takes it checks that PostgreSQL holds no life
// session of the leader's generation. The new leader neither waits for
// the dead leader's sync (the replicas it waits for leave out those
// proven dead) nor keeps its leases. So admissions resume within a
// session's round trips of the leader's death, not its term.
//
// A leader whose PostgreSQL connection is ended while its process lives
// (pg_terminate_backend) keeps its listener, so no replica takes its
// term early: it is fenced by its term as before, and takes its life
// lock again on a new connection. Both proofs must fail together for a
// live leader to be taken for dead: its PostgreSQL session ended and
// its listener refusing connections, which a live process's never does
// while it leads. A leader merely paused or cut off keeps both, and is
// fenced by its term.
//
// # Re-resolution across replicas
//
// A Request's Resolve is a function: it reaches the leader only from the
// leader's own replica. A request of another replica that has one says
// so on the wire (wireRequest.Resolves) and carries its Spec, and the
// leader resolves it to every candidate it arrived with — the engine
// keeps those on usable scopes, so a fence drops a node's candidates and
// the node's activation gives them back, at the indexes the replica
// knows them by — then to those its Spec resolves to at the leader that
// it did not arrive with (OnResolve: a node that connected later),
// after them. The replica never resolves such a waiter itself: a lease's
// candidate indexes the list the leader holds, and a lease on an added
// candidate carries its needs, which the replica appends to its own list
// (so it can re-assert the lease to the next leader) and its caller
// knows it by.
//
// # What does not cross
//
// A waiter's Resolve itself: another replica's waiter gains only what
// its Spec resolves to at the leader, from the leader's view of the
// fleet (its catalog version, its read of the node board).
//
// # Cache affinity
//
// The replicas share their cache-affinity entries through the leader,
// off the request path (affinity.go).
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
//
// # Rolling upgrades
//
// A fleet is upgraded one replica at a time, so replicas of two builds
// share a leader for a while. The sessions carry a protocol version
// (protocol.go): a replica's hello names the versions its build speaks,
// the leader's welcome its own and the session's, the highest both
// speak; a peer that names none speaks version 1. A frame that a later
// version adds goes only to a peer whose session has it (peer.proto,
// route.proto). A replica and a leader that speak no version in common
// refuse the session, each saying why (its log; the replica's Protocol,
// which /readyz and the metrics show), and the replica does not dial
// that leader again in its term, nor run open: the leader decides for
// the other replicas, and a share of this one's own would come on top.
// Its calls wait for a leader and fail as they would without one; the
// next term's leader may speak its version. docs/upgrades.md says which
// upgrades need the fleet stopped instead.
package fleet
