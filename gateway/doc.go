// Package gateway is one request's way through Weir, as a service with no
// transport: it owns the catalog's live state (the scopes its limits make,
// the upstream adapters, each key's scope) and plans a request's
// candidates, for sync requests and durable tasks alike (it is the task
// service's Planner and HealthReporter).
//
// It is named for what it is — the gateway itself, the part that sits
// between a decoded request and the upstreams — rather than for one of
// its steps: httpapi in front of it authenticates, decodes and encodes;
// admission, router and provider behind it admit, order and execute.
// Data flows one way: HTTP → gateway → router and engine → executor →
// release.
package gateway
