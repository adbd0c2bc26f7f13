package serve

import (
	"context"

	"go.opentelemetry.io/otel"

	"github.com/weir-gateway/weir/internal/lifecycle"
	"github.com/weir-gateway/weir/tracing"
)

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
	m.parts.Add("tracing", lifecycle.Funcs{OnStop: p.Shutdown})
	return nil
}
