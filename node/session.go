package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// Why a session ended, for logs.
var (
	errNoWelcome = errors.New("no Welcome within the welcome timeout")
	errDrained   = errors.New("the node shut down")
)

// codeTokenInUse is the gateway's Refusal of a registration while
// another process with the node's token has a live session.
const codeTokenInUse = "token_in_use"

// refusedError is the gateway's Refusal of the registration.
type refusedError struct {
	code, message string
	// retryAfter is when the gateway says to try again; 0: it does not.
	retryAfter time.Duration
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("registration refused: %s: %s", e.code, e.message)
}

// session is one connection to the gateway and its Control stream.
type session struct {
	a      *Agent
	client edgepb.EdgeClient

	// gen, nodeID and interval are the Welcome's; gen is 0 until then.
	gen      uint64
	nodeID   string
	interval time.Duration
	seq      uint64 // the last heartbeat's
	// ctx is the session's, set with the Welcome: its runs' streams live
	// within it.
	ctx context.Context
	// wholeHeads: the gateway takes an answer's first bytes, and its end,
	// in its head (Welcome.whole_heads).
	wholeHeads bool

	sendMu sync.Mutex // one sender at a time on the Control stream
	stream edgepb.Edge_ControlClient

	mu       sync.Mutex
	runs     map[string]*run  // in flight, by run id
	busy     map[string]int32 // runs in flight, by provider
	longBusy map[string]int32 // of them, those holding a long-context slot
	evSeq    map[string]uint64
	draining bool
	// readyWant is how many Run streams the session keeps open ahead of
	// its runs for the gateway to offer on (Welcome.ready_runs, up to the
	// node's slots); readyOpen how many are open and waiting.
	readyWant, readyOpen int
	runsDone             chan struct{} // signalled when a run ends
	wg                   sync.WaitGroup
}

func newSession(a *Agent) *session {
	return &session{a: a, runs: map[string]*run{}, busy: map[string]int32{}, longBusy: map[string]int32{}, evSeq: map[string]uint64{},
		runsDone: make(chan struct{}, 1)}
}

// run serves the session until its stream ends or hard ends; after drain
// is closed it takes no more offers and ends once its runs have. Its runs
// are cancelled and waited for before it returns.
func (s *session) run(hard context.Context, drain <-chan struct{}) error {
	conn, err := s.a.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	s.client = edgepb.NewEdgeClient(conn)
	ctx, cancel := context.WithCancelCause(hard)
	defer s.wg.Wait() // after cancel: runs end with the session
	defer cancel(nil)

	stream, err := s.client.Control(ctx)
	if err != nil {
		return fmt.Errorf("open the control stream: %w", err)
	}
	s.stream = stream
	if err := s.send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Register{Register: s.a.register()}}); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	welcomeTimer := s.a.deps.Clock.AfterFunc(s.a.cfg.WelcomeTimeout, func() { cancel(errNoWelcome) })
	m, err := stream.Recv()
	welcomeTimer.Stop()
	if err != nil {
		if c := context.Cause(ctx); errors.Is(c, errNoWelcome) {
			err = c
		}
		return fmt.Errorf("wait for Welcome: %w", err)
	}
	w := m.GetWelcome()
	if w == nil {
		if r := m.GetRefusal(); r != nil {
			if r.Code != codeTokenInUse { // Run says it
				s.a.deps.Logger.Error("node: the gateway refused the registration", "code", r.Code, "message", r.Message)
			}
			return &refusedError{code: r.Code, message: r.Message, retryAfter: time.Duration(r.RetryAfterMs) * time.Millisecond}
		}
		return fmt.Errorf("the gateway answered Register with %T, not Welcome", m.Msg)
	}
	if w.Generation == 0 {
		return errors.New("the gateway's Welcome has no generation")
	}
	s.gen, s.nodeID = w.Generation, w.NodeId
	s.interval = time.Duration(w.HeartbeatIntervalMs) * time.Millisecond
	if s.interval <= 0 {
		s.interval = 2 * time.Second
	}
	s.wholeHeads = w.WholeHeads
	slots := 0
	for _, p := range s.a.cfg.Providers {
		slots += p.Slots
	}
	s.readyWant = min(int(w.ReadyRuns), slots)
	log := s.a.deps.Logger.With("node", s.nodeID, "generation", s.gen)
	s.ctx = ctx
	s.topUp()
	cause := s.serve(ctx, drain, log)
	cancel(cause)
	log.Warn("node: session ended", "cause", cause)
	return cause
}

// serve takes the gateway's messages and heartbeats until the stream
// ends, ctx ends, or the drain is over.
func (s *session) serve(ctx context.Context, drain <-chan struct{}, log *slog.Logger) error {
	in := make(chan *edgepb.GatewayMessage)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := s.stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	tick := make(chan struct{}, 1)
	var timer interface{ Stop() bool }
	beatLater := func() {
		timer = s.a.deps.Clock.AfterFunc(s.interval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
	}
	beatLater()
	defer func() { timer.Stop() }()
	// Logged once the first beat is scheduled: whoever reads it may move
	// the clock and the beat follows.
	log.Info("node: session started", "gateway", s.a.cfg.Gateway, "heartbeat", s.interval.String(),
		"providers", len(s.a.cfg.Providers))

	for {
		select {
		case <-tick:
			// The next beat is scheduled before this one is sent, so a
			// slow send does not push the cadence back.
			beatLater()
			if err := s.heartbeat(); err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
		case m := <-in:
			s.handle(ctx, m)
		case err := <-recvErr:
			return fmt.Errorf("control stream: %w", err)
		case <-ctx.Done():
			if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
				return c
			}
			return errDrained
		case <-drain:
			drain = nil
			s.mu.Lock()
			s.draining = true
			s.mu.Unlock()
			s.a.deps.Logger.Info("node: shutting down: taking no more offers", "runs", s.inFlight())
			// The gateway stops offering and sends the waiters elsewhere;
			// an offer already on its way is refused below.
			if err := s.send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Drain{Drain: &edgepb.Drain{Generation: s.gen}}}); err != nil {
				s.a.deps.Logger.Debug("node: could not tell the gateway it drains", "error", err)
			}
		case <-s.runsDone:
		}
		if drain == nil && s.inFlight() == 0 {
			return errDrained
		}
	}
}

// send sends one message on the Control stream.
func (s *session) send(m *edgepb.NodeMessage) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(m)
}

// heartbeat sends the next heartbeat, with each provider's busy slots.
func (s *session) heartbeat() error {
	s.seq++
	hb := &edgepb.Heartbeat{Generation: s.gen, Seq: s.seq}
	s.mu.Lock()
	for _, p := range s.a.cfg.Providers {
		hb.Slots = append(hb.Slots, &edgepb.SlotSnapshot{Provider: p.ID, Busy: s.busy[p.ID], LongBusy: s.longBusy[p.ID]})
	}
	s.mu.Unlock()
	return s.send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Heartbeat{Heartbeat: hb}})
}

// handle takes one message of the gateway.
func (s *session) handle(ctx context.Context, m *edgepb.GatewayMessage) {
	log := s.a.deps.Logger
	switch msg := m.Msg.(type) {
	case *edgepb.GatewayMessage_Offer:
		s.offer(ctx, msg.Offer)
	case *edgepb.GatewayMessage_Cancel:
		s.mu.Lock()
		r := s.runs[msg.Cancel.RunId]
		s.mu.Unlock()
		if r == nil {
			log.Debug("node: cancel of a run not in flight", "run", msg.Cancel.RunId)
			return
		}
		r.cancel(fmt.Errorf("%w: %s", errCancelled, msg.Cancel.Reason))
	case *edgepb.GatewayMessage_Probe:
		p := s.a.providers[msg.Probe.Provider]
		if p == nil {
			// Evidence must bind to one of the session's providers: there is
			// nothing true to answer about one the node does not have.
			log.Warn("node: probe of a provider the node does not have", "provider", msg.Probe.Provider, "probe", msg.Probe.ProbeId)
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ev := s.probe(ctx, p)
			ev.ProbeId = msg.Probe.ProbeId
			if err := s.send(&edgepb.NodeMessage{Msg: &edgepb.NodeMessage_Evidence{Evidence: ev}}); err != nil {
				log.Debug("node: could not answer a probe", "probe", ev.ProbeId, "error", err)
			}
		}()
	case *edgepb.GatewayMessage_Refusal:
		// The gateway refused one of the node's messages; if it ends the
		// session, the stream's end follows.
		log.Warn("node: the gateway refused a message", "code", msg.Refusal.Code, "message", msg.Refusal.Message,
			"generation", s.gen)
	case *edgepb.GatewayMessage_Welcome:
		log.Warn("node: a second Welcome on a session; ignored", "generation", msg.Welcome.Generation)
	default:
		log.Warn("node: a message of no known kind from the gateway", "type", fmt.Sprintf("%T", m.Msg))
	}
}

// offer starts the run the gateway offers on the Control stream on a Run
// stream of its own, or answers it with an error when it cannot start.
func (s *session) offer(ctx context.Context, o *edgepb.Offer) {
	streamCtx, cancel := context.WithCancel(ctx)
	r, refuse, ok := s.admit(streamCtx, o)
	if !ok {
		cancel()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		if refuse == "" {
			defer s.finished(r)
		}
		stream, err := r.open()
		if err != nil {
			s.a.deps.Logger.Warn("node: could not open a run", "run", o.RunId, "error", err)
			return
		}
		done := make(chan struct{})
		go r.read(stream, done)
		r.run(&upStream{stream: stream}, refuse)
		// Half-close and wait, up to closeWait, for the gateway to end the
		// stream, so that the answer's end is delivered rather than cut
		// off by a reset.
		_ = stream.CloseSend()
		t := s.a.deps.Clock.AfterFunc(closeWait, cancel)
		defer t.Stop()
		<-done
	}()
}

// admit takes offer o as a run of the session on a Run stream of
// streamCtx, or says why the node refuses it (refuse); ok false: o names
// no run, or one in flight, and is not a run of the session.
func (s *session) admit(streamCtx context.Context, o *edgepb.Offer) (r *run, refuse string, ok bool) {
	p := s.a.providers[o.Provider]
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case o.RunId == "":
		s.a.deps.Logger.Warn("node: an offer without a run id; ignored", "provider", o.Provider)
		return nil, "", false
	case s.runs[o.RunId] != nil:
		// Answering on a second Run stream would end the run in flight.
		s.a.deps.Logger.Warn("node: an offer of a run already in flight; ignored", "run", o.RunId)
		return nil, "", false
	case p == nil:
		refuse = fmt.Sprintf("the node has no provider %q", o.Provider)
	case s.draining:
		refuse = "the node is shutting down"
	}
	r = newRun(streamCtx, s, o, p)
	if refuse == "" {
		s.runs[o.RunId] = r
		s.busy[p.ID]++
		if o.Long {
			s.longBusy[p.ID]++
		}
	}
	return r, refuse, true
}

// topUp opens Run streams ahead until readyWant are open, unless the
// session drains or has ended.
func (s *session) topUp() {
	s.mu.Lock()
	n := 0
	if !s.draining && s.ctx.Err() == nil {
		n = max(s.readyWant-s.readyOpen, 0)
		s.readyOpen += n
	}
	s.mu.Unlock()
	for range n {
		s.wg.Add(1)
		go s.ready()
	}
}

// ready keeps one Run stream open ahead and serves the runs the gateway
// offers on it, one after another, until it ends: the gateway ends it
// when it cuts a run on it short, or the session ends. One that carried a
// run is replaced; one that failed before is not (the next run's end
// tops the streams up again), so that a gateway refusing them is not
// asked in a loop.
func (s *session) ready() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	carried := false
	defer func() {
		s.mu.Lock()
		s.readyOpen--
		s.mu.Unlock()
		if carried {
			s.topUp()
		}
	}()
	stream, err := s.client.Run(ctx)
	if err == nil {
		err = stream.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{Generation: s.gen, Ready: true}}})
	}
	if err != nil {
		s.a.deps.Logger.Debug("node: could not open a run stream ahead", "error", err)
		return
	}
	up := &upStream{stream: stream}
	var cur *run
	for {
		m, err := stream.Recv()
		if err != nil {
			if cur != nil {
				cur.streamEnded(err)
			}
			if ctx.Err() == nil {
				s.a.deps.Logger.Debug("node: a run stream opened ahead ended", "error", err)
			}
			return
		}
		o := m.GetOffer()
		if o == nil {
			if cur != nil {
				cur.down(m)
			}
			continue
		}
		carried = true
		r, refuse, ok := s.admit(ctx, o)
		if !ok {
			// Not a run of the session; its offer is answered on this
			// stream all the same, so that the gateway frees the slot.
			_ = up.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_End{End: &edgepb.RunEnd{Kind: edgepb.RunEnd_ERROR, Message: "the offer names no run, or one in flight"}}})
			cur = nil
			continue
		}
		cur = r
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if refuse == "" {
				defer s.finished(r)
			}
			r.run(up, refuse)
		}()
	}
}

// finished forgets a run that ended.
func (s *session) finished(r *run) {
	s.mu.Lock()
	delete(s.runs, r.offer.RunId)
	s.busy[r.p.ID]--
	if r.offer.Long {
		s.longBusy[r.p.ID]--
	}
	s.mu.Unlock()
	select {
	case s.runsDone <- struct{}{}:
	default:
	}
	s.topUp()
}

func (s *session) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

// nextEvidenceSeq is the seq of p's next evidence in this session.
func (s *session) nextEvidenceSeq(p *Provider) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evSeq[p.ID]++
	return s.evSeq[p.ID]
}
