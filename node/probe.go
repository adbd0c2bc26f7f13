package node

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// Classifications of evidence, as edge.proto names them.
const (
	classUnhealthy = "provider_unhealthy"
	classStalled   = "request_stalled"
	classUnknown   = "health_unknown"
)

var errProbeTimeout = errors.New("the probe timed out")

// probe looks at p's health now (GET <url>/models within ProbeTimeout)
// and says so as evidence of this session, with p's next seq.
func (s *session) probe(ctx context.Context, p *Provider) *edgepb.Evidence {
	health := s.a.health(ctx, p)
	ev := &edgepb.Evidence{Generation: s.gen, Provider: p.ID, Adapter: p.Adapter, Target: p.URL, Health: health}
	switch health {
	case edgepb.Health_HEALTH_AVAILABLE:
		ev.Classification = classStalled
	case edgepb.Health_HEALTH_UNAVAILABLE:
		ev.Classification = classUnhealthy
	default:
		ev.Classification = classUnknown
	}
	ev.Seq = s.nextEvidenceSeq(p)
	return ev
}

// health probes p: a 2xx answer is AVAILABLE; a connection that fails or
// a 5xx is UNAVAILABLE; a probe that times out, is cut short by ctx, or
// gets another status is UNKNOWN: a runtime busy generating may answer
// slowly, and one that does not serve /models says nothing of its health.
func (a *Agent) health(ctx context.Context, p *Provider) edgepb.Health {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := a.deps.Clock.AfterFunc(a.cfg.ProbeTimeout, func() { cancel(errProbeTimeout) })
	defer t.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/models", nil)
	if err != nil {
		return edgepb.Health_HEALTH_UNKNOWN
	}
	resp, err := a.deps.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return edgepb.Health_HEALTH_UNKNOWN
		}
		a.deps.Logger.Info("node: a runtime's probe failed", "provider", p.ID, "error", err)
		return edgepb.Health_HEALTH_UNAVAILABLE
	}
	// Read a little of the answer so that the connection can be reused.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return edgepb.Health_HEALTH_AVAILABLE
	case resp.StatusCode >= 500:
		return edgepb.Health_HEALTH_UNAVAILABLE
	default:
		return edgepb.Health_HEALTH_UNKNOWN
	}
}
