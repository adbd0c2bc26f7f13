package gateway

import (
	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/simulate"
)

// The simulation run mode: a request asks for it (X-Weir-Run-Mode), its
// group allows it, and it is admitted, routed, queued and counted as any
// other, while its upstream call is answered in this process by the
// simulator (provider/simulate), configured by the platform model's
// Simulate. Nothing reaches a provider; its usage names the platform
// model as "simulated:<name>", so that reports keep it apart. Edge nodes
// are left out: their runtimes are real.

// simulatedPrefix marks a simulated request's platform model in its
// usage.
const simulatedPrefix = "simulated:"

// simulator is what answers pm's calls in the simulation run mode, bound
// as a real platform's calls are.
func (s *Service) simulator(pm weir.PlatformModel) (provider.Adapter, provider.AsyncAdapter) {
	return simulate.New(pm.Simulate, simulate.Config{Timeout: s.cfg.UpstreamTimeout,
		IdleTimeout: s.cfg.UpstreamIdleTimeout, CallTimeout: s.cfg.UpstreamCallTimeout, Clock: s.deps.Clock})
}
