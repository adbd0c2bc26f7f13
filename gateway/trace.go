package gateway

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/internal/fastjson"
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
	attrModel         = attribute.Key("weir.model")
	attrPlatformModel = attribute.Key("weir.platform_model")
	attrPlatform      = attribute.Key("weir.platform")
	attrOutcome       = attribute.Key("weir.outcome")
)

// startQueueSpan starts the span of c's wait for admission on r's
// current candidates, if c's request is traced; else it returns ctx and
// nil. Only a request that did not get its lease at once has one: the
// span of the common case would cost more than the wait it shows.
func startQueueSpan(ctx context.Context, c *Call, r *routing, attempt int) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	ctx, span := tracing.Child(ctx, "weir.queue")
	span.SetAttributes(attrModel.String(c.Model.Name), attrAttempt.Int(attempt))
	var scopes []string
	for _, cand := range r.candidates(r.current()) {
		for _, n := range cand.Needs {
			if !slices.Contains(scopes, n.Scope) {
				scopes = append(scopes, n.Scope)
			}
		}
	}
	span.SetAttributes(attrQueueScopes.StringSlice(scopes))
	return ctx, span
}

// endQueueSpan ends a wait for admission that ended in lease or err:
// admitted (to the first candidate), fallback (to a later one), or the
// outcome of the error.
func endQueueSpan(span trace.Span, lease admission.Lease, err error) {
	switch {
	case err != nil:
		span.SetAttributes(attrQueueOutcome.String(string(outcomeOf(err))))
		span.SetStatus(codes.Error, err.Error())
	case lease.Candidate > 0:
		span.SetAttributes(attrQueueOutcome.String("fallback"))
	default:
		span.SetAttributes(attrQueueOutcome.String("admitted"))
	}
	span.End()
}

// acquireTraced is Engine.Acquire that records, on span, where the
// waiter stood when it queued: the scope it waited on, its position
// there and how many waited. It is Acquire made of Enqueue, Position and
// Cancel, as a fleet's Acquire is, and runs only for a traced request.
func (s *Service) acquireTraced(ctx context.Context, req admission.Request, span trace.Span) (admission.Lease, error) {
	type result struct {
		lease admission.Lease
		err   error
	}
	e := s.deps.Engine
	ch := make(chan result, 1)
	if err := e.Enqueue(ctx, req, func(l admission.Lease, err error) { ch <- result{l, err} }); err != nil {
		return admission.Lease{}, err
	}
	if pos, err := e.Position(ctx, req.ID); err == nil {
		span.SetAttributes(attrQueueScope.String(pos.Scope), attrQueuePosition.Int(pos.Ahead+1), attrQueueQueued.Int(pos.Queued))
	}
	select {
	case r := <-ch:
		return r.lease, r.err
	case <-ctx.Done():
	}
	_ = e.Cancel(context.WithoutCancel(ctx), req.ID)
	r := <-ch
	if r.err == nil {
		_ = e.Release(context.WithoutCancel(ctx), r.lease.ID, r.lease.Owner)
	}
	return admission.Lease{}, ctx.Err()
}

// tracedAttempt is attempt (the n-th of c's) in its client span, if c's
// request is traced.
func (s *Service) tracedAttempt(ctx context.Context, c *Call, out Answer, lease admission.Lease, pm upstream, n int) (*provider.Error, error) {
	ctx, span := s.startAttempt(ctx, c, pm, n)
	retry, err := s.attempt(ctx, c, out, lease, pm)
	if span != nil {
		endAttempt(span, c, retry, err)
	}
	return retry, err
}

// startAttempt starts the client span of c's upstream call to pm (the
// GenAI conventions' inference span), if c's request is traced; else it
// returns ctx and nil.
func (s *Service) startAttempt(ctx context.Context, c *Call, pm upstream, attempt int) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	op := operationOf(c)
	kind, host := providerOf(c.Snapshot, pm)
	ctx, span := tracing.Child(ctx, op+" "+pm.Upstream, trace.WithSpanKind(trace.SpanKindClient))
	span.SetAttributes(
		semconv.GenAIOperationNameKey.String(op),
		semconv.GenAIProviderNameKey.String(kind),
		semconv.GenAIRequestModel(pm.Upstream),
		attrModel.String(c.Model.Name),
		attrPlatformModel.String(pm.Name),
		attrPlatform.String(pm.Platform),
		attrAttempt.Int(attempt),
	)
	if host != "" {
		span.SetAttributes(semconv.ServerAddress(host))
	}
	if c.MaxTokens > 0 {
		span.SetAttributes(semconv.GenAIRequestMaxTokens(int(c.MaxTokens)))
	}
	return ctx, span
}

// endAttempt ends the span of an attempt that returned retry and err
// (attempt's results), with the usage and the answer it read.
func endAttempt(span trace.Span, c *Call, retry *provider.Error, err error) {
	if c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0 {
		span.SetAttributes(semconv.GenAIUsageInputTokens(int(c.Usage.PromptTokens)), semconv.GenAIUsageOutputTokens(int(c.Usage.CompletionTokens)))
	}
	var etype string
	switch {
	case retry != nil:
		etype = string(callOutcome(retry))
	case err != nil:
		etype = string(outcomeOf(err))
	case c.Usage.Outcome != "" && c.Usage.Outcome != string(OutcomeOK):
		etype = c.Usage.Outcome
	}
	if etype != "" {
		span.SetAttributes(semconv.ErrorTypeKey.String(etype))
		span.SetStatus(codes.Error, etype)
	}
	span.End()
}

// answerSeen records on span, an attempt's, the response model and the
// finish reasons of a whole (not streamed) JSON answer, in Chat
// Completions' shape or Anthropic's Messages'. Nothing of the prompt or
// the completion is recorded.
func answerSeen(span trace.Span, body []byte) {
	var (
		model   string
		reasons []string
	)
	rd := fastjson.NewReader(body)
	if rd.Open('{') {
		for rd.Next('}') {
			switch string(rd.Key()) {
			case "model":
				model = rd.String()
			case "stop_reason": // Anthropic's Messages
				if r := rd.String(); r != "" {
					reasons = append(reasons, r)
				}
			case "choices":
				reasons = finishReasons(rd, reasons)
			default:
				rd.Skip()
			}
		}
	}
	if model != "" {
		span.SetAttributes(semconv.GenAIResponseModel(model))
	}
	if len(reasons) > 0 {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(reasons...))
	}
}

// finishReasons reads Chat Completions' choices, appending each one's
// finish_reason to reasons.
func finishReasons(rd *fastjson.Reader, reasons []string) []string {
	if !rd.Open('[') {
		return reasons
	}
	for rd.Next(']') {
		if !rd.Open('{') {
			return reasons
		}
		for rd.Next('}') {
			if string(rd.Key()) == "finish_reason" {
				if r := rd.String(); r != "" {
					reasons = append(reasons, r)
				}
				continue
			}
			rd.Skip()
		}
	}
	return reasons
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
		return "weir.node", ""
	}
	if st == nil {
		return "", ""
	}
	b, ok := st.built[pm.Platform]
	if !ok {
		return "", ""
	}
	if u, err := url.Parse(b.cfg.BaseURL); err == nil {
		host = u.Hostname()
	}
	switch b.cfg.Kind {
	case "gemini":
		kind = "gcp.gemini"
	case "azure":
		kind = "azure.ai.openai"
	case "bedrock":
		kind = "aws.bedrock"
		if host == "" && b.cfg.Region != "" {
			host = "bedrock-runtime." + b.cfg.Region + ".amazonaws.com"
		}
	default:
		kind = b.cfg.Kind
	}
	return kind, host
}
