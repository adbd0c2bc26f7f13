package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Why a run's runtime request was cancelled.
var (
	errCancelled      = errors.New("the gateway cancelled the run")
	errStalled        = errors.New("the runtime made no progress")
	errRunStreamEnded = errors.New("the run stream ended")
	errRunOver        = errors.New("the run is over")
)

// closeWait bounds how long a run that has sent its RunEnd waits for the
// gateway to end its Run stream before dropping it.
const closeWait = 10 * time.Second

// hopHeaders are the runtime's answer headers that describe its own
// connection, not the answer, and are not passed on.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Content-Length": true,
}

// run is one offered run.
type run struct {
	s     *session
	offer *edgepb.Offer
	p     *Provider
	// streamCtx is the Run stream's; httpCtx, within it, the runtime
	// request's, cancelled (with its cause) by a Cancel, a stall, the
	// stream's end or the run's.
	streamCtx context.Context
	httpCtx   context.Context
	cancel    context.CancelCauseFunc

	// bodyCh has the request body once it came whole on the stream, or
	// why it did not. buf and delivered are the stream reader's.
	bodyCh    chan body
	buf       bytes.Buffer
	delivered bool
}

// body is a run's request body as the gateway sent it, or why not.
type body struct {
	data []byte
	err  error
}

// upStream is where a run sends its answer: its Run stream, one sender at
// a time (the runs on a ready stream follow each other, and one's last
// Send may still be returning when the next run's first begins).
type upStream struct {
	mu     sync.Mutex
	stream edgepb.Edge_RunClient
}

func (u *upStream) Send(m *edgepb.RunUp) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stream.Send(m)
}

// newRun is a run of offer o on a Run stream of streamCtx.
func newRun(streamCtx context.Context, s *session, o *edgepb.Offer, p *Provider) *run {
	r := &run{s: s, offer: o, p: p, streamCtx: streamCtx, bodyCh: make(chan body, 1)}
	r.httpCtx, r.cancel = context.WithCancelCause(r.streamCtx)
	return r
}

// open opens a Run stream for the run offered on the Control stream.
func (r *run) open() (edgepb.Edge_RunClient, error) {
	stream, err := r.s.client.Run(r.streamCtx)
	if err != nil {
		return nil, fmt.Errorf("open a run stream: %w", err)
	}
	if err := stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{RunId: r.offer.RunId, Generation: r.s.gen}}}); err != nil {
		return nil, fmt.Errorf("open the run: %w", err)
	}
	return stream, nil
}

// run serves the run on up, or, with a reason to refuse it, answers it
// with RunEnd ERROR so that the gateway frees its slot at once.
func (r *run) run(up *upStream, refuse string) {
	defer r.cancel(errRunOver)
	if tp := r.s.a.deps.Tracing; tp != nil && r.offer.Traceparent != "" {
		span := r.startSpan(tp)
		defer span.End()
	}
	if refuse != "" {
		r.s.a.deps.Logger.Warn("node: refusing an offer", "run", r.offer.RunId, "provider", r.offer.Provider, "reason", refuse)
		r.end(up, edgepb.RunEnd_ERROR, refuse, nil)
		return
	}
	r.serve(up)
}

// serve runs the offer: body, runtime call, answer.
func (r *run) serve(up *upStream) {
	log := r.s.a.deps.Logger.With("run", r.offer.RunId, "provider", r.p.ID)
	var b body
	switch {
	case r.offer.BodyInline:
		// The body came in the Offer; none follows on the stream.
		b.data = r.offer.Body
		if limit := r.s.a.cfg.MaxBodyBytes; int64(len(b.data)) > limit {
			b.err = overBound(limit)
		}
	default:
		select {
		case b = <-r.bodyCh:
		case <-r.httpCtx.Done():
			r.failed(up, log, context.Cause(r.httpCtx), false)
			return
		}
	}
	if b.err != nil {
		log.Warn("node: a run's request body was refused", "error", b.err)
		r.end(up, edgepb.RunEnd_ERROR, b.err.Error(), nil)
		return
	}
	if !strings.HasPrefix(r.offer.Path, "/") {
		r.end(up, edgepb.RunEnd_ERROR, fmt.Sprintf("path %q does not begin with /", r.offer.Path), nil)
		return
	}
	r.call(up, log, b.data)
}

// overBound is the refusal of a request body over the node's bound.
func overBound(limit int64) error {
	return fmt.Errorf("the request body is over the node's bound of %d bytes", limit)
}

// down takes a message of the gateway's for the run, from the reader of
// its stream: a piece of the request body, its end, or a Cancel.
func (r *run) down(m *edgepb.RunDown) {
	switch msg := m.Msg.(type) {
	case *edgepb.RunDown_Chunk:
		if r.delivered {
			return // a body that was refused, or a chunk after BodyEnd
		}
		if limit := r.s.a.cfg.MaxBodyBytes; int64(r.buf.Len())+int64(len(msg.Chunk.Data)) > limit {
			r.deliver(body{err: overBound(limit)})
			r.buf = bytes.Buffer{}
			return
		}
		r.buf.Write(msg.Chunk.Data)
	case *edgepb.RunDown_BodyEnd:
		r.deliver(body{data: r.buf.Bytes()})
	case *edgepb.RunDown_Cancel:
		r.cancel(fmt.Errorf("%w: %s", errCancelled, msg.Cancel.Reason))
	}
}

// streamEnded is the run's stream ending with err: the runtime request
// is cancelled.
func (r *run) streamEnded(err error) {
	r.deliver(body{err: fmt.Errorf("%w before the request body ended: %v", errRunStreamEnded, err)})
	r.cancel(errRunStreamEnded)
}

func (r *run) deliver(b body) {
	if !r.delivered {
		r.delivered = true
		r.bodyCh <- b
	}
}

// read reads a stream opened for r alone until it ends.
func (r *run) read(stream edgepb.Edge_RunClient, done chan<- struct{}) {
	defer close(done)
	for {
		m, err := stream.Recv()
		if err != nil {
			r.streamEnded(err)
			return
		}
		r.down(m)
	}
}

// call POSTs the body to the runtime and streams its answer back.
func (r *run) call(stream *upStream, log *slog.Logger, data []byte) {
	a := r.s.a
	dog := clock.NewWatch(a.deps.Clock, a.cfg.StallTimeout, func() { r.cancel(errStalled) })
	defer dog.Stop()
	req, err := http.NewRequestWithContext(r.httpCtx, http.MethodPost, r.p.URL+r.offer.Path, bytes.NewReader(data))
	if err != nil {
		r.end(stream, edgepb.RunEnd_ERROR, fmt.Sprintf("make the runtime request: %v", err), nil)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	tracing.Inject(r.httpCtx, req.Header)
	dog.Arm()
	resp, err := a.deps.HTTP.Do(req)
	dog.Disarm()
	if err != nil {
		r.failed(stream, log, err, false)
		return
	}
	defer resp.Body.Close()
	head := &edgepb.RunHead{Status: int32(resp.StatusCode), Headers: map[string]string{}}
	for k, vs := range resp.Header {
		if !hopHeaders[k] {
			head.Headers[k] = strings.Join(vs, ", ")
		}
	}
	// Send encodes a message before it returns, so no message holds on
	// to buf once the run is over.
	bp := a.bufs.Get().(*[]byte)
	defer a.bufs.Put(bp)
	buf := *bp
	if !r.offer.Stream && r.s.wholeHeads {
		// The head waits for the answer's first bytes, and, for an answer
		// that fits them, says it is complete: one message, not three.
		dog.Arm()
		n, err := io.ReadFull(resp.Body, buf)
		dog.Disarm()
		head.Body = buf[:n]
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			head.Complete = true
		case err != nil:
			r.failed(stream, log, err, false)
			return
		}
	}
	if err := stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Head{Head: head}}); err != nil {
		r.gone(log, err)
		return
	}
	if head.Complete {
		return
	}
	for {
		dog.Arm()
		n, err := resp.Body.Read(buf)
		dog.Disarm()
		if n > 0 {
			// Send encodes the message before it returns, so buf is free
			// to be read into again.
			if err := stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Chunk{Chunk: &edgepb.Chunk{Data: buf[:n]}}}); err != nil {
				r.gone(log, err)
				return
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			r.end(stream, edgepb.RunEnd_COMPLETE, "", nil)
			return
		case err != nil:
			r.failed(stream, log, err, true)
			return
		}
	}
}

// failed ends a run whose runtime request failed with err, by its cause:
// a stall (probed), a cancel, the stream's own end (nothing to send), or
// the runtime's failure.
func (r *run) failed(stream *upStream, log *slog.Logger, err error, headSent bool) {
	cause := context.Cause(r.httpCtx)
	switch {
	case errors.Is(cause, errStalled):
		ev := r.s.probe(r.streamCtx, r.p)
		log.Warn("node: a run stalled", "stall_timeout", r.s.a.cfg.StallTimeout.String(),
			"health", ev.Health.String(), "classification", ev.Classification)
		r.end(stream, edgepb.RunEnd_STALLED, fmt.Sprintf("no progress from the runtime within %s", r.s.a.cfg.StallTimeout), ev)
	case errors.Is(cause, errCancelled):
		log.Info("node: a run was cancelled", "cause", cause)
		r.end(stream, edgepb.RunEnd_CANCELLED, cause.Error(), nil)
	case cause != nil:
		r.gone(log, cause)
	case headSent:
		log.Warn("node: a runtime's answer broke off", "error", err)
		r.end(stream, edgepb.RunEnd_ERROR, fmt.Sprintf("the runtime's answer broke off: %v", err), nil)
	default:
		log.Warn("node: could not call a runtime", "error", err)
		r.end(stream, edgepb.RunEnd_ERROR, fmt.Sprintf("call the runtime: %v", err), nil)
	}
}

// gone logs a run whose stream ended before its answer did: the gateway
// has given up on it, or the session ended.
func (r *run) gone(log *slog.Logger, err error) {
	log.Info("node: a run's stream ended before its answer", "error", err)
}

// startSpan starts the run's span below the gateway's call (the
// offer's traceparent), in the run's runtime context.
func (r *run) startSpan(tp trace.TracerProvider) trace.Span {
	ctx := trace.ContextWithRemoteSpanContext(r.httpCtx, tracing.Remote(r.offer.Traceparent))
	var span trace.Span
	r.httpCtx, span = tracing.Tracer(tp).Start(ctx, "weir.node.run", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("weir.node.provider", r.offer.Provider), attribute.String("weir.node.run_id", r.offer.RunId),
			semconv.URLPath(r.offer.Path)))
	return span
}

// end sends the run's RunEnd; a failure means the stream is gone already.
func (r *run) end(stream *upStream, kind edgepb.RunEnd_Kind, msg string, ev *edgepb.Evidence) {
	if span := trace.SpanFromContext(r.httpCtx); span.IsRecording() {
		span.SetAttributes(attribute.String("weir.node.run_end", kind.String()))
		if kind != edgepb.RunEnd_COMPLETE {
			span.SetStatus(codes.Error, msg)
		}
	}
	_ = stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_End{End: &edgepb.RunEnd{Kind: kind, Message: msg, Evidence: ev}}})
}
