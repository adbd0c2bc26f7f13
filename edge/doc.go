// Package edge is the gateway's side of its edge nodes: machines with
// GPUs and local model runtimes that run `weir node` and dial in. The
// protocol is package edgepb's (edge.proto documents it).
//
// # Sessions and generations
//
// A node authenticates with its token and opens one Control stream: its
// session. It opens a Run stream of its own for each run, with the same
// token, which the Hub takes as good, without asking the store again,
// for Config.TokenCacheTTL after the store last accepted it: a revoked
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
// supersedes a half-open old one). Its end fences the node's owner at the
// session's generation: the engine releases its leases through its one
// release path, orphans its scopes, and every waiter that used them
// re-resolves or loses those candidates. A newer session activates the
// node's scopes at its own generation. Messages of an older generation
// are refused, so nothing of a superseded session can release or renew
// what the newer one holds.
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
// # Bad input
//
// A node's malformed, oversize or out-of-order message gets a Refusal in
// the protocol's shape and changes nothing; a registration that is not
// valid ends the session before anything is configured. The gRPC server
// bounds message sizes, and a node's providers and models are bounded
// too, so a misbehaving node cannot exhaust the gateway's memory.
package edge
