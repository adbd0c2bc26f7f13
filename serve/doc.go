// Package serve assembles Weir's gateway process from its config: it
// opens the storage the config names, builds the admission engine (in
// memory, or the fleet's on PostgreSQL), the gateway, the task service,
// the API, the web console and the edge hub, and starts and stops them.
// Main is that assembly; `weir serve` runs it,
// `weir demo` starts one beside the mock provider, and the benchmark
// harness (cmd/weir-bench) starts one in its own process to measure it.
//
// It also holds what weir's other commands share with serve: opening the
// storage (OpenStorage, LoadConfig) and making keys and edge nodes in it
// (CreateKey, CreateNode).
//
// It lives outside cmd/ so that more than one binary can start the same
// gateway; cmd/weir only parses flags and calls it.
package serve
