package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/internal/jsonlog"
)

// access is what a request's access log line says beyond the request
// itself, filled in by the handlers as the request goes.
type access struct {
	// keyID and keyName are the key the request authenticated with.
	keyID, keyName string
	// endpoint is the model endpoint's name; model, the model asked.
	endpoint, model string
	// code is the error code answered, if the request was answered one.
	code weir.Code
	// call is the model request the gateway served, if it got that far.
	call *gateway.Call
}

// quietRoutes are the routes whose line is logged at debug, not info:
// probes and scrapes, which come every few seconds.
var quietRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// logAccess writes r's access log line, at info (a probe's or a scrape's
// at debug) unless the logger leaves that level out: who asked (the key's
// id and name, never its secret), what (model, endpoint), where it went
// (the candidate, the attempts), how long it took (in the queue,
// upstream, to the first byte of a stream, in all), how it ended
// (status, error code, outcome), its tokens and cost, and the trace it
// is part of. Nothing of the request's body or headers is logged but
// the client's X-Request-Id.
func (s *Server) logAccess(r *http.Request, ri *reqInfo, rw *statusWriter, start time.Time) {
	ctx := r.Context()
	level := slog.LevelInfo
	if quietRoutes[r.Pattern] {
		level = slog.LevelDebug
	}
	if !s.deps.Logger.Enabled(ctx, level) {
		return
	}
	now := s.deps.Clock.Now()
	var buf [26]slog.Attr
	a := append(buf[:0], slog.String("request_id", ri.id))
	if ri.clientID != "" {
		a = append(a, slog.String("client_request_id", ri.clientID))
	}
	acc := &ri.access
	status := rw.status()
	if c := acc.call; c != nil && c.Usage.Status != 0 {
		status = c.Usage.Status // 499 for a client gone, to whom nothing was written
	}
	a = append(a, slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.Float64("duration_ms", ms(now.Sub(start))))
	if acc.code != "" {
		a = append(a, slog.String("error", string(acc.code)))
	}
	if acc.keyID != "" {
		a = append(a, slog.String("key_id", acc.keyID), slog.String("key_name", acc.keyName))
	}
	if acc.endpoint != "" {
		a = append(a, slog.String("endpoint", acc.endpoint))
	}
	if acc.model != "" {
		a = append(a, slog.String("model", acc.model))
	}
	if c := acc.call; c != nil {
		a = callAttrs(a, c, rw, start)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		a = append(a, slog.String("trace_id", sc.TraceID().String()))
	}
	// The record goes to the handler directly, as LogAttrs would hand it
	// but without the caller's program counter, whose look-up is a stack
	// walk a request: no handler of Weir's logs its source. weir serve's
	// handler writes the same line without a Record.
	h := s.deps.Logger.Handler()
	if jh, ok := h.(*jsonlog.Handler); ok {
		_ = jh.HandleAttrs(ctx, now, level, "request", a)
		return
	}
	rec := slog.NewRecord(now, level, "request", 0)
	rec.AddAttrs(a...)
	_ = h.Handle(ctx, rec)
}

// callAttrs appends what the gateway's serving of c says to a.
func callAttrs(a []slog.Attr, c *gateway.Call, rw *statusWriter, start time.Time) []slog.Attr {
	u := &c.Usage
	a = append(a, slog.Bool("stream", c.Stream))
	if u.Outcome != "" {
		a = append(a, slog.String("outcome", u.Outcome))
	}
	if u.PlatformModel != "" {
		a = append(a, slog.String("candidate", u.PlatformModel))
	}
	if u.Handoff != "" {
		a = append(a, slog.String("handoff", u.Handoff))
	}
	a = append(a, slog.Int("attempts", c.Attempts), slog.Float64("queue_wait_ms", ms(c.Waited)))
	if c.Attempts > 0 {
		a = append(a, slog.Float64("upstream_ms", ms(c.Upstream)))
	}
	if c.Stream && !rw.at.IsZero() {
		a = append(a, slog.Float64("ttfb_ms", ms(rw.at.Sub(start))))
	}
	if u.PromptTokens != 0 || u.CompletionTokens != 0 {
		a = append(a, slog.Int64("tokens_in", u.PromptTokens), slog.Int64("tokens_out", u.CompletionTokens))
	}
	if u.Cost != 0 {
		a = append(a, slog.String("cost", u.Cost.String()), slog.Bool("cost_estimated", u.CostEstimated))
	}
	return a
}

// noteKey records the key a request authenticated with, for its access
// log line.
func noteKey(w http.ResponseWriter, k weir.APIKey) {
	acc := &infoOf(w).access
	acc.keyID, acc.keyName = k.ID, k.Name
}
