package edge

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
)

// The causes a session ends with, for logs.
var (
	errSuperseded = errors.New("the node opened a newer session")
	errHeartbeats = errors.New("the node missed its heartbeats")
	errStreamEnd  = errors.New("the node closed its session")
	errRevoked    = errors.New("the node's token was revoked")
)

// sendBuffer is how many messages may wait for a session's sender: an
// offer per request, so it must hold what a busy gateway queues while its
// sender goroutine waits to run (on a loaded machine, or through a GC
// pause), else a node that reads everything is taken for one that reads
// nothing and fenced with its runs. A node that truly stops reading
// fills its stream's flow-control window, then this, and is ended all
// the same.
const sendBuffer = 1024

// session is one Control stream of a node.
type session struct {
	h *Hub
	// node and gen are set by attach, under h.mu; serving once its
	// scopes are configured and active, so that no request resolves to
	// a scope not there yet.
	node    *node
	gen     uint64
	serving bool
	// draining: the node said it is shutting down (Drain); it is offered
	// nothing more and its slots are paused. Guarded by h.mu.
	draining bool
	// pauseMu orders the pauses and resumes of the session's slots.
	pauseMu sync.Mutex

	// inline: the node takes small request bodies in its Offers
	// (Register.inline_bodies). Set before the session serves.
	inline bool
	// instance is the node's process (Register.instance) and remote the
	// address it connects from. Set before attach.
	instance, remote string

	send chan *edgepb.GatewayMessage
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	err  error // why it ended
	seq  uint64
	dog  clock.Timer
	// rechecks is the timer of the token's next check.
	rechecks clock.Timer
	runs     map[string]*run // offered and not over, by id
	// ready are the node's Run streams opened ahead and waiting for a
	// run, newest last; readyAll counts them with those carrying a run,
	// up to readyMax (Welcome.ready_runs, set before the session serves).
	ready              []*readyStream
	readyAll, readyMax int
	// health and probes (outstanding probe id → provider) are guarded
	// by the Hub's mu.
	health map[string]*providerHealth
	probes map[string]string
}

// end ends the session with cause; the first cause is kept.
func (s *session) end(cause error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = cause
		if s.dog != nil {
			s.dog.Stop()
		}
		if s.rechecks != nil {
			s.rechecks.Stop()
		}
		s.mu.Unlock()
		close(s.done)
	})
}

// ended reports whether the session has ended.
func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// cause is why the session ended.
func (s *session) cause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// watch restarts the heartbeat watchdog.
func (s *session) watch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dog != nil {
		s.dog.Stop()
	}
	if s.ended() {
		return
	}
	s.dog = s.h.cfg.Clock.AfterFunc(s.h.cfg.HeartbeatTimeout, func() { s.end(errHeartbeats) })
}

// queue hands m to the session's sender; false if the session ended or
// its sender is that far behind (which ends it: a node that reads
// nothing is gone as far as the gateway can tell).
func (s *session) queue(m *edgepb.GatewayMessage) bool {
	if s.ended() {
		return false
	}
	select {
	case s.send <- m:
		return true
	default:
		s.end(errors.New("the node does not read its session"))
		return false
	}
}

// refuse tells the node why one of its messages changed nothing.
func (s *session) refuse(code, format string, args ...any) {
	s.queue(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Refusal{Refusal: &edgepb.Refusal{Code: code, Message: fmt.Sprintf(format, args...)}}})
}

// Control serves one node's session: authentication, Register, Welcome,
// then heartbeats and evidence until the stream ends, the node misses its
// heartbeats or a newer session supersedes it.
func (h *Hub) Control(stream edgepb.Edge_ControlServer) error {
	ctx := stream.Context()
	id, err := h.authenticate(ctx, false)
	if err != nil {
		return err
	}
	token, _ := bearerToken(ctx) // authenticate read it
	s := &session{h: h, send: make(chan *edgepb.GatewayMessage, sendBuffer), done: make(chan struct{})}
	in := make(chan *edgepb.NodeMessage)
	recvErr := make(chan error, 1)
	go s.recvLoop(stream, in, recvErr)
	reg, err := h.awaitRegister(ctx, stream, s, in, recvErr)
	if err != nil {
		return err
	}
	s.inline = reg.InlineBodies
	s.readyMax = readyRuns(reg)
	s.instance = reg.Instance
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		s.remote = p.Addr.String()
	}
	if err := h.attach(ctx, id, reg, s); err != nil {
		s.end(err)
		var inUse *tokenInUseError
		if errors.As(err, &inUse) {
			return h.refuseInUse(stream, id, s, inUse)
		}
		h.detach(s, err)
		h.deps.Logger.Error("edge: could not register a node", "node", id.ID, "error", err)
		return status.Error(codes.Unavailable, "the gateway could not register the node; retry")
	}
	defer func() { h.detach(s, s.cause()) }()
	h.deps.Logger.Info("edge: node registered", "node", id.ID, "name", id.Name, "generation", s.gen,
		"providers", len(reg.Providers), "version", reg.Version)
	welcome := &edgepb.Welcome{NodeId: id.ID, Generation: s.gen,
		HeartbeatIntervalMs: h.cfg.HeartbeatInterval.Milliseconds(), HeartbeatTimeoutMs: h.cfg.HeartbeatTimeout.Milliseconds(),
		ReadyRuns: int32(s.readyMax), WholeHeads: true}
	if err := stream.Send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Welcome{Welcome: welcome}}); err != nil {
		s.end(err)
		return err
	}
	s.watch()
	h.recheck(s, token)

	sendErr := make(chan error, 1)
	go s.sendLoop(stream, sendErr)
	return s.serve(ctx, in, recvErr, sendErr)
}

// recvLoop hands the node's messages to the session until the stream
// ends (its error goes to recvErr) or the session does.
func (s *session) recvLoop(stream edgepb.Edge_ControlServer, in chan<- *edgepb.NodeMessage, recvErr chan<- error) {
	for {
		m, err := stream.Recv()
		if err != nil {
			recvErr <- err
			return
		}
		select {
		case in <- m:
		case <-s.done:
			return
		}
	}
}

// awaitRegister takes the session's first message, which must register
// the node within RegisterTimeout.
func (h *Hub) awaitRegister(ctx context.Context, stream edgepb.Edge_ControlServer, s *session, in <-chan *edgepb.NodeMessage, recvErr <-chan error) (*edgepb.Register, error) {
	timeout := h.cfg.Clock.AfterFunc(h.cfg.RegisterTimeout, func() { s.end(errors.New("no Register in time")) })
	select {
	case m := <-in:
		timeout.Stop()
		reg := m.GetRegister()
		if reg == nil {
			return nil, refusal(stream, "register_first", "a session begins with Register")
		}
		if err := validateRegister(reg); err != nil {
			return nil, refusal(stream, "invalid_register", err.Error())
		}
		return reg, nil
	case err := <-recvErr:
		timeout.Stop()
		return nil, err
	case <-s.done:
		return nil, status.Error(codes.DeadlineExceeded, "no Register within the register timeout")
	case <-ctx.Done():
		timeout.Stop()
		return nil, ctx.Err()
	}
}

// sendLoop sends the session's messages to the node until sending fails
// (its error goes to sendErr, and ends the session) or the session ends.
func (s *session) sendLoop(stream edgepb.Edge_ControlServer, sendErr chan<- error) {
	for {
		select {
		case m := <-s.send:
			if err := stream.Send(m); err != nil {
				sendErr <- err
				s.end(err)
				return
			}
		case <-s.done:
			return
		}
	}
}

// serve handles a registered node's messages until its stream or the
// session ends, and answers the stream with why the session ended.
func (s *session) serve(ctx context.Context, in <-chan *edgepb.NodeMessage, recvErr, sendErr <-chan error) error {
	for {
		select {
		case m := <-in:
			s.handle(m)
		case err := <-recvErr:
			if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
				err = errStreamEnd
			}
			s.end(err)
			return nil
		case err := <-sendErr:
			return err
		case <-s.done:
			switch {
			case errors.Is(s.cause(), errSuperseded):
				return status.Error(codes.Aborted, "superseded by a newer session of the node")
			case errors.Is(s.cause(), errRevoked):
				return status.Error(codes.Unauthenticated, "the node's token was revoked")
			}
			return status.Error(codes.Unavailable, s.cause().Error())
		case <-ctx.Done():
			s.end(errStreamEnd)
			return nil
		}
	}
}

// codeTokenInUse is the Refusal of a registration while another process
// of the node has a live session.
const codeTokenInUse = "token_in_use"

// refuseInUse refuses s, a registration of a node whose live session is
// another process's: the node is told why, and when to try again; the
// gateway warns and counts it.
func (h *Hub) refuseInUse(stream edgepb.Edge_ControlServer, id Identity, s *session, inUse *tokenInUseError) error {
	h.deps.Logger.Warn("edge: a second process registered with a node's token while the node's session is live; refused (each weir node needs its own token)",
		"node", id.ID, "name", id.Name, "instance", s.instance, "remote", s.remote, "live_instance", inUse.live, "live_remote", inUse.from)
	if h.deps.Metrics != nil {
		h.deps.Metrics.TokenConflict()
	}
	msg := fmt.Sprintf("node %s (%s) has a live session from another weir node process (instance %s, from %s) with this token: "+
		"a token serves one process at a time; give this one its own token (weir nodes create), or stop the other", id.Name, id.ID, inUse.live, inUse.from)
	_ = stream.Send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Refusal{Refusal: &edgepb.Refusal{
		Code: codeTokenInUse, Message: msg, RetryAfterMs: inUse.retryAfter.Milliseconds()}}})
	return status.Error(codes.AlreadyExists, msg)
}

// refusal sends a Refusal and ends the stream with it.
func refusal(stream edgepb.Edge_ControlServer, code, msg string) error {
	_ = stream.Send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Refusal{Refusal: &edgepb.Refusal{Code: code, Message: msg}}})
	return status.Error(codes.InvalidArgument, msg)
}

// handle takes one message of a registered session.
func (s *session) handle(m *edgepb.NodeMessage) {
	switch msg := m.Msg.(type) {
	case *edgepb.NodeMessage_Heartbeat:
		hb := msg.Heartbeat
		if hb.Generation != s.gen {
			s.refuse("stale_generation", "heartbeat of generation %d on a session of generation %d", hb.Generation, s.gen)
			return
		}
		s.mu.Lock()
		last := s.seq
		fresh := hb.Seq > last
		if fresh {
			s.seq = hb.Seq
		}
		s.mu.Unlock()
		if !fresh {
			s.refuse("stale_sequence", "heartbeat %d after heartbeat %d", hb.Seq, last)
			return
		}
		s.watch()
		s.h.beat(s)
	case *edgepb.NodeMessage_Register:
		s.refuse("registered", "the session is registered already; a node registers again with a new session")
	case *edgepb.NodeMessage_Drain:
		if g := msg.Drain.Generation; g != s.gen {
			s.refuse("stale_generation", "drain of generation %d on a session of generation %d", g, s.gen)
			return
		}
		s.h.drain(s)
	case *edgepb.NodeMessage_Evidence:
		if d := s.h.evidence(s, msg.Evidence, sourceProbe, ""); d != decisionApplied {
			s.refuse(d, "evidence about provider %q refused: %s", msg.Evidence.Provider, d)
		}
	default:
		s.refuse("unknown_message", "a message of no known kind")
	}
}
