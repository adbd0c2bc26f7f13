// Package simulate is the simulator of the simulation run mode: a
// platform model's upstream calls answered in this process by the mock
// provider (provider/mock), behaving as the platform model's
// weir.Simulation says. It is spoken to through the same adapters as a
// real platform's synchronous and task APIs, so that the gateway runs a
// simulated call as it runs any other and only the answers differ.
//
// The gateway asks for the simulator of each platform model when it
// applies a catalog; the mock provider stays the mock, which tests,
// benchmarks and the demo run as a server of its own.
package simulate

import (
	"net/http"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
)

// Config is how the simulator's adapters bound their calls: the
// gateway's upstream bounds, as for a real platform.
type Config struct {
	// Timeout, IdleTimeout and CallTimeout are provider.OpenAI's of the
	// same names; 0: no bound.
	Timeout, IdleTimeout, CallTimeout time.Duration
	// Clock runs the bounds, the simulated jobs and their timestamps;
	// default clock.Real.
	Clock clock.Clock
}

// base is the simulator's base URL; its requests never leave the
// process, so its host is one that resolves nowhere.
const base = "http://simulator.invalid/v1"

// New returns what answers a platform model's calls in the simulation
// run mode, behaving as sim says: one mock provider, spoken to as a
// platform's synchronous and task APIs. sim must be valid (the catalog's
// validation); New panics on one the mock refuses.
func New(sim weir.Simulation, cfg Config) (provider.Adapter, provider.AsyncAdapter) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	srv := mock.NewWithClock(mock.Config{Latency: sim.Latency, LatencyJitter: sim.LatencyJitter, ErrorRate: sim.ErrorRate,
		MaxConcurrent: sim.MaxConcurrent, RetryAfter: sim.RetryAfter,
		JobDuration: sim.JobDuration, JobFailureRate: sim.JobFailureRate, MaxJobs: sim.MaxJobs}, cfg.Clock.Now)
	client := &http.Client{Transport: mock.Transport(srv)}
	return &provider.OpenAI{BaseURL: base, Client: client,
			Timeout: cfg.Timeout, IdleTimeout: cfg.IdleTimeout, CallTimeout: cfg.CallTimeout, Clock: cfg.Clock},
		&provider.OpenAIVideo{BaseURL: base, Client: client,
			Timeout: cfg.Timeout, IdleTimeout: cfg.IdleTimeout, CallTimeout: cfg.CallTimeout, Clock: cfg.Clock}
}
