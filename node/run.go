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
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
)

// Why a run's runtime request was cancelled.
var (
	errCancelled      = errors.New("the gateway cancelled the run")
	errStalled        = errors.New("the runtime made no progress")
	errRunStreamEnded = errors.New("the run stream ended")
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
	// request's, cancelled (with its cause) by a Cancel, a stall or the
	// stream's end.
	streamCtx    context.Context
	streamCancel context.CancelFunc
	httpCtx      context.Context
	cancel       context.CancelCauseFunc
}

func newRun(ctx context.Context, s *session, o *edgepb.Offer, p *Provider) *run {
	r := &run{s: s, offer: o, p: p}
	r.streamCtx, r.streamCancel = context.WithCancel(ctx)
	r.httpCtx, r.cancel = context.WithCancelCause(r.streamCtx)
	return r
}

// body is a run's request body as the gateway sent it, or why not.
type body struct {
	data []byte
	err  error
}

// serve runs the offer: open, body, runtime call, answer.
func (r *run) serve() {
	defer r.streamCancel()
	log := r.s.a.deps.Logger.With("run", r.offer.RunId, "provider", r.p.ID)
	stream, err := r.s.client.Run(r.streamCtx)
	if err != nil {
		log.Warn("node: could not open a run stream", "error", err)
		return
	}
	if err := stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{RunId: r.offer.RunId, Generation: r.s.gen}}}); err != nil {
		log.Warn("node: could not open a run", "error", err)
		return
	}
	bodyCh := make(chan body, 1)
	recvDone := make(chan struct{})
	go r.receive(stream, bodyCh, recvDone)
	defer r.close(stream, recvDone)

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
		case b = <-bodyCh:
		case <-r.httpCtx.Done():
			r.failed(stream, log, context.Cause(r.httpCtx), false)
			return
		}
	}
	if b.err != nil {
		log.Warn("node: a run's request body was refused", "error", b.err)
		r.end(stream, edgepb.RunEnd_ERROR, b.err.Error(), nil)
		return
	}
	if !strings.HasPrefix(r.offer.Path, "/") {
		r.end(stream, edgepb.RunEnd_ERROR, fmt.Sprintf("path %q does not begin with /", r.offer.Path), nil)
		return
	}
	r.call(stream, log, b.data)
}

// overBound is the refusal of a request body over the node's bound.
func overBound(limit int64) error {
	return fmt.Errorf("the request body is over the node's bound of %d bytes", limit)
}

// receive reads the Run stream: the request body, delivered whole on
// bodyCh, then a Cancel or the stream's end, either of which cancels
// the runtime request.
func (r *run) receive(stream edgepb.Edge_RunClient, bodyCh chan<- body, done chan<- struct{}) {
	defer close(done)
	var buf bytes.Buffer
	delivered := false
	deliver := func(b body) {
		if !delivered {
			delivered = true
			bodyCh <- b
		}
	}
	limit := r.s.a.cfg.MaxBodyBytes
	for {
		m, err := stream.Recv()
		if err != nil {
			deliver(body{err: fmt.Errorf("%w before the request body ended: %v", errRunStreamEnded, err)})
			r.cancel(errRunStreamEnded)
			return
		}
		switch msg := m.Msg.(type) {
		case *edgepb.RunDown_Chunk:
			if delivered {
				continue // a body that was refused, or a chunk after BodyEnd
			}
			if int64(buf.Len())+int64(len(msg.Chunk.Data)) > limit {
				deliver(body{err: overBound(limit)})
				buf = bytes.Buffer{}
				continue
			}
			buf.Write(msg.Chunk.Data)
		case *edgepb.RunDown_BodyEnd:
			deliver(body{data: buf.Bytes()})
		case *edgepb.RunDown_Cancel:
			r.cancel(fmt.Errorf("%w: %s", errCancelled, msg.Cancel.Reason))
		}
	}
}

// call POSTs the body to the runtime and streams its answer back.
func (r *run) call(stream edgepb.Edge_RunClient, log *slog.Logger, data []byte) {
	a := r.s.a
	dog := watchdog{clock: a.deps.Clock, d: a.cfg.StallTimeout, fire: func() { r.cancel(errStalled) }}
	req, err := http.NewRequestWithContext(r.httpCtx, http.MethodPost, r.p.URL+r.offer.Path, bytes.NewReader(data))
	if err != nil {
		r.end(stream, edgepb.RunEnd_ERROR, fmt.Sprintf("make the runtime request: %v", err), nil)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	dog.arm()
	resp, err := a.deps.HTTP.Do(req)
	dog.stop()
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
	if err := stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Head{Head: head}}); err != nil {
		r.gone(log, err)
		return
	}
	buf := make([]byte, a.cfg.ReadBufferBytes)
	for {
		dog.arm()
		n, err := resp.Body.Read(buf)
		dog.stop()
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
func (r *run) failed(stream edgepb.Edge_RunClient, log *slog.Logger, err error, headSent bool) {
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

// end sends the run's RunEnd; a failure means the stream is gone already.
func (r *run) end(stream edgepb.Edge_RunClient, kind edgepb.RunEnd_Kind, msg string, ev *edgepb.Evidence) {
	_ = stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_End{End: &edgepb.RunEnd{Kind: kind, Message: msg, Evidence: ev}}})
}

// close half-closes the stream and waits, up to closeWait, for the
// gateway to end it (the receiver sees its end), so that the RunEnd is
// delivered rather than cut off by a reset.
func (r *run) close(stream edgepb.Edge_RunClient, recvDone <-chan struct{}) {
	_ = stream.CloseSend()
	t := r.s.a.deps.Clock.AfterFunc(closeWait, r.streamCancel)
	defer t.Stop()
	<-recvDone
}

// refuse answers an offer the node cannot run with RunEnd ERROR on a Run
// stream of its own, so that the gateway frees its slot at once.
func (r *run) refuse(msg string) {
	defer r.streamCancel()
	stream, err := r.s.client.Run(r.streamCtx)
	if err != nil {
		return
	}
	_ = stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{RunId: r.offer.RunId, Generation: r.s.gen}}})
	r.end(stream, edgepb.RunEnd_ERROR, msg, nil)
	_ = stream.CloseSend()
	t := r.s.a.deps.Clock.AfterFunc(closeWait, r.streamCancel)
	defer t.Stop()
	for {
		if _, err := stream.Recv(); err != nil {
			return
		}
	}
}

// watchdog cancels a run whose runtime sends nothing for d: armed while
// the agent waits on the runtime, stopped while it waits on the gateway
// (a slow client is not a stalled runtime).
type watchdog struct {
	clock clock.Clock
	d     time.Duration
	fire  func()
	t     clock.Timer
}

func (w *watchdog) arm() { w.t = w.clock.AfterFunc(w.d, w.fire) }

func (w *watchdog) stop() {
	if w.t != nil {
		w.t.Stop()
	}
}
