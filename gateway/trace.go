package gateway

import (
	"cmp"
	"context"
	"net/url"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/tracing"
)

// The attributes of Weir's own on its spans.
const (
	attrQueueOutcome  = attribute.Key("weir.queue.outcome")
	attrQueueScopes   = attribute.Key("weir.queue.scopes")
	attrQueueScope    = attribute.Key("weir.queue.scope")
	attrQueuePosition = attribute.Key("weir.queue.position")
	attrQueueQueued   = attribute.Key("weir.queue.queued")
	attrAttempt       = attribute.Key("weir.attempt")
	attrPlatformModel = attribute.Key("weir.platform_model")
	attrPlatform      = attribute.Key("weir.platform")
)

// startQueueSpan starts the span of c's wait for admission on r's
// current candidates, if c's request is traced; else it returns ctx and
// nil. Only a request that did not get its lease at once has one: the
// span of the common case would cost more than the wait it shows. The
// model asked is its parent's (the server span's), not repeated here.
func startQueueSpan(ctx context.Context, c *Call, r *routing, attempt int) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	ctx, span := tracing.Child(ctx, "weir.queue")
	var scopes []string
	for _, cand := range r.candidates(r.current()) {
		for _, n := range cand.Needs {
			if !slices.Contains(scopes, n.Scope) {
				scopes = append(scopes, n.Scope)
			}
		}
	}
	span.SetAttributes(attrAttempt.Int(attempt), attrQueueScopes.StringSlice(scopes))
	return ctx, span
}

// endQueueSpan ends a wait for admission that ended in lease or err:
// admitted (to the first candidate), fallback (to a later one), or the
// outcome of the error.
func endQueueSpan(span trace.Span, lease admission.Lease, err error) {
	end := tracing.Ending{Span: span, Attrs: tracing.Attrs()}
	switch {
	case err != nil:
		*end.Attrs = append(*end.Attrs, attrQueueOutcome.String(string(outcomeOf(err))))
		end.Code, end.Desc = codes.Error, err.Error()
	case lease.Candidate > 0:
		*end.Attrs = append(*end.Attrs, attrQueueOutcome.String("fallback"))
	default:
		*end.Attrs = append(*end.Attrs, attrQueueOutcome.String("admitted"))
	}
	tracing.EndLater(end)
}

// tracedAttempt is attempt (the n-th of c's) in its client span, if c's
// request is traced.
func (s *Service) tracedAttempt(ctx context.Context, c *Call, out Answer, lease admission.Lease, pm upstream, n int) (*provider.Error, error) {
	ctx, span, attrs := s.startAttempt(ctx, c, pm, n)
	retry, err := s.attempt(ctx, c, out, lease, pm)
	if span != nil {
		var notes *answerNotes
		if c.obs != nil {
			notes, c.obs.notes = c.obs.notes, nil
		}
		endAttempt(span, attrs, notes, c, retry, err)
	}
	return retry, err
}

// noteAttempt readies c's attempt, traced in span, to note the answer
// it gets (answerNotes), and with content capture on records body, the
// request sent upstream, as the input messages.
func (s *Service) noteAttempt(span trace.Span, c *Call, body []byte) {
	c.obs.notes = newAnswerNotes(s.cfg.CaptureContent)
	if s.cfg.CaptureContent && len(body) > 0 {
		if attrs := inputMessages(body); len(attrs) > 0 {
			span.SetAttributes(attrs...)
		}
	}
}

// clientSpan starts an attempt's span: a slice made once, so that
// starting one allocates no options.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// startAttempt starts the client span of c's upstream call to pm (the
// GenAI conventions' inference span), if c's request is traced; else it
// returns ctx and nil. Its request's attributes are returned, not set
// (in a slice of tracing.Attrs): the span gets them with the answer's
// and the end's in one call as it ends (each call grows the span's
// slice), and none repeats the server span's (the model asked). No
// sampler Weir configures reads attributes.
func (s *Service) startAttempt(ctx context.Context, c *Call, pm upstream, attempt int) (context.Context, trace.Span, *[]attribute.KeyValue) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil, nil
	}
	op := operationOf(c)
	kind, host := providerOf(c.Snapshot, pm)
	ctx, span := tracing.Child(ctx, spanNames.name(op, pm.Upstream), clientSpan...)
	p := tracing.Attrs()
	attrs := append(*p,
		semconv.GenAIOperationNameKey.String(op),
		semconv.GenAIProviderNameKey.String(kind),
		semconv.GenAIRequestModel(pm.Upstream),
		attrPlatformModel.String(pm.Name),
		attrPlatform.String(pm.Platform),
		attrAttempt.Int(attempt),
	)
	if host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
	}
	if c.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(c.MaxTokens)))
	}
	*p = attrs
	return ctx, span, p
}

// endAttempt ends the span of an attempt that returned retry and err
// (attempt's results), setting attrs (tracing.Attrs') with the usage
// the upstream reported (a count made from a stream's chunks, or the
// estimate of an answer that reported none, is not the upstream's
// usage) and what notes, if any, read of its answer. It ends later
// (tracing.EndLater), the notes read then.
func endAttempt(span trace.Span, p *[]attribute.KeyValue, notes *answerNotes, c *Call, retry *provider.Error, err error) {
	attrs := *p
	var etype string
	switch {
	case retry != nil:
		etype = string(callOutcome(retry))
	case err != nil:
		etype = string(outcomeOf(err))
	case c.Usage.Outcome != "" && c.Usage.Outcome != string(OutcomeOK):
		etype = c.Usage.Outcome
	}
	if c.obs != nil && c.obs.reported && (c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0) {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(int(c.Usage.PromptTokens)), semconv.GenAIUsageOutputTokens(int(c.Usage.CompletionTokens)))
	}
	if etype != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(etype))
	}
	*p = attrs
	end := tracing.Ending{Span: span, Attrs: p}
	if notes != nil {
		end.Notes = notes
	}
	if etype != "" {
		end.Code, end.Desc = codes.Error, etype
	}
	tracing.EndLater(end)
}

// commonFinishReasons are gen_ai.response.finish_reasons of the answers
// with one choice and a usual reason (Chat Completions' and Messages'),
// made once: a slice attribute is a copy of its slice, made each time.
var commonFinishReasons = func() map[string]attribute.KeyValue {
	m := map[string]attribute.KeyValue{}
	for _, r := range []string{"stop", "length", "tool_calls", "content_filter", "function_call",
		"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"} {
		m[r] = semconv.GenAIResponseFinishReasons(r)
	}
	return m
}()

// finishReasonsAttr is gen_ai.response.finish_reasons of reasons.
func finishReasonsAttr(reasons []string) attribute.KeyValue {
	if len(reasons) == 1 {
		if kv, ok := commonFinishReasons[reasons[0]]; ok {
			return kv
		}
	}
	return semconv.GenAIResponseFinishReasons(reasons...)
}

// operationOf is c's GenAI operation name.
func operationOf(c *Call) string {
	switch {
	case c.Native != nil, strings.HasSuffix(c.Path, "/chat/completions"):
		return "chat"
	case c.Model.Kind == weir.KindEmbeddings:
		return "embeddings"
	case c.Model.Kind == weir.KindImages:
		return "image_generation"
	case c.Model.Kind == weir.KindSpeech:
		return "speech"
	}
	return string(c.Model.Kind)
}

// providerOf is pm's GenAI provider name (gen_ai.provider.name) and the
// host its calls go to (server.address), "" where unknown.
func providerOf(st *Snapshot, pm upstream) (kind, host string) {
	if strings.HasPrefix(pm.Platform, "node ") {
		return nodeProvider, ""
	}
	if st == nil {
		return pm.provider, ""
	}
	b, ok := st.built[pm.Platform]
	if !ok {
		return pm.provider, ""
	}
	return cmp.Or(pm.provider, st.providerName(pm.Platform)), b.host
}

// serverAddress is the host that calls to the platform cfg go to (a
// client span's server.address), "" where unknown: made once as the
// platform's adapters are built.
func serverAddress(cfg provider.Platform) string {
	var host string
	if u, err := url.Parse(cfg.BaseURL); err == nil {
		host = u.Hostname()
	}
	if host == "" && cfg.Kind == "bedrock" && cfg.Region != "" {
		host = "bedrock-runtime." + cfg.Region + ".amazonaws.com"
	}
	return host
}

// maxSpanNames bounds spanNames: past it, a name is made for each span.
const maxSpanNames = 1024

// spanNames are client spans' names ("chat gpt-4o-mini"), by operation
// and upstream model, made once each: the catalog's models are few.
var spanNames = &spanNameTable{names: map[string]map[string]string{}}

// spanNameTable is a bounded table of span names, by operation and model.
type spanNameTable struct {
	mu    sync.RWMutex
	names map[string]map[string]string // by operation, then model
	n     int
}

// name is the span name of op on model: "{op} {model}".
func (t *spanNameTable) name(op, model string) string {
	t.mu.RLock()
	name, ok := t.names[op][model]
	t.mu.RUnlock()
	if ok {
		return name
	}
	name = op + " " + model
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n < maxSpanNames {
		byModel := t.names[op]
		if byModel == nil {
			byModel = map[string]string{}
			t.names[op] = byModel
		}
		if _, ok := byModel[model]; !ok {
			byModel[model] = name
			t.n++
		}
	}
	return name
}
