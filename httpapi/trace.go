package httpapi

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/tracing"
)

// serverSpan starts a request's span: a slice made once, so that
// starting one allocates no options.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// startSpan starts r's server span in ctx (r's, with what the
// middleware adds), below the trace context its client sent
// (traceparent), if tracing is on (Deps.Tracing); else it returns ctx
// and nil. Probes (health, readiness, metrics) are not traced.
func (s *Server) startSpan(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, nil
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return ctx, nil
	}
	return s.tracer.Start(tracing.Extract(ctx, r.Header), r.Method, serverSpan...)
}

// endSpan ends r's server span with its attributes, given in one call
// (each call grows the span's slice): the request's (method, path and
// id), the route it took and the status answered, and, for a model
// request that was served (c, with its usage recorded), what became of
// it: its model, key, outcome and how long it queued. The platform
// model that served it is on the attempt's client span, not repeated
// here. No sampler Weir configures reads attributes, so none is needed
// at the start. The span's name is the route ("POST
// /v1/chat/completions"), which the mux set on r by now. The span ends
// later, off the request's goroutine (tracing.EndLater), its children
// before it.
func endSpan(span trace.Span, r *http.Request, id string, status int, c *gateway.Call) {
	p := tracing.Attrs()
	attrs := append(*p, semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path), attrRequestID.String(id))
	end := tracing.Ending{Span: span, Name: r.Pattern}
	if r.Pattern != "" {
		attrs = append(attrs, semconv.HTTPRoute(r.Pattern))
	}
	attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	if c != nil && c.Usage.Status != 0 {
		attrs = append(attrs,
			attrModel.String(c.Model.Name),
			attrKeyID.String(c.KeyID),
			attrOutcome.String(c.Usage.Outcome),
			attrQueueWaited.Float64(float64(c.Waited.Microseconds())/1000),
		)
	}
	*p = attrs
	end.Attrs = p
	if status >= 500 {
		end.Code, end.Desc = codes.Error, http.StatusText(status)
	}
	tracing.EndLater(end)
}

// The attributes of Weir's own on the server span.
const (
	attrRequestID   = attribute.Key("weir.request_id")
	attrModel       = attribute.Key("weir.model")
	attrKeyID       = attribute.Key("weir.key_id")
	attrOutcome     = attribute.Key("weir.outcome")
	attrQueueWaited = attribute.Key("weir.queue.waited_ms")
)
