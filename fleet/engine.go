package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
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
	removed map[string]bool
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
	// tokens, with settle, is a Reconcile not yet sent
	// (Config.LazyRelease): it goes with the release.
	tokens int64
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
}

// New returns a replica's engine. It decides nothing until SetTerm names
// a leader.
func New(cfg Config) *Engine {
	cfg.defaults()
	return &Engine{cfg: cfg, scopes: make(map[string]admission.ScopeConfig), removed: make(map[string]bool),
		fenced: make(map[string]uint64), active: make(map[string]uint64),
		leases: make(map[admission.LeaseID]*held), waiters: make(map[string]*waiting),
		mirror:  make(map[mirrorKey]mirrored),
		changed: make(chan struct{}), stop: make(chan struct{})}
}

var _ admission.Engine = (*Engine)(nil)

// Close ends the engine: the sessions close, and a leader here steps down.
// Queued waiters fail with admission.ErrClosed.
func (e *Engine) Close() {
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
	e.mu.Unlock()
	if o != nil {
		o.mem.Close()
	}
	if rt != nil && rt.c != nil {
		rt.c.close()
	}
	if durable != nil {
		e.cfg.OnLead(nil, 0)
		durable.Close()
	}
	if lead != nil {
		lead.close()
	}
	for _, w := range waiters {
		w.notify(admission.Lease{}, admission.ErrClosed)
	}
}

// SetTerm tells the engine who decides now: this replica (leading) or
// the replica at t.Addr. live lists the replicas alive at the term's
// start, the leader among them; a leader admits nothing until they have
// synced with it, or the session timeout passed. A nil live says they
// are not known: the leader waits the session timeout. A non-nil live
// also gives the fleet's size (as SetReplicas). A term older than the
// current one is ignored.
func (e *Engine) SetTerm(t Term, leading bool, live []string) {
	e.mu.Lock()
	if live != nil {
		e.replicas = max(len(live), 1)
	}
	if e.closed || t.Epoch < e.term.Epoch || (t.Epoch == e.term.Epoch && leading == e.leading) {
		e.mu.Unlock()
		return
	}
	oldLead, oldRoute, oldDurable := e.lead, e.rt, e.durable
	e.term, e.leading, e.lead, e.rt, e.durable = t, leading, nil, nil, nil
	e.signalLocked()
	e.armOpenLocked()
	var lead *leader
	if leading {
		epoch := t.Epoch
		lead = newLeader(epoch, &e.cfg, func() bool { return e.cfg.Valid(epoch) }, live)
		e.lead = lead
		if e.cfg.OnLead != nil {
			e.durable = e.termEngine(lead)
		}
	}
	durable := e.durable
	e.mu.Unlock()
	if oldRoute != nil && oldRoute.c != nil {
		oldRoute.c.close()
	}
	if oldDurable != nil {
		e.cfg.OnLead(nil, 0)
		oldDurable.Close()
	}
	if oldLead != nil {
		oldLead.close()
	}
	if leading {
		go e.leadTerm(lead)
		if durable != nil {
			e.cfg.OnLead(durable, t.Epoch)
		}
	} else if t.Addr != "" {
		go e.follow(t)
	}
}

// termEngine returns an engine for durable work in lead's term: a peer
// of lead in process, with nothing to sync.
func (e *Engine) termEngine(lead *leader) *Engine {
	cfg := e.cfg
	cfg.Replica += "/durable"
	cfg.OnLead = nil
	d := New(cfg)
	d.term, d.leading = Term{Epoch: lead.epoch}, true
	p, err := lead.attach(cfg.Replica, cfg.Gen, nil, func(f *frame) error {
		d.onNotify(f, lead.epoch)
		return nil
	})
	if err != nil {
		d.Close()
		return d
	}
	d.rt = &route{epoch: lead.epoch, call: func(ctx context.Context, f *frame) (*frame, error) {
		return lead.handle(ctx, p, f), nil
	}}
	return d
}

func (e *Engine) signalLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// Ready waits until the engine has synced with a leader.
func (e *Engine) Ready(ctx context.Context) error {
	for {
		e.mu.Lock()
		rt, changed, closed := e.rt, e.changed, e.closed
		e.mu.Unlock()
		switch {
		case closed:
			return admission.ErrClosed
		case rt != nil:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// current reports whether epoch is still the term the engine is in.
func (e *Engine) current(epoch uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.closed && e.term.Epoch == epoch
}

// leadTerm syncs this replica with its own leader and opens the route.
func (e *Engine) leadTerm(lead *leader) {
	p, err := lead.attach(e.cfg.Replica, e.cfg.Gen, nil, func(f *frame) error {
		e.onNotify(f, lead.epoch)
		return nil
	})
	if err != nil {
		return
	}
	rt := &route{epoch: lead.epoch, call: func(ctx context.Context, f *frame) (*frame, error) {
		return lead.handle(ctx, p, f), nil
	}}
	e.establish(rt)
}

// follow keeps a session with t's leader for as long as t is the term,
// reconnecting (with jittered backoff) when it is lost.
func (e *Engine) follow(t Term) {
	backoff := 20 * time.Millisecond
	for e.current(t.Epoch) {
		if c := e.dialLeader(t); c != nil {
			rt := &route{epoch: t.Epoch, c: c, call: func(_ context.Context, f *frame) (*frame, error) { return c.call(f) }}
			go e.readLoop(rt)
			if e.establish(rt) {
				backoff = 20 * time.Millisecond
			}
			<-c.done
			e.lost(rt)
			if c.closedByPeer() && e.cfg.OnLeaderLost != nil && e.current(t.Epoch) {
				e.cfg.OnLeaderLost(t)
			}
		}
		// Real time: it paces dials, as the network's own timeouts do.
		wait := backoff/2 + rand.N(backoff)
		backoff = min(backoff*2, time.Second)
		select {
		case <-time.After(wait):
		case <-e.stop:
			return
		}
	}
}

// dialLeader opens a session with t's leader, or returns nil.
func (e *Engine) dialLeader(t Term) *conn {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.SessionTimeout)
	defer cancel()
	nc, err := e.cfg.Dial(ctx, t.Addr)
	if err != nil {
		e.cfg.Logger.Debug("fleet: leader not reachable", "addr", t.Addr, "epoch", t.Epoch, "error", err)
		if refused(err) && e.cfg.OnLeaderLost != nil {
			e.cfg.OnLeaderLost(t)
		}
		return nil
	}
	c := newConn(nc, e.cfg.SessionTimeout)
	if c.send(&frame{Op: opHello, Epoch: t.Epoch, Replica: e.cfg.Replica, Gen: e.cfg.Gen, Secret: e.cfg.Secret}) != nil {
		c.close()
		return nil
	}
	w, err := c.read()
	if err != nil || w.Op != opWelcome || w.Err != nil {
		if w != nil && w.Err != nil {
			e.cfg.Logger.Warn("fleet: the leader refused the session", "addr", t.Addr, "epoch", t.Epoch, "error", w.Err.err())
		}
		c.close()
		return nil
	}
	c.r.authenticated()
	return c
}

// readLoop reads a session's replies and notifications until it ends.
func (e *Engine) readLoop(rt *route) {
	c := rt.c
	defer c.close()
	for {
		f, err := c.read()
		if err != nil {
			c.fail(err)
			return
		}
		switch f.Op {
		case opReply:
			c.answer(f)
		case opMirror:
			if f.Epoch == rt.epoch {
				e.onMirror(f, rt.epoch)
			}
		case opNotify:
			if f.Epoch != rt.epoch {
				continue // another term's outcome: refused
			}
			e.onNotify(f, rt.epoch)
			if c.send(&frame{ID: f.ID, Op: opAck}) != nil {
				return
			}
		}
	}
}

// lost closes rt and, if it is the engine's route, ends it.
func (e *Engine) lost(rt *route) {
	e.mu.Lock()
	if e.rt == rt {
		e.rt = nil
		e.signalLocked()
		e.armOpenLocked()
	}
	e.mu.Unlock()
	if rt.c != nil {
		rt.c.close()
	}
}

// SetReplicas gives the fleet's size: the replicas alive, this one
// among them. While the engine runs open, each scope that fails open
// admits its limits divided by it; a size given while running open
// applies the next time.
func (e *Engine) SetReplicas(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.replicas = max(n, 1)
}

// armOpenLocked makes the engine run open once it has been without a
// route for cfg.Unavailable, unless a route opens first.
func (e *Engine) armOpenLocked() {
	if e.openTimer != nil || e.closed || e.open != nil {
		return
	}
	e.openTimer = e.clock().AfterFunc(e.cfg.Unavailable, func() {
		e.mu.Lock()
		e.openTimer = nil
		moved := e.failOpenLocked()
		o := e.open
		e.mu.Unlock()
		if o != nil {
			e.queueOpen(o, moved)
		}
	})
}

// establish syncs the engine's state over rt and, if the term is still
// rt's, makes rt the route.
func (e *Engine) establish(rt *route) bool {
	e.mu.Lock()
	retired := e.retireOpenLocked()
	// Running open while the sync is under way would grant leases the
	// sync does not take to the leader.
	e.syncing++
	defer func() {
		e.mu.Lock()
		e.syncing--
		var moved []*waiting
		if retired != nil {
			// A sync that failed leaves the engine without a leader
			// again: it runs open again at once.
			moved = e.failOpenLocked()
		}
		o := e.open
		e.mu.Unlock()
		if o != nil && o != retired {
			e.queueOpen(o, moved)
		}
	}()
	st := &syncState{}
	config := e.configLocked(st)
	now := e.now()
	for local, h := range e.leases {
		hl := heldLease{Local: local, Remote: h.remote, Epoch: h.epoch, Req: h.req, Cand: h.cand}
		if !h.bound.IsZero() {
			hl.Bound = max(h.bound.Sub(now), time.Nanosecond)
		}
		st.Leases = append(st.Leases, hl)
	}
	st.Mirror = e.mirrorLocked()
	ws := make([]*waiting, 0, len(e.waiters))
	for _, w := range e.waiters {
		ws = append(ws, w)
	}
	e.mu.Unlock()
	if retired != nil {
		retired.mem.Close()
	}
	slices.SortFunc(ws, func(a, b *waiting) int { return cmp.Compare(a.seq, b.seq) })
	for _, w := range ws {
		st.Waiters = append(st.Waiters, w.req)
	}
	reply, err := rt.call(context.Background(), &frame{Op: opSync, Epoch: rt.epoch, State: st})
	if err == nil && reply.Err != nil {
		err = reply.Err.err()
	}
	if err != nil {
		e.cfg.Logger.Warn("fleet: sync with the leader failed", "epoch", rt.epoch, "error", err)
		if rt.c != nil {
			rt.c.close()
		}
		return false
	}
	if e.afterSync != nil {
		e.afterSync()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A change of configuration made while the sync was under way found
	// no route and was only recorded: give the leader the configuration
	// as it is now before the route opens.
	for e.config != config && !e.closed && e.term.Epoch == rt.epoch {
		again := &syncState{}
		config = e.configLocked(again)
		e.mu.Unlock()
		err := e.reconfigure(rt, again)
		e.mu.Lock()
		if err != nil {
			e.cfg.Logger.Warn("fleet: configuring the leader failed", "epoch", rt.epoch, "error", err)
			if rt.c != nil {
				rt.c.close()
			}
			return false
		}
	}
	if e.closed || e.term.Epoch != rt.epoch {
		return false
	}
	for _, h := range st.Leases {
		cur := e.leases[h.Local]
		if cur == nil || cur.remote != h.Remote || cur.epoch != h.Epoch {
			continue // released or re-granted meanwhile
		}
		if id, ok := reply.Synced[key(h.Local)]; ok {
			cur.remote, cur.epoch = id, rt.epoch
		} else {
			delete(e.leases, h.Local) // the leader no longer holds it
		}
	}
	if rt.c == nil {
		// This replica leads: the mirror it took along is now its own
		// leader's to keep.
		clear(e.mirror)
	}
	e.rt = rt
	if e.openTimer != nil {
		e.openTimer.Stop()
		e.openTimer = nil
	}
	e.signalLocked()
	return true
}

// configLocked copies the configuration this replica has recorded into
// st and returns its change count.
func (e *Engine) configLocked(st *syncState) uint64 {
	st.Scopes, st.Fenced, st.Active = maps.Clone(e.scopes), maps.Clone(e.fenced), maps.Clone(e.active)
	for name := range e.removed {
		st.Removed = append(st.Removed, name)
	}
	return e.config
}

// reconfigure gives rt's leader the configuration in st, one call each:
// every call is one the leader applies again without harm.
func (e *Engine) reconfigure(rt *route, st *syncState) error {
	var fs []*frame
	for name, cfg := range st.Scopes {
		fs = append(fs, &frame{Op: opSetScope, Scope: name, Config: &cfg})
	}
	for _, name := range st.Removed {
		fs = append(fs, &frame{Op: opRemoveScope, Scope: name})
	}
	for id, gen := range st.Fenced {
		fs = append(fs, &frame{Op: opFence, OwnerID: id, OwnerGen: gen})
	}
	for id, gen := range st.Active {
		fs = append(fs, &frame{Op: opActivate, OwnerID: id, OwnerGen: gen})
	}
	for _, f := range fs {
		f.Epoch = rt.epoch
		r, err := rt.call(context.Background(), f)
		if err == nil {
			err = r.Err.err()
		}
		if f.Op == opRemoveScope && errors.Is(err, admission.ErrUnknownScope) {
			err = nil // removed already, as a sync removes it
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.Op, err)
		}
	}
	return nil
}

// onNotify hands a waiter's outcome to its caller.
func (e *Engine) onNotify(f *frame, epoch uint64) {
	err := f.Err.err()
	e.mu.Lock()
	w := e.waiters[f.Waiter]
	if w == nil || w.open != nil || e.term.Epoch != epoch {
		e.mu.Unlock()
		if f.Lease != nil {
			// Nobody waits for it (cancelled here meanwhile, or waiting
			// in the open engine): back it goes.
			lease := *f.Lease
			go e.releaseRemote(epoch, lease.ID, lease.Owner)
		}
		return
	}
	delete(e.waiters, f.Waiter)
	var out admission.Lease
	if f.Lease != nil {
		out = *f.Lease
		e.leases[out.ID] = &held{remote: out.ID, epoch: epoch, req: w.req, cand: out.Candidate, bound: e.boundOf(w.req.Hold)}
	}
	e.mu.Unlock()
	w.notify(out, err)
}

// releaseRemote gives a lease no caller holds back to epoch's leader.
func (e *Engine) releaseRemote(epoch uint64, id admission.LeaseID, owner admission.Owner) {
	e.mu.Lock()
	rt := e.rt
	e.mu.Unlock()
	if rt == nil || rt.epoch != epoch {
		return // the next sync leaves it out: that leader releases it
	}
	_, err := rt.call(context.Background(), &frame{Op: opRelease, Epoch: epoch, LeaseID: id, Owner: owner})
	dropped(&e.cfg, e.cfg.Logger, "release", err)
}

// route waits for a route to the leader, for up to cfg.Unavailable;
// errOpen says that the engine runs open (at once if it already does),
// and its caller asks the open engine.
func (e *Engine) route(ctx context.Context) (*route, error) {
	var timeout <-chan struct{}
	for {
		e.mu.Lock()
		rt, changed, closed, o := e.rt, e.changed, e.closed, e.open
		e.mu.Unlock()
		switch {
		case closed:
			return nil, admission.ErrClosed
		case rt != nil:
			return rt, nil
		case o != nil:
			return nil, errOpen
		}
		if timeout == nil {
			var t clock.Timer
			timeout, t = clock.After(e.clock(), e.cfg.Unavailable)
			defer t.Stop()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			e.mu.Lock()
			moved := e.failOpenLocked()
			o := e.open
			e.mu.Unlock()
			if o == nil {
				return nil, ErrUnavailable
			}
			e.queueOpen(o, moved)
			return nil, errOpen
		}
	}
}

// do runs a call on the leader, again on the next route if the session
// was lost on the way: for calls that may run twice.
func (e *Engine) do(ctx context.Context, f *frame) (*frame, error) {
	for {
		rt, err := e.route(ctx)
		if errors.Is(err, errOpen) {
			return nil, ErrUnavailable // the fleet's state is the leader's alone
		}
		if err != nil {
			return nil, err
		}
		f.Epoch = rt.epoch
		r, err := rt.call(ctx, f)
		if err == nil {
			if werr := r.Err.err(); werr != nil && !errors.Is(werr, errWrongTerm) {
				return r, werr
			} else if werr == nil {
				return r, nil
			}
		}
		e.lost(rt)
	}
}

// configure makes a change of configuration at the leader and records
// it here (record runs under e.mu), for every later leader. It never
// waits for a leader: without a route the change is recorded only, and
// the next sync applies it, so a replica configures its scopes before
// it has found its fleet. An error the leader answers changes nothing
// here.
func (e *Engine) configure(ctx context.Context, f *frame, record func()) error {
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return admission.ErrClosed
		}
		rt := e.rt
		if rt == nil {
			record()
			e.config++
			e.mu.Unlock()
			return nil
		}
		e.mu.Unlock()
		f.Epoch = rt.epoch
		r, err := rt.call(ctx, f)
		if err == nil {
			werr := r.Err.err()
			if werr == nil {
				e.mu.Lock()
				record()
				e.config++
				e.mu.Unlock()
				return nil
			}
			if !errors.Is(werr, errWrongTerm) {
				return werr
			}
		}
		e.lost(rt)
	}
}

// SetScope configures a scope at the leader and records it here, as
// configure says.
func (e *Engine) SetScope(ctx context.Context, name string, cfg admission.ScopeConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := e.configure(ctx, &frame{Op: opSetScope, Scope: name, Config: &cfg}, func() {
		e.scopes[name] = cfg
		delete(e.removed, name)
	}); err != nil {
		return err
	}
	e.openScope(ctx, name, &cfg)
	return nil
}

// RemoveScope retires a scope at the leader and here, as SetScope.
func (e *Engine) RemoveScope(ctx context.Context, name string) error {
	if err := e.configure(ctx, &frame{Op: opRemoveScope, Scope: name}, func() {
		delete(e.scopes, name)
		e.removed[name] = true
	}); err != nil {
		return err
	}
	e.openScope(ctx, name, nil)
	return nil
}

func (e *Engine) Scope(ctx context.Context, name string) (admission.ScopeStats, error) {
	r, err := e.do(ctx, &frame{Op: opScope, Scope: name})
	if err != nil || r.Stats == nil {
		return admission.ScopeStats{}, err
	}
	return *r.Stats, nil
}

func (e *Engine) Scopes(ctx context.Context) []admission.ScopeStats {
	r, err := e.do(ctx, &frame{Op: opScopes})
	if err != nil {
		return nil
	}
	return r.All
}

// Position asks the leader, or the open engine for a waiter queued
// there.
func (e *Engine) Position(ctx context.Context, waiterID string) (admission.Position, error) {
	e.mu.Lock()
	var o *open
	if w := e.waiters[waiterID]; w != nil {
		o = w.open
	}
	e.mu.Unlock()
	if o != nil {
		if pos, err := o.mem.Position(ctx, waiterID); !errors.Is(err, admission.ErrClosed) {
			return pos, err
		}
	}
	r, err := e.do(ctx, &frame{Op: opPosition, Waiter: waiterID})
	if err != nil || r.Pos == nil {
		return admission.Position{}, err
	}
	return *r.Pos, nil
}

// Fence fences an owner at the leader and records it here, for every
// later leader (as SetScope).
func (e *Engine) Fence(ctx context.Context, id string, gen uint64) error {
	return e.configure(ctx, &frame{Op: opFence, OwnerID: id, OwnerGen: gen}, func() { recordOwner(e.fenced, id, gen) })
}

// Activate activates an owner's generation at the leader and records
// it here, as Fence.
func (e *Engine) Activate(ctx context.Context, id string, gen uint64) error {
	return e.configure(ctx, &frame{Op: opActivate, OwnerID: id, OwnerGen: gen}, func() { recordOwner(e.active, id, gen) })
}

func recordOwner(m map[string]uint64, id string, gen uint64) {
	if g, ok := m[id]; !ok || gen > g {
		m[id] = gen
	}
}

// Enqueue records the waiter here, then queues it at the leader. A
// session lost on the way leaves it recorded: the next sync queues it.
func (e *Engine) Enqueue(ctx context.Context, req admission.Request, notify func(admission.Lease, error)) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if notify == nil {
		return fmt.Errorf("%w: enqueue of %s without notify", admission.ErrInvalid, req.ID)
	}
	for {
		rt, err := e.route(ctx)
		if errors.Is(err, errOpen) {
			if err = e.enqueueOpen(ctx, req, notify); errors.Is(err, errRetry) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		wr := toWire(req)
		e.mu.Lock()
		if e.rt != rt {
			e.mu.Unlock()
			continue
		}
		if _, dup := e.waiters[req.ID]; dup {
			e.mu.Unlock()
			return fmt.Errorf("%w: %s", admission.ErrDuplicate, req.ID)
		}
		e.seq++
		w := &waiting{req: wr, seq: e.seq, notify: notify}
		e.waiters[req.ID] = w
		e.mu.Unlock()
		r, err := rt.call(ctx, &frame{Op: opEnqueue, Epoch: rt.epoch, Req: wr})
		if err != nil {
			e.lost(rt)
			return nil // recorded: the next sync queues it
		}
		if werr := r.Err.err(); werr != nil {
			e.mu.Lock()
			if e.waiters[req.ID] == w {
				delete(e.waiters, req.ID)
			}
			e.mu.Unlock()
			if errors.Is(werr, errWrongTerm) {
				e.lost(rt) // not queued there: ask the next leader
				continue
			}
			return werr
		}
		return nil
	}
}

// Acquire queues the waiter and waits for its outcome; when ctx ends
// first, the waiter is cancelled, and a lease granted meanwhile goes
// back.
func (e *Engine) Acquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	if err := ctx.Err(); err != nil {
		return admission.Lease{}, err
	}
	type result struct {
		lease admission.Lease
		err   error
	}
	ch := make(chan result, 1)
	if err := e.Enqueue(ctx, req, func(l admission.Lease, err error) { ch <- result{l, err} }); err != nil {
		return admission.Lease{}, err
	}
	select {
	case r := <-ch:
		return r.lease, r.err
	case <-ctx.Done():
	}
	dropped(&e.cfg, e.cfg.Logger, "cancel", e.cancel(context.WithoutCancel(ctx), req.ID))
	r := <-ch
	if r.err == nil {
		dropped(&e.cfg, e.cfg.Logger, "release", e.Release(context.WithoutCancel(ctx), r.lease.ID, r.lease.Owner))
	}
	return admission.Lease{}, ctx.Err()
}

func (e *Engine) Cancel(ctx context.Context, waiterID string) error {
	return e.cancel(ctx, waiterID)
}

// cancel removes a waiter at the leader, or here alone when no leader
// answers: the next sync leaves it out.
func (e *Engine) cancel(ctx context.Context, id string) error {
	e.mu.Lock()
	w, ok := e.waiters[id]
	rt := e.rt
	var o *open
	if ok {
		o = w.open
	}
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", admission.ErrNotQueued, id)
	}
	if o != nil {
		// Queued in the open engine, whose notify hands the outcome on;
		// unless the waiter moved to a leader meanwhile.
		err := o.mem.Cancel(ctx, id)
		e.mu.Lock()
		moved := e.waiters[id] == w && w.open != o
		rt = e.rt
		e.mu.Unlock()
		if !moved {
			return err
		}
	}
	if rt != nil {
		r, err := rt.call(ctx, &frame{Op: opCancel, Epoch: rt.epoch, Waiter: id})
		if err == nil {
			if werr := r.Err.err(); werr == nil || errors.Is(werr, admission.ErrNotQueued) {
				// Settled at the leader, and the outcome came with it
				// (a notify is acknowledged before the reply is sent).
				return werr
			}
		}
	}
	e.mu.Lock()
	w = e.waiters[id]
	delete(e.waiters, id)
	e.mu.Unlock()
	if w == nil {
		return fmt.Errorf("%w: %s", admission.ErrNotQueued, id)
	}
	w.notify(admission.Lease{}, admission.ErrCancelled)
	return nil
}

// grant records a lease the leader granted over rt.
func (e *Engine) grant(rt *route, req admission.Request, l admission.Lease) admission.Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leases[l.ID] = &held{remote: l.ID, epoch: rt.epoch, req: toWire(req), cand: l.Candidate, bound: e.boundOf(req.Hold)}
	return l
}

func (e *Engine) TryAcquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	return e.granting(ctx, req, &frame{Op: opTryAcquire, Req: toWire(req)})
}

// Restore re-creates a lease at the leader, or while the engine runs
// open, in the open engine if its candidate fails open.
func (e *Engine) Restore(ctx context.Context, req admission.Request, cand int) (admission.Lease, error) {
	return e.granting(ctx, req, &frame{Op: opRestore, Req: toWire(req), Cand: cand})
}

// granting runs a call whose reply is a lease, again on the next route
// if the session is lost on the way: a lease granted by a call whose
// reply was lost is recorded nowhere here, so the next sync leaves it
// out and the leader releases it.
func (e *Engine) granting(ctx context.Context, req admission.Request, f *frame) (admission.Lease, error) {
	if err := req.Validate(); err != nil {
		return admission.Lease{}, err
	}
	for {
		rt, err := e.route(ctx)
		if errors.Is(err, errOpen) {
			l, err := e.grantOpen(ctx, req, f.Op == opRestore, f.Cand)
			if errors.Is(err, errRetry) {
				continue
			}
			return l, err
		}
		if err != nil {
			return admission.Lease{}, err
		}
		f.Epoch = rt.epoch
		r, err := rt.call(ctx, f)
		if err != nil {
			e.lost(rt)
			continue
		}
		if werr := r.Err.err(); werr != nil {
			if errors.Is(werr, errWrongTerm) {
				e.lost(rt)
				continue
			}
			return admission.Lease{}, werr
		}
		if r.Lease == nil {
			return admission.Lease{}, errors.New("fleet: the leader granted no lease")
		}
		return e.grant(rt, req, *r.Lease), nil
	}
}

// leaseCall runs a call on the lease local id holds at the leader.
func (e *Engine) leaseCall(ctx context.Context, local admission.LeaseID, f *frame) (*frame, *held, error) {
	for {
		rt, err := e.route(ctx)
		if errors.Is(err, errOpen) {
			r, h, err := e.openLeaseCall(ctx, local, f)
			if errors.Is(err, errRetry) {
				continue
			}
			return r, h, err
		}
		if err != nil {
			return nil, nil, err
		}
		e.mu.Lock()
		h := e.leases[local]
		e.mu.Unlock()
		if h == nil {
			return e.endedLeaseCall(ctx, rt, f)
		}
		if h.epoch != rt.epoch {
			// Not yet synced with this leader; the sync maps it.
			e.lost(rt)
			continue
		}
		f.Epoch, f.LeaseID = rt.epoch, h.remote
		r, err := rt.call(ctx, f)
		if err != nil {
			e.lost(rt)
			if f.Op == opRelease {
				return nil, h, errSessionClosed
			}
			continue // renewing or reconciling twice does no harm
		}
		if werr := r.Err.err(); errors.Is(werr, errWrongTerm) {
			e.lost(rt)
			continue
		}
		return r, h, r.Err.err()
	}
}

// endedLeaseCall answers a call on a lease no longer held here. The
// leader still knows whether its owner was fenced, which the caller must
// hear (admission.ErrStaleOwner); otherwise the lease is not held.
func (e *Engine) endedLeaseCall(ctx context.Context, rt *route, f *frame) (*frame, *held, error) {
	if f.Owner.ID == "" {
		return nil, nil, admission.ErrLeaseNotHeld
	}
	for {
		f.Epoch, f.LeaseID = rt.epoch, 0
		r, err := rt.call(ctx, f)
		if err == nil {
			werr := r.Err.err()
			if errors.Is(werr, admission.ErrStaleOwner) {
				return r, nil, werr
			}
			if !errors.Is(werr, errWrongTerm) {
				return nil, nil, admission.ErrLeaseNotHeld
			}
		}
		e.lost(rt)
		if rt, err = e.route(ctx); errors.Is(err, errOpen) {
			return nil, nil, admission.ErrLeaseNotHeld
		} else if err != nil {
			return nil, nil, err
		}
	}
}

func (e *Engine) Renew(ctx context.Context, id admission.LeaseID, owner admission.Owner) (time.Time, error) {
	r, _, err := e.leaseCall(ctx, id, &frame{Op: opRenew, Owner: owner})
	if errors.Is(err, errSessionClosed) {
		return time.Time{}, ErrUnavailable
	}
	if errors.Is(err, admission.ErrLeaseNotHeld) {
		e.forget(id)
	}
	if err != nil {
		return time.Time{}, err
	}
	return r.Expires, nil
}

// Release gives a lease back. When the session is lost on the way, the
// lease is forgotten here all the same: the next sync leaves it out, and
// the leader releases it then.
func (e *Engine) Release(ctx context.Context, id admission.LeaseID, owner admission.Owner) error {
	if e.postRelease(id, owner) {
		return nil
	}
	e.mu.Lock()
	var settle *held
	if h := e.leases[id]; h != nil && h.settle {
		settle = h
	}
	e.mu.Unlock()
	if settle != nil {
		// A lazy Reconcile whose release cannot be posted: it goes first.
		_, _, _ = e.leaseCall(ctx, id, &frame{Op: opReconcile, Owner: owner, Tokens: settle.tokens})
	}
	_, _, err := e.leaseCall(ctx, id, &frame{Op: opRelease, Owner: owner})
	switch {
	case err == nil, errors.Is(err, errSessionClosed), errors.Is(err, admission.ErrLeaseNotHeld), errors.Is(err, ErrUnavailable):
		e.forget(id)
		return nil
	}
	return err
}

func (e *Engine) forget(id admission.LeaseID) {
	e.mu.Lock()
	delete(e.leases, id)
	e.mu.Unlock()
}

// lazyLocked is the held lease id and the route to send its lazy
// release on (Config.LazyRelease), if it has both: an ownerless lease of
// the route's epoch, on a session to another replica that leads.
func (e *Engine) lazyLocked(id admission.LeaseID, owner admission.Owner) (*held, *route) {
	if !e.cfg.LazyRelease || owner.ID != "" {
		return nil, nil
	}
	h, rt := e.leases[id], e.rt
	if h == nil || h.open != nil || rt == nil || rt.c == nil || h.epoch != rt.epoch {
		return nil, nil
	}
	return h, rt
}

// postRelease releases lease id lazily, if it may: it is forgotten here
// and its release (with its tokens) posted to the leader.
func (e *Engine) postRelease(id admission.LeaseID, owner admission.Owner) bool {
	e.mu.Lock()
	h, rt := e.lazyLocked(id, owner)
	if h == nil {
		e.mu.Unlock()
		return false
	}
	delete(e.leases, id)
	e.mu.Unlock()
	// A session lost before it is sent: the next sync leaves the lease
	// out, and the leader releases it then.
	_ = rt.c.post(&frame{Op: opRelease, Epoch: rt.epoch, LeaseID: h.remote, Owner: owner, Tokens: h.tokens, Settle: h.settle})
	return true
}

func (e *Engine) Reconcile(ctx context.Context, id admission.LeaseID, owner admission.Owner, tokens int64) error {
	e.mu.Lock()
	if h, _ := e.lazyLocked(id, owner); h != nil {
		h.tokens, h.settle = tokens, true
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	_, _, err := e.leaseCall(ctx, id, &frame{Op: opReconcile, Owner: owner, Tokens: tokens})
	if errors.Is(err, errSessionClosed) {
		return ErrUnavailable
	}
	return err
}

// Serve answers sessions on ln while this replica leads; a session that
// reaches it at another time is refused. A connection must authenticate
// first (handshake.go); beyond the bound of connections that have not,
// more are closed as they come. It returns when ln is closed.
func (e *Engine) Serve(ln net.Listener) error {
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
		go e.accept(nc, func() { p.leave(host) })
	}
}

// accept serves a connection the listener accepted; handshaken is
// called once its hello is checked, or it is closed.
func (e *Engine) accept(nc net.Conn, handshaken func()) {
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
}
