package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/tracing"
)

// chunkBytes is the most one Chunk of a request body carries.
const chunkBytes = 32 << 10

// inlineBytes is the largest request body sent in its Offer, to a node
// that takes it there: the node starts the runtime call without waiting
// for the body on the Run stream, one leg fewer before the answer. A
// larger body goes on the Run stream, where a slow node's flow control
// holds it up without holding up the session's other messages.
const inlineBytes = 16 << 10

// run is one call offered to a node. Its Run stream is the one the
// node opened for it, or a ready one the gateway offered it on; from the
// moment it is attached the run's own goroutine (Do, then the answer's
// reader) alone sends and receives on it, so that each message of the
// answer is handed on once, from gRPC's reader to the client's writer,
// and a client that reads slowly slows the node's stream (gRPC's flow
// control) instead of filling the gateway's memory. The stream's handler
// holds it open meanwhile. A run cut short ends its stream, which wakes a
// Recv or Send blocked on it: that is how timeouts, a client gone and the
// session's end reach the run's goroutine.
type run struct {
	id     string
	sess   *session
	target weir.NodeTarget
	// ready is the ready stream the run was offered on; nil for a run
	// offered on the Control stream. Set before the run is shared.
	ready *readyStream

	stream   edgepb.Edge_RunServer
	attached chan struct{} // closed once stream is set
	over     chan struct{} // closed once the run is cut or finished
	overOnce sync.Once

	mu sync.Mutex
	// cause is why the run was cut short, for its goroutine to answer
	// with once the stream fails; refusal the status its stream ends with
	// when the node broke the protocol; finished once the gateway is done
	// with the run.
	cause    error
	refusal  error
	finished bool
	// head and ended say what of the answer was read: its head, its end.
	// Only the run's goroutine reads head; ended, its handler too.
	head  bool
	ended atomic.Bool
}

// cut ends the run with cause, unless the gateway is done with it: its
// stream ends, and whatever the run's goroutine waits on fails with cause.
func (r *run) cut(cause error) {
	r.mu.Lock()
	if r.finished {
		r.mu.Unlock()
		return
	}
	if r.cause == nil {
		r.cause = cause
	}
	r.mu.Unlock()
	r.overOnce.Do(func() { close(r.over) })
	if r.ready != nil {
		r.ready.stop(r.streamStatus())
	}
}

// finish is the gateway done with r. A ready stream whose run ended as
// the protocol says goes back to wait for the next run; any other ends.
// A run the node never took is cancelled on the Control stream.
func (r *run) finish() {
	r.mu.Lock()
	if r.finished {
		r.mu.Unlock()
		return
	}
	r.finished = true
	reuse := r.cause == nil && r.refusal == nil && r.ended.Load()
	r.mu.Unlock()
	r.overOnce.Do(func() { close(r.over) })
	if rs := r.ready; rs != nil {
		if !reuse || !r.sess.repark(rs) {
			rs.stop(r.streamStatus())
		}
	}
	r.sess.dropRun(r)
}

// streamStatus is what the run's stream ends with once the run is over.
func (r *run) streamStatus() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.refusal != nil:
		return r.refusal
	case !r.ended.Load():
		return status.Error(codes.Canceled, "the gateway gave up on the run")
	}
	return nil
}

// failure is why the run's stream failed with err.
func (r *run) failure(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cause != nil {
		return r.cause
	}
	return &provider.Error{Err: fmt.Errorf("the node's Run stream broke: %w", err)}
}

// refuse ends a run whose node broke the protocol: the stream ends with
// InvalidArgument, and the run fails.
func (r *run) refuse(why string) error {
	err := &provider.Error{Err: fmt.Errorf("node %s broke the run's protocol: %s", r.target.Node, why)}
	r.mu.Lock()
	if r.refusal == nil {
		r.refusal = status.Error(codes.InvalidArgument, why)
	}
	r.mu.Unlock()
	r.cut(err)
	return err
}

// next reads the node's next message of the run, checked.
func (r *run) next(h *Hub) (*edgepb.RunUp, error) {
	m, err := r.stream.Recv()
	if err != nil {
		return nil, r.failure(err)
	}
	switch msg := m.Msg.(type) {
	case *edgepb.RunUp_Head:
		if r.head {
			return nil, r.refuse("a run has one head")
		}
		r.head = true
		if msg.Head.Complete {
			r.ended.Store(true)
		}
	case *edgepb.RunUp_Chunk:
		if !r.head {
			return nil, r.refuse("a chunk before the run's head")
		}
	case *edgepb.RunUp_End:
		r.ended.Store(true)
		if e := msg.End; e.Kind == edgepb.RunEnd_STALLED && e.Evidence != nil {
			h.evidence(r.sess, e.Evidence, sourceStall, r.target.Provider)
		}
	default:
		return nil, r.refuse("a Run stream message of no known kind")
	}
	return m, nil
}

// send sends m on the run's stream.
func (r *run) send(m *edgepb.RunDown) error {
	if err := r.stream.Send(m); err != nil {
		return r.failure(err)
	}
	return nil
}

// sendBody sends a body that did not go in the Offer, in chunks.
func (r *run) sendBody(body []byte) error {
	for rest := body; len(rest) > 0; {
		n := min(len(rest), chunkBytes)
		// Send encodes the message before it returns, so the chunk may
		// share the caller's body.
		if err := r.send(&edgepb.RunDown{Msg: &edgepb.RunDown_Chunk{Chunk: &edgepb.Chunk{Data: rest[:n]}}}); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return r.send(&edgepb.RunDown{Msg: &edgepb.RunDown_BodyEnd{BodyEnd: &edgepb.BodyEnd{}}})
}

// Do runs c on t's provider through its node's session, as an upstream
// adapter would: the answer for a 2xx, else a *provider.Error (a node
// gone or failing before an answer is a retryable one, status 0). The
// caller closes the body; closing it early cancels the run on the node.
func (h *Hub) Do(ctx context.Context, t weir.NodeTarget, c provider.Call) (*http.Response, error) {
	h.mu.Lock()
	var s *session
	if n := h.nodes[t.Node]; n != nil && n.sess != nil && n.sess.gen == t.Gen && !n.sess.draining {
		s = n.sess
	}
	h.mu.Unlock()
	if s == nil {
		return nil, &provider.Error{Err: fmt.Errorf("node %s (generation %d): %w", t.Node, t.Gen, weir.ErrNodeGone)}
	}
	r := &run{id: newRunID(), sess: s, target: t, attached: make(chan struct{}), over: make(chan struct{})}
	// A ready stream, if one waits, takes the run: the offer goes on it,
	// and the answer comes back on it.
	if !s.addRun(r) {
		return nil, &provider.Error{Err: fmt.Errorf("node %s: %w", t.Node, weir.ErrNodeGone)}
	}
	// The client going away and the wait for the head cut the run.
	stopCtx := context.AfterFunc(ctx, func() { r.cut(ctx.Err()) })
	headWait := clock.NewWatch(h.cfg.Clock, h.cfg.RunHeaderTimeout, func() {
		r.cut(&provider.Error{Timeout: true, Err: fmt.Errorf("node %s did not answer within %s", t.Node, h.cfg.RunHeaderTimeout)})
	})
	headWait.Arm()
	fail := func(err error) (*http.Response, error) {
		headWait.Stop()
		stopCtx()
		r.finish()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}

	offer := &edgepb.Offer{RunId: r.id, Provider: t.Provider, Path: c.Path, Stream: c.Stream, Long: t.Long,
		Traceparent: tracing.Traceparent(ctx)}
	inline := s.inline && len(c.Body) <= inlineBytes
	if inline {
		offer.BodyInline, offer.Body = true, c.Body
	}
	if r.ready != nil {
		if err := r.send(&edgepb.RunDown{Msg: &edgepb.RunDown_Offer{Offer: offer}}); err != nil {
			return fail(err)
		}
	} else {
		if inline {
			// A copy: the Offer may still wait in the send queue when Do
			// returns, and the caller reuses its body.
			offer.Body = bytes.Clone(c.Body)
		}
		if !s.queue(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Offer{Offer: offer}}) {
			return fail(&provider.Error{Err: fmt.Errorf("node %s: %w", t.Node, weir.ErrNodeGone)})
		}
		select {
		case <-r.attached:
		case <-r.over:
			return fail(r.failure(nil))
		case <-s.done:
			select {
			case <-r.attached:
				// It may have reached the runtime: a failed upstream.
				return fail(endedDuring(t))
			default:
				return fail(&provider.Error{Err: fmt.Errorf("node %s: %w", t.Node, weir.ErrNodeGone)})
			}
		}
	}
	if !inline {
		if err := r.sendBody(c.Body); err != nil {
			return fail(err)
		}
	}
	m, err := r.next(h)
	if err != nil {
		return fail(err)
	}
	headWait.Stop()
	switch m := m.Msg.(type) {
	case *edgepb.RunUp_Head:
		b := &runBody{h: h, r: r, stopCtx: stopCtx, buf: m.Head.Body}
		if m.Head.Complete {
			b.err = io.EOF
			b.finish()
		} else {
			b.idle = clock.NewWatch(h.cfg.Clock, h.cfg.RunIdleTimeout, func() {
				r.cut(&provider.Error{Timeout: true, Err: fmt.Errorf("the node sent nothing for %s", h.cfg.RunIdleTimeout)})
			})
		}
		resp := &http.Response{StatusCode: int(m.Head.Status), Header: make(http.Header), Body: b, ContentLength: -1}
		if m.Head.Complete {
			resp.ContentLength = int64(len(m.Head.Body))
		}
		for k, v := range m.Head.Headers {
			resp.Header.Set(k, v)
		}
		return provider.CheckStatus(resp)
	case *edgepb.RunUp_End:
		return fail(endError(t, m.End))
	}
	return fail(r.refuse("a chunk before the run's head"))
}

// endedDuring is the error of a run whose node's session ended while it
// ran: it may have reached the runtime, so it is a failed upstream.
func endedDuring(t weir.NodeTarget) error {
	return &provider.Error{Err: fmt.Errorf("node %s's session ended during the run", t.Node)}
}

// endError is the error of a run that ended without (the rest of) its
// answer.
func endError(t weir.NodeTarget, e *edgepb.RunEnd) error {
	switch e.Kind {
	case edgepb.RunEnd_STALLED:
		return &provider.Error{Timeout: true, Err: fmt.Errorf("node %s's provider %s: %w: %s", t.Node, t.Provider, weir.ErrNodeStalled, e.Message)}
	case edgepb.RunEnd_COMPLETE:
		return &provider.Error{Err: fmt.Errorf("node %s ended the run before its answer", t.Node)}
	}
	return &provider.Error{Err: fmt.Errorf("node %s's provider %s: %s", t.Node, t.Provider, e.Message)}
}

// runBody is a run's answer as the node sends it.
type runBody struct {
	h       *Hub
	r       *run
	stopCtx func() bool
	idle    *clock.Watch // nil once the answer is over
	buf     []byte
	err     error // the read error once the body is over
	done    bool
}

func (b *runBody) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.idle.Arm()
		m, err := b.r.next(b.h)
		b.idle.Disarm()
		switch {
		case err != nil:
			b.err = err
			b.finish()
		case m.GetChunk() != nil:
			b.buf = m.GetChunk().Data
		case m.GetEnd() != nil:
			if e := m.GetEnd(); e.Kind == edgepb.RunEnd_COMPLETE {
				b.err = io.EOF
			} else {
				b.err = endError(b.r.target, e)
			}
			b.finish()
		default:
			b.err = b.r.refuse("a run has one head")
			b.finish()
		}
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// finish ends the run on the gateway's side.
func (b *runBody) finish() {
	if b.done {
		return
	}
	b.done = true
	if b.idle != nil {
		b.idle.Stop()
	}
	b.stopCtx()
	b.r.finish()
}

func (b *runBody) Close() error {
	if b.err == nil {
		b.err = errors.New("read of a closed body")
	}
	b.finish()
	return nil
}

func newRunID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "run_" + hex.EncodeToString(b)
}

// addRun records r as a run of s and offers it the newest waiting ready
// stream, if there is one; false once s has ended.
func (s *session) addRun(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended() {
		return false
	}
	if s.runs == nil {
		s.runs = make(map[string]*run)
	}
	s.runs[r.id] = r
	s.takeReadyLocked(r)
	return true
}

// dropRun forgets r; a run the node never opened is cancelled on the
// Control stream, so that the node does not start it.
func (s *session) dropRun(r *run) {
	s.mu.Lock()
	_, ok := s.runs[r.id]
	delete(s.runs, r.id)
	s.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-r.attached:
	default:
		s.queue(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Cancel{Cancel: &edgepb.Cancel{RunId: r.id, Reason: "the gateway gave up on the run"}}})
	}
}

// attach gives r its stream, once: false if r is over or has one.
func (s *session) attach(r *run, stream edgepb.Edge_RunServer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs[r.id] != r {
		return false
	}
	select {
	case <-r.attached:
		return false
	default:
	}
	r.stream = stream
	close(r.attached)
	return true
}

// Run serves one Run stream: the node opens it for a run offered on its
// current session, or ahead for the next run offered on it (ready).
func (h *Hub) Run(stream edgepb.Edge_RunServer) error {
	ctx := stream.Context()
	id, err := h.authenticate(ctx, true)
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "a Run stream begins with RunOpen")
	}
	h.mu.Lock()
	var s *session
	if n := h.nodes[id.ID]; n != nil && n.sess != nil && n.sess.gen == open.Generation {
		s = n.sess
	}
	h.mu.Unlock()
	if s == nil {
		return status.Error(codes.FailedPrecondition, "the run's generation is not the node's current session")
	}
	if open.Ready {
		return h.ready(ctx, s, open, stream)
	}
	s.mu.Lock()
	r := s.runs[open.RunId]
	s.mu.Unlock()
	if r == nil || !s.attach(r, stream) {
		return status.Error(codes.NotFound, "no run of that id was offered to this session, or it is taken or over")
	}
	return h.hold(ctx, s, r)
}

// hold keeps r's stream open while the run's goroutine uses it, and ends
// it once the run is over, the session ends or the node ends the stream.
func (h *Hub) hold(ctx context.Context, s *session, r *run) error {
	select {
	case <-r.over:
		return r.streamStatus()
	case <-s.done:
		r.cut(endedDuring(r.target))
		return status.Error(codes.Unavailable, "the node's session ended")
	case <-ctx.Done():
		return nil
	}
}
