// Package gateway is one request's way through Weir, as a service with no
// transport in it:
//
//   - Catalog state: Apply makes a catalog the served one (the scopes its
//     limits make — the one place weir.Limits become admission settings —,
//     retired scopes removed, the platforms' adapters built), and each
//     key's scope is configured on first use. A Snapshot is one catalog,
//     replaced whole on reload. In a fleet the scopes a catalog left are
//     removed once every replica serves it (RetireLeft), and a platform
//     model left while work holds its scope is kept for that work until
//     it ends (retire.go).
//   - Overrides: an operator's drains and run-time limits and upstreams'
//     pauses, set beside the catalog, are kept in the store for every
//     replica (operator.go says how long each lasts).
//   - Policy: Authenticate finds a request's key, and Prepare decides
//     what that key may ask and how the request runs (model, kind,
//     priority, run mode, platform pin, deadline, the key's scope), for
//     sync requests and task submissions alike (prepare.go).
//   - Tasks: the task front (Tasks: submit, find, list, cancel, delete,
//     a video's content) is how the transports reach the task service.
//   - Planning: one candidate builder for sync requests and durable tasks
//     alike; the Service is the task service's Planner and HealthReporter.
//   - Serving: Serve takes a decoded Call through route (router) → admit
//     (the engine) → execute (an Executor: an upstream adapter now, an
//     edge node's tunnel later) → release → usage and health, and writes
//     the answer to an Answer the transport implements (headers, write
//     deadlines and stream framing stay with the transport).
//   - Errors: the service answers with *Error, whose category sentinels
//     (ErrQueueFull, ErrNoCandidate, ...) are named for the API's stable
//     codes, *RefusedError for an upstream's own refusal, and
//     ErrClientGone; the transport maps them in one table. How a request
//     and each upstream call ended is an Outcome (outcome.go).
//
// It is named for what it is — the gateway itself, the part between a
// decoded request and the upstreams — rather than for one of its steps:
// httpapi in front of it reads requests and encodes answers; admission,
// router and provider behind it admit, order and execute. Data flows one
// way: HTTP → gateway → router and engine → executor → release.
package gateway
