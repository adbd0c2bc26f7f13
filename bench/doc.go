// Package bench is Weir's benchmark harness: the scenarios of
// docs/benchmarks.md, which cmd/weir-bench runs as `weir-bench`,
// `weir-bench sync-waiters` and `weir-bench tasks`. Each scenario is one
// function that sets up its rig on loopback, measures, writes its report
// to an io.Writer line by line as the figures come in, and tears the rig
// down:
//
//   - Overhead (`weir-bench`; overhead-1k, overhead-2k, stream, max-rps):
//     the mock provider, a plain httputil.ReverseProxy in front of it and
//     Weir, all in this process, each driven in turn at the same load by
//     package loadgen; what Weir adds to a request's latency, CPU time and
//     allocations, against the proxy; with a fleet (--fleet), also one
//     `weir serve` child on SQLite and replicas on PostgreSQL, and under
//     --max-rps pgbench on the same server (fleet-admit); with --edge
//     (edge-overhead, edge-stream), also the same gateway tunnelling to an
//     edge node agent in this process whose provider is the mock.
//   - SyncWaiters (`weir-bench sync-waiters`): a burst of synchronous
//     requests queued behind a small limit, sent to a bare net/http floor
//     (ServeFloor, in a child process) and to `weir serve` (another
//     child); the memory one waiting request costs each, and whether they
//     were served in order at exactly the limit.
//   - Drain (`weir-bench tasks drain`): durable tasks through a `weir
//     serve` child to the mock's video API; the time to drain them against
//     the ideal, and where each task's time went; with --fleet, through
//     replicas on PostgreSQL instead.
//   - Restart (`weir-bench tasks restart`): a long queue of waiting
//     tasks, the gateway killed with SIGKILL and restarted on the same
//     database; the time to serving and to the first admission.
//
// The admission engine's own benchmarks are Go benchmarks in
// admission/bench_test.go (scripts/bench-engine.sh), and so are the
// fleet's at the engine's level, in fleet/bench_test.go
// (scripts/bench-fleet.sh); their pgbench baseline is package
// bench/pgbench.
//
// The harness measures the gateway that package serve assembles, from a
// binary of its own (cmd/weir-bench), so that weir links neither the
// harness nor its load generator. Each scenario's config carries a Weir,
// which cmd/weir-bench fills in: the weir binary and the subcommands it
// runs as children, and a function that starts the gateway in this
// process. docs/benchmarks.md has the commands, the targets and the
// latest figures.
package bench
