package serve

import (
	"context"
	"time"

	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/internal/lifecycle"
	"github.com/weir-gateway/weir/usage"
)

// recoverMargin is added to the longest a request can run before a
// reservation is taken for one whose process died: time for its last
// flushes, and for clocks that differ a little between replicas.
const recoverMargin = time.Minute

// usageConfig is the usage recorder's part of the config: its flush
// interval, and when a reservation in the spend journal belongs to a
// request that can no longer be running anywhere (recoverAfter).
func usageConfig(cfg *config.Config) usage.Config {
	flush := cfg.Server.UsageFlushInterval
	return usage.Config{Interval: flush, RecoverAfter: recoverAfter(cfg, flush)}
}

// recoverAfter is the age past which a reservation is surely a dead
// request's: the longest one upstream call may run (a platform's own
// call_timeout, or server.upstream_call_timeout, which edge nodes' calls
// have too), plus two flush intervals (its reservation's and its usage
// record's) and recoverMargin. A request's reservation is taken when it
// is admitted; a request retried on another candidate may live longer,
// and is then counted at its estimate. 0, never, when a call may run
// without a bound.
func recoverAfter(cfg *config.Config, flush time.Duration) time.Duration {
	call := cfg.Server.UpstreamCallTimeout
	switch {
	case call == config.NoBound:
		return 0
	case call <= 0:
		call = gateway.DefaultUpstreamCallTimeout
	}
	for _, p := range cfg.Platforms {
		call = max(call, p.CallTimeout)
	}
	return call + 2*flush + recoverMargin
}

// spendRecovery is the part that, on a store this process alone serves
// (SQLite), counts at their estimate the reservations an earlier
// process left in the spend journal, before the gateway applies its
// catalog: budgets read what was spent when they are set. Elsewhere the
// recorder's periodic recovery does (usageConfig), or nothing when calls
// have no bound, which it says.
func (m *Main) spendRecovery(rc usage.Config) lifecycle.Service {
	return lifecycle.Funcs{OnStart: func(ctx context.Context) error {
		if !m.DB.SoleRunner {
			if rc.RecoverAfter <= 0 {
				m.Logger.Warn("requests that die with their replica stay uncounted in spend: a call has no time bound " +
					"(server.upstream_call_timeout 0), so none is surely over")
			}
			return nil
		}
		n, err := m.Usage.RecoverAll(ctx)
		switch {
		case err != nil:
			// What is left stays journaled, for the periodic recovery
			// or the next start.
			m.Logger.Error("spend recovery at start failed", "recovered", n, "error", err)
		case n > 0:
			m.Logger.Info("spend recovered: requests that ended with the last process counted at their estimate",
				"requests", n)
		}
		return nil
	}}
}
