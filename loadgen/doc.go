// Package loadgen drives HTTP load at a target and measures what it took,
// the way docs/benchmarks.md's scenarios ask: it imports only the standard library.
//
// # Open loop
//
// With Config.Rate set, request i is due at start + i/Rate whatever the
// target is doing: a slow answer does not delay the next request, so the
// target's queueing shows in the figures instead of slowing the load down
// (no coordinated omission). Latency is measured from the moment a request
// was due, not from when it went out, so a request the generator could not
// send on time — because MaxInFlight requests were already in flight, or
// because the generator itself was starved of CPU — is charged its wait.
// Such requests are counted (Result.Late, Result.Blocked), and Result.SendDelay
// says how far behind schedule the generator ran.
//
// # Interleaved
//
// RunInterleaved drives several targets on one open loop, a request to
// each in turn (in an order shuffled every turn), and measures each apart:
// on a shared, noisy machine, targets driven one after the other are
// measured in different seconds of its state, and their difference moves
// with it; interleaved, they share the same seconds.
//
// # Closed loop
//
// With Config.Rate zero, MaxInFlight workers each send their next request as
// soon as the previous one has finished: the sustained rate this reaches is
// the target's capacity (docs/benchmarks.md's max-rps scenario, 64 connections).
//
// # Measurement
//
// Requests due during Config.Warmup are sent but left out of the figures; the
// next Config.Duration is measured. A request succeeds when it is answered
// 2xx and its body is read to the end without error. Percentiles (p50, p90,
// p99, max) are nearest-rank over every sample, sorted: a run keeps one
// sample per request, which at 2,000 req/s for 20 s is 40,000 durations.
// With Config.StreamFraction set, that fraction of requests (spread evenly:
// exactly every fifth for 0.2) send Target.StreamBody instead of Body, and
// their latencies — to the first and to the last byte — are kept apart from
// the others, so a 100 ms stream does not pass for a slow answer. With
// Config.ChunkStamps, a server that stamps each chunk as it sends it
// (AppendStamp, an SSE comment line) lets the generator time every chunk
// from its sending to its arrival (Result.Chunk).
package loadgen
