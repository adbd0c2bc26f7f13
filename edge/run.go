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
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

// chunkBytes is the most one Chunk of a request body carries.
const chunkBytes = 32 << 10

// inlineBytes is the largest request body sent in its Offer, to a node
// that takes it there: the node starts the runtime call without waiting
// for the body on the Run stream, one leg fewer before the answer. A
// larger body goes on the Run stream, where a slow node's flow control
// holds it up without holding up the session's other messages.
const inlineBytes = 16 << 10

// run is one call offered to a node: the executor's side and the Run
// stream's meet here. Events from the node come on events, one at a
// time, so that a client that reads slowly slows the node's stream
// (gRPC's flow control) instead of filling the gateway's memory.
type run struct {
	id     string
	sess   *session
	target weir.NodeTarget
	body   []byte
	inline bool // body went in the Offer

	opened chan struct{} // closed when the node's Run stream took the run
	events chan *edgepb.RunUp
	abort  chan struct{} // closed when the gateway gives up on the run
	once   sync.Once
}

// stop gives up on the run: the node is told to cancel it.
func (r *run) stop() { r.once.Do(func() { close(r.abort) }) }

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
	r := &run{id: newRunID(), sess: s, target: t, body: c.Body, opened: make(chan struct{}),
		events: make(chan *edgepb.RunUp), abort: make(chan struct{})}
	if !s.addRun(r) {
		return nil, &provider.Error{Err: fmt.Errorf("node %s: %w", t.Node, weir.ErrNodeGone)}
	}
	offer := &edgepb.Offer{RunId: r.id, Provider: t.Provider, Path: c.Path, Stream: c.Stream, Long: t.Long}
	if s.inline && len(c.Body) <= inlineBytes {
		// A copy: the Offer may still wait in the send queue when Do
		// returns, and the caller reuses its body.
		offer.BodyInline, offer.Body, r.inline = true, bytes.Clone(c.Body), true
	}
	if !s.queue(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Offer{Offer: offer}}) {
		s.dropRun(r)
		return nil, &provider.Error{Err: fmt.Errorf("node %s: %w", t.Node, weir.ErrNodeGone)}
	}
	fail := func(err error) (*http.Response, error) {
		r.stop()
		s.dropRun(r)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	headWait := h.timer(h.cfg.RunHeaderTimeout)
	defer headWait.stop()
	for {
		select {
		case ev := <-r.events:
			switch m := ev.Msg.(type) {
			case *edgepb.RunUp_Head:
				resp := &http.Response{StatusCode: int(m.Head.Status), Header: make(http.Header),
					Body: &runBody{h: h, r: r, ctx: ctx}, ContentLength: -1}
				for k, v := range m.Head.Headers {
					resp.Header.Set(k, v)
				}
				return provider.CheckStatus(resp)
			case *edgepb.RunUp_End:
				return fail(endError(t, m.End))
			}
		case <-headWait.c:
			return fail(&provider.Error{Timeout: true, Err: fmt.Errorf("node %s did not answer within %s", t.Node, h.cfg.RunHeaderTimeout)})
		case <-s.done:
			select {
			case <-r.opened:
				// It may have reached the runtime: a failed upstream.
				return fail(&provider.Error{Err: fmt.Errorf("node %s's session ended during the run", t.Node)})
			default:
				return fail(&provider.Error{Err: fmt.Errorf("node %s: %w", t.Node, weir.ErrNodeGone)})
			}
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}

// endError is the error of a run that ended without (the rest of) its
// answer.
func endError(t weir.NodeTarget, e *edgepb.RunEnd) error {
	switch e.Kind {
	case edgepb.RunEnd_STALLED:
		return &provider.Error{Timeout: true, Err: fmt.Errorf("node %s's provider %s stalled: %s", t.Node, t.Provider, e.Message)}
	case edgepb.RunEnd_COMPLETE:
		return &provider.Error{Err: fmt.Errorf("node %s ended the run before its answer", t.Node)}
	}
	return &provider.Error{Err: fmt.Errorf("node %s's provider %s: %s", t.Node, t.Provider, e.Message)}
}

// runBody is a run's answer as the node sends it.
type runBody struct {
	h    *Hub
	r    *run
	ctx  context.Context
	buf  []byte
	err  error // the read error once the body is over
	done bool
}

func (b *runBody) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		idle := b.h.timer(b.h.cfg.RunIdleTimeout)
		select {
		case ev := <-b.r.events:
			switch m := ev.Msg.(type) {
			case *edgepb.RunUp_Chunk:
				b.buf = m.Chunk.Data
			case *edgepb.RunUp_End:
				if m.End.Kind == edgepb.RunEnd_COMPLETE {
					b.err = io.EOF
				} else {
					b.err = endError(b.r.target, m.End)
				}
				b.finish()
			default:
				b.err = &provider.Error{Err: errors.New("the node sent a second head")}
				b.finish()
			}
		case <-idle.c:
			b.err = &provider.Error{Timeout: true, Err: fmt.Errorf("the node sent nothing for %s", b.h.cfg.RunIdleTimeout)}
			b.finish()
		case <-b.r.sess.done:
			b.err = &provider.Error{Err: weir.ErrNodeGone}
			b.finish()
		case <-b.ctx.Done():
			b.err = b.ctx.Err()
			b.finish()
		}
		idle.stop()
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
	b.r.stop()
	b.r.sess.dropRun(b.r)
}

func (b *runBody) Close() error {
	if b.err == nil {
		b.err = errors.New("read of a closed body")
	}
	b.finish()
	return nil
}

// timer is a one-shot on the Hub's clock; d ≤ 0 never fires.
type hubTimer struct {
	c    chan struct{}
	stop func()
}

func (h *Hub) timer(d time.Duration) hubTimer {
	c := make(chan struct{})
	if d <= 0 {
		return hubTimer{c: c, stop: func() {}}
	}
	t := h.cfg.Clock.AfterFunc(d, func() { close(c) })
	return hubTimer{c: c, stop: func() { t.Stop() }}
}

func newRunID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "run_" + hex.EncodeToString(b)
}

// addRun records r as a run of s; false once s has ended.
func (s *session) addRun(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return false
	default:
	}
	if s.runs == nil {
		s.runs = make(map[string]*run)
	}
	s.runs[r.id] = r
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
	case <-r.opened:
	default:
		s.queue(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Cancel{Cancel: &edgepb.Cancel{RunId: r.id, Reason: "the gateway gave up on the run"}}})
	}
}

// takeRun hands the run id of s to the Run stream that opens it, once.
func (s *session) takeRun(id string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[id]
	if r == nil {
		return nil
	}
	select {
	case <-r.opened:
		return nil // opened already
	default:
	}
	close(r.opened)
	return r
}

// Run serves one Run stream: the node opens it for a run offered on its
// current session, gets the request body, and sends the answer.
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
	r := s.takeRun(open.RunId)
	if r == nil {
		return status.Error(codes.NotFound, "no run of that id was offered to this session, or it is taken or over")
	}
	// Whatever ends the stream before the node's RunEnd ends the run for
	// the executor too, with why.
	broken := func(code codes.Code, why string) error {
		end := &edgepb.RunUp{Msg: &edgepb.RunUp_End{End: &edgepb.RunEnd{Kind: edgepb.RunEnd_ERROR, Message: why}}}
		select {
		case r.events <- end:
		case <-r.abort:
		case <-s.done:
		case <-ctx.Done():
		}
		return status.Error(code, why)
	}
	var sendMu sync.Mutex
	send := func(m *edgepb.RunDown) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	// The gateway giving up, or the session ending, cancels the run.
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-r.abort:
			_ = send(&edgepb.RunDown{Msg: &edgepb.RunDown_Cancel{Cancel: &edgepb.Cancel{RunId: r.id, Reason: "the gateway gave up on the run"}}})
		case <-s.done:
		case <-stopped:
		}
	}()
	if !r.inline {
		for rest := r.body; len(rest) > 0; {
			n := min(len(rest), chunkBytes)
			if err := send(&edgepb.RunDown{Msg: &edgepb.RunDown_Chunk{Chunk: &edgepb.Chunk{Data: bytes.Clone(rest[:n])}}}); err != nil {
				return broken(codes.Unavailable, "the node's Run stream broke: "+err.Error())
			}
			rest = rest[n:]
		}
		if err := send(&edgepb.RunDown{Msg: &edgepb.RunDown_BodyEnd{BodyEnd: &edgepb.BodyEnd{}}}); err != nil {
			return broken(codes.Unavailable, "the node's Run stream broke: "+err.Error())
		}
	}
	headSent := false
	for {
		m, err := stream.Recv()
		if err != nil {
			return broken(codes.Unavailable, "the node's Run stream broke: "+err.Error())
		}
		switch m.Msg.(type) {
		case *edgepb.RunUp_Head:
			if headSent {
				return broken(codes.InvalidArgument, "a run has one head")
			}
			headSent = true
		case *edgepb.RunUp_Chunk:
			if !headSent {
				return broken(codes.InvalidArgument, "a chunk before the run's head")
			}
		case *edgepb.RunUp_End:
			if e := m.GetEnd(); e.Kind == edgepb.RunEnd_STALLED && e.Evidence != nil {
				h.evidence(s, e.Evidence, sourceStall, r.target.Provider)
			}
		default:
			return broken(codes.InvalidArgument, "a Run stream message of no known kind")
		}
		select {
		case r.events <- m:
		case <-r.abort:
			return nil
		case <-s.done:
			return status.Error(codes.Unavailable, "the node's session ended")
		case <-ctx.Done():
			return nil
		}
		if m.GetEnd() != nil {
			return nil
		}
	}
}
