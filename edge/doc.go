// Package edge is the gateway's side of its edge nodes: machines with
// GPUs and local model runtimes that run `weir node` and dial in. The
// protocol is package edgepb's (edge.proto documents it).
//
// # Sessions and generations
//
// A node authenticates with its token and opens one Control stream: its
// session. Its runs travel on Run streams, opened with the same token,
// which the Hub takes as good, without asking the store again, for
// Config.TokenCacheTTL after the store last accepted it: a revoked
// token's runs are refused within that time. It registers its providers (runtimes), and the Hub gives the
// session a generation, greater than any the node had before (it is
// taken from the clock, so it grows across gateway restarts too). Each
// provider's slots become an admission scope owned by the node at that
// generation (weir.NodeScope, weir.NodeOwner); long-context slots a
// second scope, which long requests need as well (weir.NodeLongScope).
// The one admission engine fills them exactly, in global order, beside
// the cloud platforms' scopes.
//
// A session ends when its stream ends or breaks, when the node misses
// its heartbeats for Config.HeartbeatTimeout on the gateway's own
// monotonic clock, or when the node opens a newer session (a reconnect
// supersedes a half-open old one). A node's token serves one process at
// a time: a Register that names another process (Register.instance)
// than the node's live session is refused with token_in_use, warned of
// and counted (Metrics.TokenConflict), and the live session goes on; the
// refusal tells the node when that session would be gone if it fell
// silent, so that a restarted node takes over from its dead process. Its end fences the node's owner at the
// session's generation: the engine releases its leases through its one
// release path, orphans its scopes, and every waiter that used them
// re-resolves or loses those candidates. A newer session activates the
// node's scopes at its own generation. Messages of an older generation
// are refused, so nothing of a superseded session can release or renew
// what the newer one holds.
//
// A gone node's scopes stay, orphaned, for its next session to take
// back. One gone for Config.ForgetAfter with no newer session is
// forgotten: its scopes are retired and it leaves Nodes (forget.go);
// Hub.Forget, and across a fleet Relay.Forget, do it at once for an
// operator.
//
// # Runs
//
// The Welcome allows a node one Run stream opened ahead (ready) per slot,
// up to 256. A ready stream waits among its session's until a request
// takes it: the Offer goes down it, with a small body inline, and the
// answer comes back on it, a plain one whole in its head; the run's end
// puts the stream back to wait for the next. So a run crosses the network
// once each way, as through a proxy. With no ready stream waiting, the
// Offer goes on the Control stream and the node opens a Run stream for
// that run alone.
//
// Either way, the request's own goroutine sends and reads on the stream
// (the stream's handler only holds it open), so each piece of the answer
// is handed on once, from gRPC's reader to the client's writer, and a
// client that reads slowly slows the node's stream instead of filling the
// gateway's memory. A run cut short (the client gone, a timeout, a node
// that broke the protocol) ends its stream, which wakes whatever waits on
// it; the release of its slot is the executor's, on the lease, as for any
// upstream.
//
// # Pausing and draining
//
// A provider that evidence found unavailable, and every provider of a
// node that sent Drain, has its slots paused (admission.ScopeConfig's
// Paused): what runs there keeps its slot, nothing more is admitted, and
// the waiters re-resolve, since Serving leaves the provider out. A
// drained node is offered nothing more; its session's end fences it as
// any other.
//
// # In a fleet
//
// A node dials one replica, and serves them all. Each replica's Hub
// configures its nodes' scopes in the fleet's engine, so their limits
// hold whichever replica admits; a Relay (the replica's gateway.Nodes)
// offers its own Hub's providers and the other replicas', as the
// fleet's board (a Directory) has them, and sends a run for another
// replica's node to that replica over HTTP (RelayPath), which runs it on
// its Hub. A node's generation and the engine's fencing are as for one
// replica: what the board says late costs a failed relay, never a slot.
//
// # The edge listener
//
// The edge listener is open to whoever reaches it, and a node
// authenticates per stream, with its token, once its connection is up.
// So that connections that never do cost little, a listener wrapped by
// Hub.Guard holds at most Config.MaxUnauthenticated connections (128)
// that have not yet opened a stream with a token the Hub accepted,
// closes more as they come, and closes each one that has not done so
// within Config.AuthTimeout (10s) of its accept, by the Hub's clock. A
// connection whose token was accepted is the node's, held as long as
// the node keeps it.
//
// # Bad input
//
// A node's malformed, oversize or out-of-order message gets a Refusal in
// the protocol's shape and changes nothing; a registration that is not
// valid ends the session before anything is configured. The gRPC server
// bounds message sizes, and a node's providers and models are bounded
// too, so a misbehaving node cannot exhaust the gateway's memory.
package edge
