package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// leader decides for the fleet during one term: it runs the memory
// engine, and every replica's engine — its own included — is a peer of
// it. It exists only on the replica that holds the term, and only for
// that term: a new term starts a new leader with an empty engine, which
// the replicas fill again by syncing (syncState).
type leader struct {
	epoch  uint64
	mem    *admission.Memory
	cfg    *Config
	clock  clock.Clock
	valid  func() bool // reports whether the term is still this replica's
	logger *slog.Logger
	// local hands the leader's own replica the affinity entries the
	// others share (affinity.go).
	local func([]AffinityEntry)
	// countRefusal counts, on the leader's replica, a session refused
	// for want of a common protocol version (protocol.go).
	countRefusal func()
	// specs resolves the Specs of other replicas' waiters: the resolver
	// the leader's own replica registered (Engine.OnResolve).
	specs *specResolver

	mu     sync.Mutex
	peers  map[string]*peer
	owners map[admission.LeaseID]*peer // who holds each lease granted
	// silent are the replicas dropped without proof that they died,
	// whose leases are still held (silent.go), by silentKey.
	silent map[string]*peer
	sweep  clock.Timer // releases the silent leases whose bound passed
	// probing is the goroutine that asks, now and then, whether the
	// silent replicas died; watching, the detached peers being watched.
	probing  bool
	watching map[*peer]bool
	// mirror are the peers whose sessions take the mirror of the leases
	// no other replica could re-assert (mirror.go).
	mirror map[*peer]bool
	// spends is each budget scope's spend as its last settlement left
	// it (spend.go).
	spends map[string]wireSpend
	// refusedGen is the generation of each replica last refused for
	// want of a common protocol version, which is logged once.
	refusedGen map[string]uint64
	// Lease ids: the engine's own ids are reused, and a new term's
	// engine starts them again, so the fleet's ids are the leader's: the
	// epoch in the top bits and a count below, never reused. Every id
	// that crosses the leader's edge — in calls, outcomes and events — is
	// the fleet's.
	fleetIDs map[admission.LeaseID]admission.LeaseID // engine id → fleet id
	memIDs   map[admission.LeaseID]admission.LeaseID // fleet id → engine id
	nextID   uint64
	// A new term's sync meets at three barriers, each passed once every
	// replica alive when the term began has reached it (or the session
	// timeout passed): all scopes are in (a lease or a fence may concern
	// a scope another replica configured), then all fences and
	// activations (they decide which leases and scopes still count),
	// then all leases restored. Nothing is admitted before the last.
	stages  [stages]*barrier
	isReady bool
	closed  bool
	// ready forces the last stage once the session timeout has passed.
	ready clock.Timer

	// run is the term's goroutines here: the sessions it serves, each
	// with its calls (serve), the probes of replicas that went away, and
	// its timers' callbacks; close joins them. ctx ends when the term
	// ends here, and with it every wait of the term's (its barriers,
	// probes, the pauses between them).
	run    group
	ctx    context.Context
	cancel context.CancelFunc
}

// peer is one replica as the leader sees it.
type peer struct {
	replica string
	gen     uint64
	// deliver hands a notify frame to the replica and returns once the
	// replica has handed the outcome on, or the session is lost.
	deliver func(f *frame) error
	session *conn // nil for the leader's own replica
	// proto is the protocol version of its session (protocol.go).
	proto   int
	leases  map[admission.LeaseID]*peerLease
	waiters map[string]bool
	// undelivered are outcomes the replica was not told of because its
	// session was lost; its next sync gets them.
	undelivered map[string]*frame
	gone        clock.Timer // the absence after which its state is dropped
	dropped     bool
	// silent: dropped without proof that it died; its leases are held
	// until their bounds, its word, or that proof (silent.go).
	silent bool
}

// peerLease is a lease a peer holds, as the leader keeps it.
type peerLease struct {
	owner admission.Owner
	// bound is when the work under the lease is over whatever becomes
	// of its holder, on the leader's clock (Request.Hold and a margin);
	// zero: no bound.
	bound time.Time
	// origin is the lease as its holder knows it: the epoch and id of the
	// last leader it synced it with, which its next sync names.
	origin origin
	// req is the request with the chosen candidate alone: what another
	// leader needs to hold the lease again.
	req *wireRequest
}

// origin names a lease as its holder knows it.
type origin struct {
	Epoch uint64            `json:"epoch"`
	ID    admission.LeaseID `json:"id"`
}

func newLeader(epoch uint64, cfg *Config, valid func() bool, expect []string) *leader {
	c := cfg.Options.Clock
	if c == nil {
		c = clock.Real
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &leader{epoch: epoch, cfg: cfg, clock: c, valid: valid, logger: cfg.Logger, ctx: ctx, cancel: cancel,
		peers: make(map[string]*peer), owners: make(map[admission.LeaseID]*peer),
		silent: make(map[string]*peer), watching: make(map[*peer]bool), mirror: make(map[*peer]bool),
		spends: make(map[string]wireSpend), refusedGen: make(map[string]uint64),
		fleetIDs: make(map[admission.LeaseID]admission.LeaseID), memIDs: make(map[admission.LeaseID]admission.LeaseID),
		nextID: epoch << 40}
	opts := cfg.Options
	outer := opts.Observer
	opts.Observer = admission.ObserverFunc(func(e admission.Event) {
		e = l.observe(e)
		if outer != nil {
			outer.Observe(e)
		}
	})
	outerSpend := opts.OnSpend
	opts.OnSpend = func(s admission.Spend) {
		l.onSpend(s)
		if outerSpend != nil {
			outerSpend(s)
		}
	}
	l.mem = admission.NewMemory(opts)
	for i := range l.stages {
		l.stages[i] = newBarrier(expect)
	}
	if !l.stages[restored].passed() {
		l.ready = l.afterFunc(cfg.SessionTimeout, l.forceReady)
	}
	return l
}

// afterFunc runs f after d on the leader's clock as one of the term's
// goroutines: not once the term has ended here, and close waits for a
// run under way.
func (l *leader) afterFunc(d time.Duration, f func()) clock.Timer {
	return l.clock.AfterFunc(d, func() {
		if !l.run.enter() {
			return
		}
		defer l.run.leave()
		f()
	})
}

// observe gives each lease its fleet id as the engine grants it, keeps
// the leader's record of who holds what in step with leases that end
// (released, or ended by the engine itself: expiry, fencing), and returns
// the event with the fleet's id. It runs under the engine's lock, so it
// only takes l.mu, which is never held while calling the engine.
func (l *leader) observe(e admission.Event) admission.Event {
	if e.Lease == 0 {
		return e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Outcome == admission.OutcomeAdmitted {
		l.nextID++
		id := admission.LeaseID(l.nextID)
		l.fleetIDs[e.Lease], l.memIDs[id] = id, e.Lease
		e.Lease = id
		return e
	}
	id, ok := l.fleetIDs[e.Lease]
	if !ok {
		return e
	}
	e.Lease = id
	switch e.Outcome {
	case admission.OutcomeExpired, admission.OutcomeFenced, admission.OutcomeReleased:
		delete(l.fleetIDs, l.memIDs[id])
		delete(l.memIDs, id)
		if p := l.owners[id]; p != nil {
			if pl := p.leases[id]; pl != nil && l.mirroredLocked(p) {
				l.postUnmirrorLocked(keyOf(p, pl), l.spentLocked(e.Needs))
			}
			delete(p.leases, id)
			delete(l.owners, id)
		}
	}
	return e
}

// settled keeps what the work under lease id used in the leader's record
// of it, so that the next leader holds a mirror of it settled: a mirrored
// lease whose cost changed is mirrored again (its tokens alone go with
// the next change).
func (l *leader) settled(id admission.LeaseID, used admission.Settlement) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.owners[id]
	if p == nil || p.leases[id] == nil {
		return
	}
	pl := p.leases[id]
	was := pl.req
	pl.req = pl.req.settled(0, used)
	if l.mirroredLocked(p) && len(was.Candidates) > 0 && was.Candidates[0].Cost != used.Cost {
		l.postMirrorLocked([]mirrorLease{l.mirrorOfLocked(p, pl)}, nil)
	}
}

// fleetLease returns the engine's lease with its fleet id.
func (l *leader) fleetLease(lease admission.Lease) admission.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	lease.ID = l.fleetIDs[lease.ID]
	return lease
}

// memID returns the engine's id of the fleet's lease id, or 0 (no lease)
// when the lease has ended.
func (l *leader) memID(id admission.LeaseID) admission.LeaseID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.memIDs[id]
}

// release gives a lease, by its fleet id, back to the engine.
func (l *leader) release(ctx context.Context, id admission.LeaseID, owner admission.Owner) error {
	return l.mem.Release(ctx, l.memID(id), owner)
}

// close ends the term here: every session is closed and the engine
// discarded. Outcomes are not delivered any more: the replicas take their
// waiters and leases to the next leader. It returns once the term's
// goroutines have.
func (l *leader) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.run.wait()
		return
	}
	l.closed = true
	peers := make([]*peer, 0, len(l.peers))
	for _, p := range l.peers {
		peers = append(peers, p)
	}
	for _, t := range []clock.Timer{l.sweep, l.ready} {
		if t != nil {
			t.Stop()
		}
	}
	l.mu.Unlock()
	l.run.close()
	l.cancel()
	for _, p := range peers {
		if p.session != nil {
			p.session.close()
		}
		if p.gone != nil {
			p.gone.Stop()
		}
	}
	l.mem.Close()
	l.run.wait()
}

// attach makes a replica a peer, or gives a known one its new session.
// A newer generation of a known replica replaces it: the older one is
// dropped first (as one gone: silent.go). A replica this term holds
// silent leases of comes back to them: its sync says which it still
// holds.
func (l *leader) attach(replica string, gen uint64, session *conn, deliver func(*frame) error) (*peer, error) {
	proto := l.cfg.protocol.Max // in process: this build's
	if session != nil {
		proto = session.proto
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrUnavailable
	}
	old := l.peers[replica]
	switch {
	case old != nil && old.gen > gen:
		l.mu.Unlock()
		return nil, fmt.Errorf("%w: replica %s generation %d is superseded by %d", admission.ErrStaleOwner, replica, gen, old.gen)
	case old != nil && old.gen == gen:
		if old.gone != nil {
			old.gone.Stop()
			old.gone = nil
		}
		delete(l.watching, old)
		prev := old.session
		old.session, old.deliver, old.proto = session, deliver, proto
		l.mu.Unlock()
		if prev != nil && prev != session {
			prev.close()
		}
		return old, nil
	}
	p := l.silent[silentKey(replica, gen)]
	if p != nil {
		// Its leases are its own to name again: no longer mirrored.
		delete(l.silent, silentKey(replica, gen))
		var keys []mirrorKey
		for _, pl := range p.leases {
			keys = append(keys, keyOf(p, pl))
		}
		l.postMirrorLocked(nil, keys)
		p.silent, p.dropped = false, false
		p.session, p.deliver, p.proto = session, deliver, proto
		p.undelivered = make(map[string]*frame)
	} else {
		p = &peer{replica: replica, gen: gen, session: session, deliver: deliver, proto: proto,
			leases: make(map[admission.LeaseID]*peerLease), waiters: make(map[string]bool),
			undelivered: make(map[string]*frame)}
	}
	l.peers[replica] = p
	l.mu.Unlock()
	if old != nil {
		l.drop(old, false)
	}
	return p, nil
}

// detach notes that p's session ended; p's state stays for the session
// timeout, for the replica to come back to, unless its process is proven
// dead meanwhile (silent.go).
func (l *leader) detach(p *peer, session *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.session != session || l.closed || p.dropped {
		return
	}
	p.session = nil
	p.deliver = func(*frame) error { return errSessionClosed }
	delete(l.mirror, p)
	p.gone = l.afterFunc(l.cfg.SessionTimeout, func() { l.drop(p, false) })
	l.watchLocked(p)
}

// notifier is the engine's notify for a waiter of p: it records the
// outcome and delivers it to p.
func (l *leader) notifier(p *peer, req *wireRequest) func(admission.Lease, error) {
	id := req.ID
	return func(lease admission.Lease, err error) {
		granted := err == nil
		if granted {
			lease = l.fleetLease(lease)
		}
		if granted && !l.valid() {
			// The term has passed (this process may have been paused
			// past it): a grant now could exceed a limit under the next
			// leader. The replica takes its waiter to that leader.
			dropped(l.cfg, l.logger, "release", l.release(context.Background(), lease.ID, lease.Owner))
			return
		}
		f := &frame{Op: opNotify, Epoch: l.epoch, Waiter: id, Err: encodeErr(err)}
		if granted {
			f.Lease = &lease
		}
		l.mu.Lock()
		if !p.waiters[id] || l.closed || p.dropped {
			delete(p.waiters, id)
			l.mu.Unlock()
			if granted {
				dropped(l.cfg, l.logger, "release", l.release(context.Background(), lease.ID, lease.Owner))
			}
			return
		}
		delete(p.waiters, id)
		var mirrored mirrorWait
		if granted {
			mirrored = l.recordLocked(p, lease, req, l.boundOf(req.Hold))
		}
		deliver := p.deliver
		l.mu.Unlock()
		mirrored.wait()
		if deliver(f) != nil {
			// The replica is told when its session comes back (sync), or
			// the lease goes back when it does not (drop).
			l.mu.Lock()
			if !p.dropped {
				p.undelivered[id] = f
			}
			l.mu.Unlock()
		}
	}
}

// handle runs one call of p's and returns the reply.
func (l *leader) handle(ctx context.Context, p *peer, f *frame) *frame {
	r := &frame{ID: f.ID, Op: opReply, Epoch: l.epoch}
	var err error
	switch {
	case f.Epoch != l.epoch:
		// Lease ids are a term's own: a call meant for another term's
		// leader must not touch this one's.
		err = fmt.Errorf("%w: a call for epoch %d reached the leader of epoch %d", errWrongTerm, f.Epoch, l.epoch)
		r.Err = encodeErr(err)
		return r
	}
	switch f.Op {
	case opEnqueue, opTryAcquire, opRestore, opSync:
		if !l.valid() {
			// The term has passed on this replica's clock: it decides
			// nothing more, and its replicas look for the next leader
			// (or run open) rather than wait on this one.
			r.Err = encodeErr(fmt.Errorf("%w: the term of epoch %d has passed", errWrongTerm, l.epoch))
			return r
		}
	}
	switch f.Op {
	case opSetScope:
		if f.Config == nil {
			err = fmt.Errorf("%w: set_scope without a config", admission.ErrInvalid)
			break
		}
		err = l.mem.SetScope(ctx, f.Scope, *f.Config)
	case opRemoveScope:
		err = l.mem.RemoveScope(ctx, f.Scope)
		l.forgetSpend(f.Scope)
	case opScope:
		var st admission.ScopeStats
		st, err = l.mem.Scope(ctx, f.Scope)
		r.Stats = &st
	case opScopes:
		r.All = l.mem.Scopes(ctx)
	case opEnqueue:
		err = l.enqueue(ctx, p, f.Req.requestWith(l.specs))
	case opTryAcquire:
		var lease admission.Lease
		lease, err = l.tryAcquire(ctx, p, f.Req.requestWith(l.specs))
		if err == nil {
			r.Lease = &lease
		}
	case opCancel:
		err = l.mem.Cancel(ctx, f.Waiter)
	case opPosition:
		var pos admission.Position
		pos, err = l.mem.Position(ctx, f.Waiter)
		r.Pos = &pos
	case opRenew:
		r.Expires, err = l.mem.Renew(ctx, l.memID(f.LeaseID), f.Owner)
	case opRelease:
		if f.Settle {
			// What the lease used, then its release (Config.LazyRelease).
			dropped(l.cfg, l.logger, "reconcile", l.mem.Reconcile(ctx, l.memID(f.LeaseID), f.Owner, f.settlement()))
		}
		l.mu.Lock()
		needs := l.needsOfLocked(f.LeaseID)
		l.mu.Unlock()
		err = l.release(ctx, f.LeaseID, f.Owner)
		r.Spent = l.spentAfter(needs)
	case opReconcile:
		if err = l.mem.Reconcile(ctx, l.memID(f.LeaseID), f.Owner, f.settlement()); err == nil {
			l.settled(f.LeaseID, f.settlement())
		}
	case opRestore:
		var lease admission.Lease
		lease, err = l.restore(ctx, p, f.Req.request(), f.Cand, l.boundOf(f.Req.Hold))
		if err == nil {
			r.Lease = &lease
		}
	case opFence:
		err = l.mem.Fence(ctx, f.OwnerID, f.OwnerGen)
	case opActivate:
		err = l.mem.Activate(ctx, f.OwnerID, f.OwnerGen)
	case opSync:
		r.Synced, err = l.sync(ctx, p, f.State)
	default:
		err = fmt.Errorf("%w: unknown op %q", admission.ErrInvalid, f.Op)
	}
	r.Err = encodeErr(err)
	return r
}

func (l *leader) enqueue(ctx context.Context, p *peer, req admission.Request) error {
	if err := l.waitReady(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	switch {
	case p.dropped:
		l.mu.Unlock()
		return ErrUnavailable
	case p.waiters[req.ID]:
		// Queued already: by the replica's sync, when its session came
		// back while this call was on its way.
		l.mu.Unlock()
		return nil
	}
	p.waiters[req.ID] = true
	l.mu.Unlock()
	err := l.mem.Enqueue(ctx, req, l.notifier(p, toWire(req)))
	if err != nil {
		l.mu.Lock()
		delete(p.waiters, req.ID)
		l.mu.Unlock()
	}
	return err
}

func (l *leader) tryAcquire(ctx context.Context, p *peer, req admission.Request) (admission.Lease, error) {
	if err := l.waitReady(ctx); err != nil {
		return admission.Lease{}, err
	}
	lease, err := l.mem.TryAcquire(ctx, req)
	if err != nil {
		return lease, err
	}
	lease = l.fleetLease(lease)
	return lease, l.hand(p, lease, toWire(req), l.boundOf(req.Hold))
}

// restore re-creates a lease p holds; bound is its bound, zero for
// none.
func (l *leader) restore(ctx context.Context, p *peer, req admission.Request, cand int, bound time.Time) (admission.Lease, error) {
	lease, err := l.mem.Restore(ctx, req, cand)
	if err != nil {
		return lease, err
	}
	lease = l.fleetLease(lease)
	return lease, l.hand(p, lease, toWire(req), bound)
}

// boundOf is the bound of a lease granted now for work that ends within
// hold: hold and the session timeout, which covers the grant's way to
// its holder and the difference between the two clocks. Zero hold: no
// bound.
func (l *leader) boundOf(hold time.Duration) time.Time {
	if hold <= 0 {
		return time.Time{}
	}
	return l.clock.Now().Add(hold + l.cfg.SessionTimeout)
}

// hand records lease as p's, or gives it back if it may not be handed
// out: the term has passed, or p is gone.
func (l *leader) hand(p *peer, lease admission.Lease, req *wireRequest, bound time.Time) error {
	l.mu.Lock()
	ok := !p.dropped && !l.closed && l.valid()
	var mirrored mirrorWait
	if ok {
		mirrored = l.recordLocked(p, lease, req, bound)
	}
	l.mu.Unlock()
	mirrored.wait()
	if !ok {
		dropped(l.cfg, l.logger, "release", l.release(context.Background(), lease.ID, lease.Owner))
		return ErrUnavailable
	}
	return nil
}

// serve answers one replica's session on c, whose hello (the secret
// checked: Engine.handshake) is given, as one of the term's goroutines;
// it returns once the session has ended and its calls have returned.
func (l *leader) serve(c *conn, hello *frame) {
	defer c.stop()
	refuse := func(err error) {
		_ = c.send((&frame{Op: opWelcome, Epoch: l.epoch, Err: encodeErr(err)}).withRange(l.cfg.protocol))
		c.finish()
		select {
		case <-c.done: // written, or the write deadline passed
		case <-l.ctx.Done():
		}
	}
	if !l.run.enter() {
		refuse(fmt.Errorf("%w: the term of epoch %d ended here", errWrongTerm, l.epoch))
		return
	}
	defer l.run.leave()
	if hello.Epoch != l.epoch || !l.valid() {
		refuse(fmt.Errorf("%w: epoch %d is not this leader's (%d)", errWrongTerm, hello.Epoch, l.epoch))
		return
	}
	proto, ok := l.cfg.protocol.common(hello.protoRange())
	if !ok {
		err := protocolMismatch(hello.Replica, hello.protoRange(), l.cfg.Replica, l.cfg.protocol)
		l.refuseProtocol(hello, err)
		refuse(err)
		return
	}
	c.proto = proto
	deliver := func(f *frame) error {
		ack, err := c.call(f)
		if err != nil {
			return err
		}
		if ack.Op != opAck {
			return errors.New("fleet: a notify answered with " + ack.Op)
		}
		return nil
	}
	p, err := l.attach(hello.Replica, hello.Gen, c, deliver)
	if err != nil {
		refuse(err)
		return
	}
	if c.send((&frame{Op: opWelcome, Epoch: l.epoch, Proto: proto}).withRange(l.cfg.protocol)) != nil {
		l.detach(p, c)
		return
	}
	l.answer(c, p)
}

// maxSessionCalls bounds the calls of one session that the leader runs
// at once (Config.sessionCalls): a replica has about one call in flight
// per caller of its own, far fewer than this; past it, a call is
// refused at once with errBusy (see the package doc, "The sessions").
const maxSessionCalls = 4096

// errBusy refuses a call that found its session with maxSessionCalls
// calls running. It is an errWrongTerm: the replica drops the session
// and asks again on the next, as when a session is lost.
var errBusy = fmt.Errorf("%w: the session has too many calls running", errWrongTerm)

// answer reads p's frames on c until the session ends, then ends it:
// p is detached, c closed, and the calls still running are waited for.
// Each call runs on its own goroutine, for one may wait (for the term's
// replicas to sync, for another replica to take an outcome) while this
// loop must go on reading the acks that end such waits; so this loop
// never waits for a call. At most cfg.sessionCalls run at once: beyond
// them, a call is answered at once with errBusy. A replica sends a call
// only after the calls it depends on were answered, so their order here
// does not matter.
func (l *leader) answer(c *conn, p *peer) {
	ctx, cancel := context.WithCancel(l.ctx)
	var calls sync.WaitGroup
	defer func() {
		cancel()
		l.detach(p, c)
		c.close()
		calls.Wait()
	}()
	slots := make(chan struct{}, l.cfg.sessionCalls)
	for {
		f, err := c.read()
		if err != nil {
			return
		}
		if f.Op == opAck {
			c.answer(f)
			continue
		}
		if f.Op == opAffinity {
			// Answered by nobody, and never waits: passed on at once.
			if f.Epoch == l.epoch {
				l.shareAffinity(p, f.Affinity)
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			if c.send(&frame{ID: f.ID, Op: opReply, Epoch: l.epoch, Err: encodeErr(errBusy)}) != nil {
				return
			}
			continue
		}
		calls.Go(func() {
			r := l.handle(ctx, p, f)
			// The slot is free before the reply is queued: the replica
			// may send its next call as soon as it reads the reply, and
			// that call must find the slot free.
			<-slots
			_ = c.send(r)
		})
	}
}

// errWrongTerm refuses a session opened for another term, and a call
// that this leader will not run: the replica drops the session and asks
// again on the next, of the next leader if the term has passed.
var errWrongTerm = errors.New("not the leader of that term")
