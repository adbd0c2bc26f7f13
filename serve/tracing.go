package serve

import (
	"context"

	"go.opentelemetry.io/otel"

	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/internal/lifecycle"
	"github.com/weir-gateway/weir/tracing"
)

// gatewayConfig is the gateway's Config: the server settings', whether
// its spans record messages, as the environment asked tracing, and, in
// a fleet with a catalog file, that the scopes a catalog version left
// wait for every replica to serve it (fleetCatalog retires them).
func (m *Main) gatewayConfig() gateway.Config {
	gc := gatewayConfig(m.Config.Server)
	gc.RetireLater = m.DB.Fleet != nil && m.ConfigPath != ""
	if m.Tracing != nil {
		gc.CaptureContent = m.Tracing.CaptureContent
	}
	return gc
}

// newTracing makes the tracer provider if the OTEL_* environment asks
// for traces (unless the caller gave one, in Main.Tracing), as the first
// part: stopped last, it exports the spans of everything stopped before
// it.
func (m *Main) newTracing(ctx context.Context) error {
	p := m.Tracing
	if p == nil {
		var err error
		if p, err = tracing.New(ctx, tracing.Config{}); err != nil || p == nil {
			return err
		}
	}
	m.Tracing = p
	// The SDK's export failures, which it would print to stderr.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		m.Logger.Warn("trace export failed", "error", err)
	}))
	m.Logger.Info("traces exported by OTLP", "protocol", p.Protocol)
	if p.CaptureContent {
		m.Logger.Warn("traces record prompts and completions", "env", tracing.CaptureContentEnv)
	}
	m.parts.Add("tracing", lifecycle.Funcs{OnStop: p.Shutdown})
	return nil
}
