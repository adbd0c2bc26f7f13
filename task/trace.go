package task

import (
	"context"

	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/tracing"
)

// A task's life is one trace: the spans below start in whichever
// process runs the step, after any restart, below the trace context of
// the request that submitted the task (weir.Task.TraceParent), read from
// the store with the task.

// taskSpan starts a span named name of t's trace, if the service traces
// and t's submitter was traced; else it returns ctx and nil.
func (s *Service) taskSpan(ctx context.Context, t weir.Task, name string, opts ...oteltrace.SpanStartOption) (context.Context, oteltrace.Span) {
	if s.tracer == nil || t.TraceParent == "" {
		return ctx, nil
	}
	parent := tracing.Remote(t.TraceParent)
	if !parent.IsValid() {
		return ctx, nil
	}
	ctx = oteltrace.ContextWithRemoteSpanContext(ctx, parent)
	opts = append(opts, oteltrace.WithAttributes(attribute.String("weir.task.id", t.ID), attribute.String("weir.model", t.Model)))
	return s.tracer.Start(ctx, name, opts...)
}

// attemptOf is the job row's attempt, 0 if there is no row.
func attemptOf(row *rivertype.JobRow) int {
	if row == nil {
		return 0
	}
	return row.Attempt
}

// attemptSpan starts the span of a step of t's job (row), and, on its
// first step, the span of t's wait in the queue, from its submission to
// its admission.
func (s *Service) attemptSpan(ctx context.Context, t weir.Task, row *rivertype.JobRow) (context.Context, oteltrace.Span) {
	if s.tracer == nil || t.TraceParent == "" {
		return ctx, nil
	}
	attempt := attemptOf(row)
	if attempt == 1 && t.UpstreamID == "" && !t.AdmittedAt.IsZero() {
		_, queued := s.taskSpan(ctx, t, "weir.task.queued", oteltrace.WithTimestamp(t.CreatedAt),
			oteltrace.WithAttributes(attribute.String("weir.platform_model", t.PlatformModel)))
		if queued != nil {
			queued.End(oteltrace.WithTimestamp(t.AdmittedAt))
		}
	}
	return s.taskSpan(ctx, t, "weir.task.attempt",
		oteltrace.WithAttributes(attribute.Int("weir.task.attempt", attempt), attribute.String("weir.platform_model", t.PlatformModel),
			attribute.Bool("weir.task.follow", t.UpstreamID != "")))
}

// callbackSpan starts the span of one delivery (its job row's attempt)
// of t's event eventID to t's callback URL, which receives its trace
// context.
func (s *Service) callbackSpan(ctx context.Context, t weir.Task, eventID string, row *rivertype.JobRow) (context.Context, oteltrace.Span) {
	if s.tracer == nil || t.TraceParent == "" {
		return ctx, nil
	}
	return s.taskSpan(ctx, t, "weir.task.callback", oteltrace.WithSpanKind(oteltrace.SpanKindClient),
		oteltrace.WithAttributes(attribute.String("weir.task.event", eventID), attribute.Int("weir.task.attempt", attemptOf(row))))
}

// endTaskSpan ends span, if there is one.
func endTaskSpan(span oteltrace.Span) {
	if span != nil {
		span.End()
	}
}
