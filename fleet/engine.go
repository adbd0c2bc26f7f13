package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// ErrUnavailable is the answer while no leader can be reached: admissions
// fail closed rather than decide without the fleet.
var ErrUnavailable = fmt.Errorf("%w: no fleet leader answers", admission.ErrUnavailable)

// Config configures one replica's engine.
type Config struct {
	// Replica is the replica's stable id; Gen its generation, newer each
	// time it starts (the coordinator's Register).
	Replica string
	Gen     uint64
	// Secret is shared by the fleet's replicas; a session that does not
	// present it is refused.
	Secret string
	// SessionTimeout is how long a silent session lives, how long a
	// leader keeps the state of a replica whose session is gone, and how
	// long a new leader waits for the replicas to sync. Default 3s.
	SessionTimeout time.Duration
	// HelloTimeout is how long a connection to the fleet listener may
	// take to authenticate (handshake.go). Default: SessionTimeout, at
	// most 5s.
	HelloTimeout time.Duration
	// Unavailable is how long a call waits for a leader before it fails
	// with ErrUnavailable, and how long the engine is without a leader
	// before it runs open (the scopes that fail open admit this replica's
	// share of their limits). Default: SessionTimeout.
	Unavailable time.Duration
	// Valid reports whether epoch is still this replica's term, on a
	// clock that runs while the process is paused (the elector's
	// Leading). Default: always.
	Valid func(epoch uint64) bool
	// Options are the leader's engine's: its clock and observer.
	Options admission.Options
	Logger  *slog.Logger
	// Dial opens a session's connection. Default: TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// LazyRelease: Reconcile and Release of a lease held without an
	// owner, on a replica that follows, return without waiting for the
	// leader: the tokens go with the release, one frame sent in order on
	// the session, answered by nobody. A later call of this replica may
	// reach the leader before that release: it then waits or queues as
	// if the capacity were still held (never over a limit), and an error
	// of the release (none is the caller's to handle: an ownerless lease
	// has no stale owner) goes unseen. The gateway's requests use it;
	// the conformance suite, which asks that a release be seen by the
	// next call of any replica, runs without it.
	LazyRelease bool
	// OnLead, if set, is called when this replica starts leading a term,
	// with an engine for durable work (tasks) in that term, and with nil
	// when the term ends here. That engine's waiters and leases belong to
	// the term alone: they are never synced to another leader, which
	// recovers durable work from its store instead; when the term ends,
	// its queued waiters fail with admission.ErrClosed. Calls are made
	// one at a time, in order; OnLead must not block.
	OnLead func(term admission.Engine, epoch uint64)
	// ReleaseSilent says when the leader gives back the leases of a
	// replica that went silent (silent.go). Default ReleaseAtBound.
	ReleaseSilent ReleasePolicy
	// Dead reports whether the process of replica at generation gen is
	// proven dead: its calls ended with it, and what it held may go
	// back at once. It must never say so of a process that may still
	// run (the Member asks the kernel and PostgreSQL: member.go).
	// Default nil: none is ever proven dead, and a replica that goes
	// away is silent.
	Dead func(ctx context.Context, replica string, gen uint64) bool
	// Dropped, if set, counts an error that only the log sees (a step the
	// fleet takes on its own, such as a release no caller waits for): op
	// names the step, as weir_dropped_errors_total's label. Default none.
	Dropped func(op string)
	// OnLeaderLost, if set, is called when this replica's session with
	// the leader of t was closed from the leader's side, or its
	// listener refused a session: the leader's process may have died.
	// It must not block.
	OnLeaderLost func(t Term)

	// sessionCalls bounds the calls of one session the leader runs at
	// once (leader.answer); tests set it lower. Default maxSessionCalls.
	sessionCalls int
	// protocol is the versions of the session protocol this replica
	// speaks (protocol.go); tests set others. Default: the build's.
	protocol protoRange
}

func (c *Config) defaults() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 3 * time.Second
	}
	if c.Unavailable <= 0 {
		c.Unavailable = c.SessionTimeout
	}
	if c.HelloTimeout <= 0 {
		c.HelloTimeout = min(c.SessionTimeout, maxHelloWait)
	}
	if c.Valid == nil {
		c.Valid = func(uint64) bool { return true }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if c.sessionCalls <= 0 {
		c.sessionCalls = maxSessionCalls
	}
	if c.protocol.Max <= 0 {
		c.protocol = buildProtocol
	}
}

// Engine is one replica's admission engine: an admission.Engine whose
// decisions are the fleet leader's. It keeps what its callers hold —
// scopes configured, leases, queued waiters — so that it can assert all
// of it to each new leader. A lease keeps the id it was granted with for
// as long as it is held, though a later leader knows it by another.
type Engine struct {
	cfg Config

	mu      sync.Mutex
	scopes  map[string]admission.ScopeConfig
	removed *removals         // the scopes removed, for the next leader (removed.go)
	fenced  map[string]uint64 // owner → newest generation fenced here
	active  map[string]uint64 // owner → newest generation activated here
	leases  map[admission.LeaseID]*held
	waiters map[string]*waiting
	seq     uint64
	// config counts changes to scopes, removed, fenced and active, so
	// that a sync can tell whether one came while it was under way.
	config  uint64
	term    Term
	leading bool
	lead    *leader
	rt      *route // nil while no leader is synced with
	changed chan struct{}
	closed  bool
	stop    chan struct{}
	durable *Engine // the term's engine for durable work, while leading
	// run is the engine's goroutines (follow, readLoop, leadTerm, the
	// sessions its listener accepted, timers' callbacks), which Close
	// joins; ctx ends with Close, and with it the waits of those
	// goroutines' calls. owned are the listeners and connections Close
	// closes so that a goroutine blocked on one returns.
	run       group
	ctx       context.Context
	cancelCtx context.CancelFunc
	owned     map[io.Closer]bool
	// replicas is the fleet's size as last known (SetTerm, SetReplicas),
	// which divides the limits while running open; 0: not known, and the
	// engine never runs open.
	replicas int
	// open is the engine's own while it runs open (open.go); openTimer
	// starts running open once the engine has been without a route for
	// cfg.Unavailable. openLeases numbers the leases granted open;
	// openAdmitted counts them.
	open         *open
	syncing      int // syncs under way: none runs open meanwhile
	openTimer    clock.Timer
	openLeases   uint64
	openAdmitted uint64

	// mirror is the last mirror a leader sent (mirror.go), which the
	// next sync takes along.
	mirror map[mirrorKey]mirrored
	// spent is the latest spend a leader told of each budget scope
	// (spend.go), which the next sync gives where it is more than the
	// scope's configuration says.
	spent map[string]wireSpend

	// onAffinity receives the affinity entries the other replicas share
	// (OnAffinity).
	onAffinity atomic.Pointer[func([]AffinityEntry)]
	// specs is what resolves other replicas' waiters' Specs while this
	// replica leads (OnResolve).
	specs specResolver

	// protoRefused says why this replica cannot speak its term's
	// leader's protocol, "" while it can; protoRefusals counts the
	// sessions refused so (protocol.go).
	protoRefused  string
	protoRefusals uint64

	// afterSync, when a test sets it, runs in establish once the leader
	// has answered the sync and before the route opens.
	afterSync func()
}

// clock is the engine's clock: the leader's engine's (Options.Clock),
// default clock.Real. Decisions and their timeouts run on it; the
// network's own pacing (a session's pings and read and write deadlines,
// the backoff between dials, the bound on a mirror's write) runs on real
// time, as net.Conn deadlines do.
func (e *Engine) clock() clock.Clock {
	if e.cfg.Options.Clock != nil {
		return e.cfg.Options.Clock
	}
	return clock.Real
}

// now reads the engine's clock.
func (e *Engine) now() time.Time { return e.clock().Now() }

// boundOf is the bound of a lease this replica got now for work that
// ends within hold (Request.Hold), with the same margin the leader
// takes; zero: none.
func (e *Engine) boundOf(hold time.Duration) time.Time {
	if hold <= 0 {
		return time.Time{}
	}
	return e.now().Add(hold + e.cfg.SessionTimeout)
}

// held is a lease a caller of this replica holds, under the id it was
// granted with.
type held struct {
	// remote is the id the leader of epoch knows it by.
	remote admission.LeaseID
	epoch  uint64
	req    *wireRequest
	cand   int
	// open is the open engine that counts the lease, by openID, while
	// the engine runs open.
	open   *open
	openID admission.LeaseID
	// used, with settle, is a Reconcile not yet sent
	// (Config.LazyRelease): it goes with the release.
	used   admission.Settlement
	settle bool
	// bound is when the work under the lease is surely over, on this
	// replica's clock (Request.Hold); zero: no bound.
	bound time.Time
}

// waiting is a caller's queued waiter.
type waiting struct {
	req    *wireRequest
	seq    uint64
	notify func(admission.Lease, error)
	// open is the open engine the waiter is queued in while the engine
	// runs open; it takes outcomes only from there until the next sync.
	open *open
}

// route is the way to one term's leader, once synced with it.
type route struct {
	epoch uint64
	call  func(ctx context.Context, f *frame) (*frame, error)
	c     *conn // nil when this replica leads
	// lead is the leader when this replica leads.
	lead *leader
	// proto is the session's protocol version.
	proto int
}

// New returns a replica's engine. It decides nothing until SetTerm names
// a leader.
func New(cfg Config) *Engine {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Engine{cfg: cfg, scopes: make(map[string]admission.ScopeConfig), removed: newRemovals(),
		fenced: make(map[string]uint64), active: make(map[string]uint64),
		leases: make(map[admission.LeaseID]*held), waiters: make(map[string]*waiting),
		mirror:  make(map[mirrorKey]mirrored),
		spent:   make(map[string]wireSpend),
		changed: make(chan struct{}), stop: make(chan struct{}),
		ctx: ctx, cancelCtx: cancel, owned: make(map[io.Closer]bool)}
}

var _ admission.Engine = (*Engine)(nil)

// Close ends the engine: the sessions close, a leader here steps down,
// and the listeners given to Serve close last, once it grants nothing
// more. Queued waiters fail with admission.ErrClosed. Close returns once
// every goroutine the engine started has returned.
func (e *Engine) Close() {
	e.shut()
	e.run.wait()
}

// shut is Close without the wait for the engine's goroutines: a term's
// engine for durable work is shut before its leader closes and joined
// after (its calls may wait on that leader's sessions, which the leader
// closes).
func (e *Engine) shut() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	close(e.stop)
	lead, rt, durable, o := e.lead, e.rt, e.durable, e.open
	e.lead, e.rt, e.durable, e.open = nil, nil, nil, nil
	if e.openTimer != nil {
		e.openTimer.Stop()
	}
	waiters := e.waiters
	e.waiters = make(map[string]*waiting)
	owned := e.owned
	e.owned = nil
	e.signalLocked() // calls waiting for a route see the engine closed
	e.mu.Unlock()
	e.run.close()
	e.cancelCtx()
	if o != nil {
		o.mem.Close()
	}
	if rt != nil && rt.c != nil {
		rt.c.close()
	}
	if durable != nil {
		e.cfg.OnLead(nil, 0)
		durable.shut()
	}
	if lead != nil {
		lead.close()
	}
	if durable != nil {
		durable.run.wait()
	}
	for _, w := range waiters {
		w.notify(admission.Lease{}, admission.ErrClosed)
	}
	// The connections being dialled or handshaken, then the listeners:
	// a listener that refuses says this replica grants nothing more.
	for c := range owned {
		if _, ok := c.(net.Listener); !ok {
			_ = c.Close()
		}
	}
	for c := range owned {
		if _, ok := c.(net.Listener); ok {
			_ = c.Close()
		}
	}
}

// own records c for Close to close; false, and c is not recorded, once
// the engine is closed.
func (e *Engine) own(c io.Closer) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.owned[c] = true
	return true
}

// disown forgets c, which its user closes.
func (e *Engine) disown(c io.Closer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.owned, c)
}

// afterFunc runs f after d on the engine's clock as one of its
// goroutines: not once the engine is closed, and Close waits for a run
// under way.
func (e *Engine) afterFunc(d time.Duration, f func()) clock.Timer {
	return e.clock().AfterFunc(d, func() {
		if !e.run.enter() {
			return
		}
		defer e.run.leave()
		f()
	})
}

// Serve answers sessions on ln while this replica leads; a session that
// reaches it at another time is refused. A connection must authenticate
// first (handshake.go); beyond the bound of connections that have not,
// more are closed as they come. It returns when ln is closed; Close
// closes it (as http.Server's does), and Serve on a closed engine closes
// ln and returns admission.ErrClosed.
func (e *Engine) Serve(ln net.Listener) error {
	if !e.own(ln) {
		_ = ln.Close()
		return admission.ErrClosed
	}
	defer e.disown(ln)
	var p unauthenticated
	for {
		nc, err := ln.Accept()
		if err != nil {
			return err
		}
		host := remoteHost(nc)
		if ok, first := p.enter(host); !ok {
			if first {
				e.cfg.Logger.Warn("fleet listener: too many connections that have not authenticated; refusing more until they do or time out",
					"remote", nc.RemoteAddr().String(), "max", maxPending, "max_per_host", maxPendingPerHost)
			}
			_ = nc.Close()
			continue
		}
		if !e.run.spawn(func() { e.accept(nc, func() { p.leave(host) }) }) {
			_ = nc.Close()
			p.leave(host)
		}
	}
}

// accept serves a connection the listener accepted; handshaken is
// called once its hello is checked, or it is closed.
func (e *Engine) accept(nc net.Conn, handshaken func()) {
	if !e.own(nc) {
		_ = nc.Close()
		handshaken()
		return
	}
	defer e.disown(nc)
	c, hello, ok := e.handshake(nc)
	handshaken()
	if !ok {
		return
	}
	e.mu.Lock()
	lead := e.lead
	e.mu.Unlock()
	if lead != nil {
		lead.serve(c, hello)
		return
	}
	_ = c.send(&frame{Op: opWelcome, Err: encodeErr(fmt.Errorf("%w: replica %s does not lead", errWrongTerm, e.cfg.Replica))})
	c.finish()
	<-c.done // written, or the write deadline passed
	c.stop()
}
