package gateway

import (
	"net/http"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
)

// The simulation run mode: a request asks for it (X-Weir-Run-Mode), its
// group allows it, and it is admitted, routed, queued and counted as any
// other, while its upstream call is answered in this process by the mock
// provider, configured by the platform model's Simulate. Nothing reaches
// a provider; its usage names the platform model as "simulated:<name>",
// so that reports keep it apart. Edge nodes are left out: their runtimes
// are real.

// simulatedPrefix marks a simulated request's platform model in its
// usage.
const simulatedPrefix = "simulated:"

// simulator is what answers pm's calls in the simulation run mode: one
// mock provider, spoken to as a platform's synchronous and task APIs.
func (s *Service) simulator(pm weir.PlatformModel) (provider.Adapter, provider.AsyncAdapter) {
	sim := pm.Simulate
	srv := mock.NewWithClock(mock.Config{Latency: sim.Latency, LatencyJitter: sim.LatencyJitter, ErrorRate: sim.ErrorRate,
		MaxConcurrent: sim.MaxConcurrent, RetryAfter: sim.RetryAfter,
		JobDuration: sim.JobDuration, JobFailureRate: sim.JobFailureRate, MaxJobs: sim.MaxJobs}, s.deps.Clock.Now)
	client := &http.Client{Transport: mock.Transport(srv)}
	const base = "http://simulator.invalid/v1"
	return &provider.OpenAI{BaseURL: base, Client: client,
			Timeout: s.cfg.UpstreamTimeout, IdleTimeout: s.cfg.UpstreamIdleTimeout, CallTimeout: s.cfg.UpstreamCallTimeout, Clock: s.deps.Clock},
		&provider.OpenAIVideo{BaseURL: base, Client: client,
			Timeout: s.cfg.UpstreamTimeout, IdleTimeout: s.cfg.UpstreamIdleTimeout, CallTimeout: s.cfg.UpstreamCallTimeout, Clock: s.deps.Clock}
}
