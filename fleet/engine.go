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
	// Unavailable is how long a call waits for a leader before it fails
	// with ErrUnavailable. Default: SessionTimeout.
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
	// OnLead, if set, is called when this replica starts leading a term,
	// with an engine for durable work (tasks) in that term, and with nil
	// when the term ends here. That engine's waiters and leases belong to
	// the term alone: they are never synced to another leader, which
	// recovers durable work from its store instead; when the term ends,
	// its queued waiters fail with admission.ErrClosed. Calls are made
	// one at a time, in order; OnLead must not block.
	OnLead func(term admission.Engine, epoch uint64)
}

func (c *Config) defaults() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 3 * time.Second
	}
	if c.Unavailable <= 0 {
		c.Unavailable = c.SessionTimeout
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
	leases  map[admission.LeaseID]*held
	waiters map[string]*waiting
	seq     uint64
	term    Term
	leading bool
	lead    *leader
	rt      *route // nil while no leader is synced with
	changed chan struct{}
	closed  bool
	stop    chan struct{}
	durable *Engine // the term's engine for durable work, while leading
}

// held is a lease a caller of this replica holds, under the id it was
// granted with.
type held struct {
	// remote is the id the leader of epoch knows it by.
	remote admission.LeaseID
	epoch  uint64
	req    *wireRequest
	cand   int
}

// waiting is a caller's queued waiter.
type waiting struct {
	req    *wireRequest
	seq    uint64
	notify func(admission.Lease, error)
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
		leases: make(map[admission.LeaseID]*held), waiters: make(map[string]*waiting),
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
	lead, rt, durable := e.lead, e.rt, e.durable
	e.lead, e.rt, e.durable = nil, nil, nil
	waiters := e.waiters
	e.waiters = make(map[string]*waiting)
	e.mu.Unlock()
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
// start; a leader admits nothing until they have synced with it (or
// the session timeout passed). A term older than the current one is
// ignored.
func (e *Engine) SetTerm(t Term, leading bool, live []string) {
	e.mu.Lock()
	if e.closed || t.Epoch < e.term.Epoch || (t.Epoch == e.term.Epoch && leading == e.leading) {
		e.mu.Unlock()
		return
	}
	oldLead, oldRoute, oldDurable := e.lead, e.rt, e.durable
	e.term, e.leading, e.lead, e.rt, e.durable = t, leading, nil, nil, nil
	e.signalLocked()
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
		}
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
	return c
}

// readLoop reads a session's replies and notifications until it ends.
func (e *Engine) readLoop(rt *route) {
	c := rt.c
	defer c.close()
	for {
		f, err := c.read()
		if err != nil {
			return
		}
		switch f.Op {
		case opReply:
			c.answer(f)
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

// lost closes rt if it is the engine's route.
func (e *Engine) lost(rt *route) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rt == rt {
		e.rt = nil
		e.signalLocked()
	}
}

// establish syncs the engine's state over rt and, if the term is still
// rt's, makes rt the route.
func (e *Engine) establish(rt *route) bool {
	e.mu.Lock()
	st := &syncState{Scopes: maps.Clone(e.scopes)}
	for name := range e.removed {
		st.Removed = append(st.Removed, name)
	}
	for local, h := range e.leases {
		st.Leases = append(st.Leases, heldLease{Local: local, Remote: h.remote, Epoch: h.epoch, Req: h.req, Cand: h.cand})
	}
	ws := make([]*waiting, 0, len(e.waiters))
	for _, w := range e.waiters {
		ws = append(ws, w)
	}
	e.mu.Unlock()
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
	e.mu.Lock()
	defer e.mu.Unlock()
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
	e.rt = rt
	e.signalLocked()
	return true
}

// onNotify hands a waiter's outcome to its caller.
func (e *Engine) onNotify(f *frame, epoch uint64) {
	err := f.Err.err()
	e.mu.Lock()
	w := e.waiters[f.Waiter]
	if w == nil || e.term.Epoch != epoch {
		e.mu.Unlock()
		if f.Lease != nil {
			// Nobody waits for it (cancelled here meanwhile): back it goes.
			lease := *f.Lease
			go e.releaseRemote(epoch, lease.ID, lease.Owner)
		}
		return
	}
	delete(e.waiters, f.Waiter)
	var out admission.Lease
	if f.Lease != nil {
		out = *f.Lease
		e.leases[out.ID] = &held{remote: out.ID, epoch: epoch, req: w.req, cand: out.Candidate}
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
	_, _ = rt.call(context.Background(), &frame{Op: opRelease, Epoch: epoch, LeaseID: id, Owner: owner})
}

// route waits for a route to the leader, for up to cfg.Unavailable.
func (e *Engine) route(ctx context.Context) (*route, error) {
	var timeout <-chan time.Time
	for {
		e.mu.Lock()
		rt, changed, closed := e.rt, e.changed, e.closed
		e.mu.Unlock()
		switch {
		case closed:
			return nil, admission.ErrClosed
		case rt != nil:
			return rt, nil
		}
		if timeout == nil {
			t := time.NewTimer(e.cfg.Unavailable)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			return nil, ErrUnavailable
		}
	}
}

// do runs a call on the leader, again on the next route if the session
// was lost on the way: for calls that may run twice.
func (e *Engine) do(ctx context.Context, f *frame) (*frame, error) {
	for {
		rt, err := e.route(ctx)
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

// SetScope configures a scope at the leader and records it here, for
// every later leader. Without a leader it is recorded only, and the
// next sync applies it.
func (e *Engine) SetScope(ctx context.Context, name string, cfg admission.ScopeConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	_, err := e.do(ctx, &frame{Op: opSetScope, Scope: name, Config: &cfg})
	if err == nil || errors.Is(err, ErrUnavailable) {
		e.mu.Lock()
		e.scopes[name] = cfg
		delete(e.removed, name)
		e.mu.Unlock()
		return nil
	}
	return err
}

// RemoveScope retires a scope at the leader and here, as SetScope.
func (e *Engine) RemoveScope(ctx context.Context, name string) error {
	_, err := e.do(ctx, &frame{Op: opRemoveScope, Scope: name})
	if err == nil || errors.Is(err, ErrUnavailable) {
		e.mu.Lock()
		delete(e.scopes, name)
		e.removed[name] = true
		e.mu.Unlock()
		return nil
	}
	return err
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

func (e *Engine) Position(ctx context.Context, waiterID string) (admission.Position, error) {
	r, err := e.do(ctx, &frame{Op: opPosition, Waiter: waiterID})
	if err != nil || r.Pos == nil {
		return admission.Position{}, err
	}
	return *r.Pos, nil
}

func (e *Engine) Fence(ctx context.Context, id string, gen uint64) error {
	_, err := e.do(ctx, &frame{Op: opFence, OwnerID: id, OwnerGen: gen})
	return err
}

func (e *Engine) Activate(ctx context.Context, id string, gen uint64) error {
	_, err := e.do(ctx, &frame{Op: opActivate, OwnerID: id, OwnerGen: gen})
	return err
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
	_ = e.cancel(context.WithoutCancel(ctx), req.ID)
	r := <-ch
	if r.err == nil {
		_ = e.Release(context.WithoutCancel(ctx), r.lease.ID, r.lease.Owner)
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
	_, ok := e.waiters[id]
	rt := e.rt
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", admission.ErrNotQueued, id)
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
	w := e.waiters[id]
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
	e.leases[l.ID] = &held{remote: l.ID, epoch: rt.epoch, req: toWire(req), cand: l.Candidate}
	return l
}

func (e *Engine) TryAcquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	return e.granting(ctx, req, &frame{Op: opTryAcquire, Req: toWire(req)})
}

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
		if err != nil {
			return nil, nil, err
		}
		e.mu.Lock()
		h := e.leases[local]
		e.mu.Unlock()
		if h == nil {
			return nil, nil, admission.ErrLeaseNotHeld
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
		return r, h, r.Err.err()
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

func (e *Engine) Reconcile(ctx context.Context, id admission.LeaseID, owner admission.Owner, tokens int64) error {
	_, _, err := e.leaseCall(ctx, id, &frame{Op: opReconcile, Owner: owner, Tokens: tokens})
	if errors.Is(err, errSessionClosed) {
		return ErrUnavailable
	}
	return err
}

// Serve answers sessions on ln while this replica leads; a session that
// reaches it at another time is refused. It returns when ln is closed.
func (e *Engine) Serve(ln net.Listener) error {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return err
		}
		go e.accept(nc)
	}
}

func (e *Engine) accept(nc net.Conn) {
	e.mu.Lock()
	lead := e.lead
	e.mu.Unlock()
	if lead != nil {
		lead.serve(nc)
		return
	}
	c := newConn(nc, e.cfg.SessionTimeout)
	if _, err := c.read(); err != nil {
		c.close()
		return
	}
	_ = c.send(&frame{Op: opWelcome, Err: encodeErr(fmt.Errorf("%w: replica %s does not lead", errWrongTerm, e.cfg.Replica))})
	c.finish()
}
