package httpapi

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/tracing"
)

// startSpan starts r's server span, below the trace context its client
// sent (traceparent), if tracing is on (Deps.Tracing); else it returns r
// and nil. Probes (health, readiness, metrics) are not traced.
func (s *Server) startSpan(r *http.Request, id string) (*http.Request, trace.Span) {
	if s.tracer == nil {
		return r, nil
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return r, nil
	}
	ctx := tracing.Extract(r.Context(), r.Header)
	ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			semconv.HTTPRequestMethodKey.String(r.Method),
			semconv.URLPath(r.URL.Path),
			attribute.String("weir.request_id", id),
		))
	return r.WithContext(ctx), span
}

// endSpan ends r's server span with the status answered: its name is
// the route r took ("POST /v1/chat/completions"), which the mux set on
// r by now.
func endSpan(span trace.Span, r *http.Request, status int) {
	if r.Pattern != "" {
		span.SetName(r.Pattern)
		span.SetAttributes(semconv.HTTPRoute(r.Pattern))
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// modelRequestSeen records on a model request's server span what became
// of it: its model, key, outcome, the platform model that served it and
// how long it queued.
func modelRequestSeen(span trace.Span, c *gateway.Call) {
	span.SetAttributes(
		attribute.String("weir.model", c.Model.Name),
		attribute.String("weir.key_id", c.KeyID),
		attribute.String("weir.outcome", c.Usage.Outcome),
		attribute.String("weir.platform_model", c.Usage.PlatformModel),
		attribute.Float64("weir.queue.waited_ms", float64(c.Waited.Microseconds())/1000),
	)
}
