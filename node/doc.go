// Package node is the edge node agent, `weir node`: it runs on a machine
// with local OpenAI-compatible model runtimes (vLLM, llama.cpp, Ollama),
// dials the gateway and serves the runs the gateway admits to them. The
// protocol is package edgepb's; edge.proto documents it, and package edge
// is the gateway's side.
//
// # Sessions
//
// Agent.Run keeps one session with the gateway at a time. A session is a
// gRPC connection and its Control stream: the agent sends Register (its
// build and its providers: each runtime's id, adapter, base URL as the
// target, slots, long-context slots and models), waits for Welcome, then
// heartbeats every Welcome.heartbeat_interval_ms with the session's
// generation, a growing seq and each provider's busy slots as the agent
// counts its own runs. Every stream carries the node's token as
// "authorization: Bearer wn-…".
//
// A session ends when its stream breaks or ends, or after a Refusal that
// ends it; its runs are cancelled then (the gateway has fenced them, so
// their answers would be refused), and the agent dials again after a
// jittered exponential backoff (Config.BackoffMin doubling to
// Config.BackoffMax, back to the minimum after a session that lived). The
// gateway gives every new session a new generation.
//
// Register names the agent's process (a random instance id made when it
// starts), so that the gateway tells a reconnect of this process, which
// supersedes its old session, from a second process with the same token,
// which it refuses (token_in_use) while the node's session lives. The
// agent then logs the conflict at ERROR and registers again after the
// wait the gateway gave (its live session's heartbeat timeout: a node
// restarted while its dead process's session lingers takes over then),
// and, refused again, after Config.ConflictBackoff.
//
// # Runs
//
// An Offer names a run, a provider, and the path under its base URL. It
// comes on a Run stream the agent keeps open ahead (as many as the
// Welcome's ready_runs allows, up to the node's slots; each carries one
// run after another, and one that ends after carrying a run is replaced),
// or on the Control stream, and then the agent opens a Run stream of its
// own for it and sends RunOpen with the session's generation. The agent
// takes the request body from the Offer or reads it off the Run stream
// (at most Config.MaxBodyBytes) and POSTs it to the runtime as it is: the
// gateway has already put the runtime's model name in it. The answer goes
// back as RunHead (status and headers) then Chunks as the runtime's bytes
// arrive (an SSE stream passes through unchanged), then RunEnd COMPLETE;
// to a gateway that takes whole heads, a plain answer that fits one read
// buffer goes whole in its RunHead, with nothing after. A runtime error
// status is passed through as a head and body like any other: the
// gateway classifies it. A runtime that cannot be reached ends the run
// with RunEnd ERROR before any head.
//
// A Cancel (on the Control stream or the Run stream), the Run stream's
// end, or the session's end cancels the runtime request at once. An Offer
// for a provider the node does not have, or one that arrives while the
// agent shuts down, is answered with RunEnd ERROR on its Run stream, so
// that the gateway releases its slot at once rather than waiting on a run
// that will never start.
//
// # Stalls and evidence
//
// A runtime that sends no byte for Config.StallTimeout (waiting for its
// headers, or between reads of its body) stalls the run: the request is
// cancelled, the runtime probed (GET <url>/models within
// Config.ProbeTimeout), and the run ended with RunEnd STALLED and the
// probe's Evidence: a 2xx answer says the runtime is AVAILABLE and the
// request alone stalled ("request_stalled"); a refused connection or a
// 5xx says UNAVAILABLE ("provider_unhealthy"); a probe that times out or
// gets another status says UNKNOWN ("health_unknown"), since a runtime
// busy generating may answer slowly and one that does not serve /models
// says nothing of its health. A Probe from the gateway is answered with
// Evidence the same way. Evidence names the provider, its adapter and
// target and the session's generation, with a seq that grows per provider
// within the session, so that the gateway binds it and orders it.
//
// # Shutting down
//
// When Run's context ends, the agent tells the gateway it drains (the
// gateway offers it nothing more and sends the requests waiting for its
// slots elsewhere) and refuses an offer already on its way, but keeps its
// session (heartbeats and cancels) while its runs finish, for up to
// Config.DrainTimeout; then it cancels what is left and returns.
package node
