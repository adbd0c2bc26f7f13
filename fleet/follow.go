package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// A replica's way to its term's leader: the terms it is given, the
// session it dials, the sync that gives a new leader what this replica's
// callers hold, and the leader's notices.

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
	e.protoRefused = "" // the new term's leader may speak this build's protocol
	e.signalLocked()
	e.armOpenLocked()
	var lead *leader
	if leading {
		epoch := t.Epoch
		lead = newLeader(epoch, &e.cfg, func() bool { return e.cfg.Valid(epoch) }, live)
		lead.local = e.learnAffinity
		lead.countRefusal = e.countRefusal
		lead.specs = &e.specs
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
		oldDurable.shut()
	}
	if oldLead != nil {
		oldLead.close()
	}
	if oldDurable != nil {
		oldDurable.run.wait()
	}
	if leading {
		e.run.spawn(func() { e.leadTerm(lead) })
		if durable != nil {
			e.cfg.OnLead(durable, t.Epoch)
		}
	} else if t.Addr != "" {
		e.run.spawn(func() { e.follow(t) })
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
		d.onNotify(f, lead.epoch, false)
		return nil
	})
	if err != nil {
		d.Close()
		return d
	}
	d.rt = &route{epoch: lead.epoch, proto: p.proto, call: func(ctx context.Context, f *frame) (*frame, error) {
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
		e.onNotify(f, lead.epoch, false)
		return nil
	})
	if err != nil {
		return
	}
	rt := &route{epoch: lead.epoch, lead: lead, proto: p.proto, call: func(ctx context.Context, f *frame) (*frame, error) {
		r := lead.handle(ctx, p, f)
		e.noteSpent(r.Spent)
		return r, nil
	}}
	e.establish(rt)
}

// follow keeps a session with t's leader for as long as t is the term,
// reconnecting (with jittered backoff) when it is lost. A leader that
// speaks no protocol version in common with this replica is not dialed
// again: its build is its build for the whole term.
func (e *Engine) follow(t Term) {
	backoff := 20 * time.Millisecond
	for e.current(t.Epoch) {
		c, err := e.dialLeader(t)
		if errors.Is(err, ErrProtocol) {
			e.refusedByLeader(t, err)
			e.waitNextTerm(t)
			return
		}
		if c != nil && e.session(t, c) {
			backoff = 20 * time.Millisecond
		}
		// Real time: it paces dials, as the network's own timeouts do.
		wait := time.NewTimer(backoff/2 + rand.N(backoff))
		backoff = min(backoff*2, time.Second)
		select {
		case <-wait.C:
		case <-e.stop:
			wait.Stop()
			return
		}
	}
}

// session keeps the session c with t's leader until it ends, and reports
// whether it synced. Its read loop is joined, and c stopped, before it
// returns.
func (e *Engine) session(t Term, c *conn) (synced bool) {
	defer e.disown(c.nc)
	rt := &route{epoch: t.Epoch, c: c, proto: c.proto, call: func(_ context.Context, f *frame) (*frame, error) { return c.call(f) }}
	read := make(chan struct{})
	if !e.run.spawn(func() {
		defer close(read)
		e.readLoop(rt)
	}) {
		c.stop()
		return false
	}
	synced = e.establish(rt)
	if !synced {
		// Not the route: the term moved on or the engine closed meanwhile
		// (a failed sync closed it already), and nobody else closes it.
		c.close()
	}
	<-c.done
	e.lost(rt)
	<-read
	c.stop()
	if c.closedByPeer() && e.cfg.OnLeaderLost != nil && e.current(t.Epoch) {
		e.cfg.OnLeaderLost(t)
	}
	return synced
}

// dialLeader opens a session with t's leader, or returns nil. The
// connection is the engine's to close (own) until session ends. The
// error is ErrProtocol's when the leader and this replica speak no
// version of the protocol in common, whichever side found it.
func (e *Engine) dialLeader(t Term) (*conn, error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.SessionTimeout)
	defer cancel()
	nc, err := e.cfg.Dial(ctx, t.Addr)
	if err != nil {
		e.cfg.Logger.Debug("fleet: leader not reachable", "addr", t.Addr, "epoch", t.Epoch, "error", err)
		if refused(err) && e.cfg.OnLeaderLost != nil {
			e.cfg.OnLeaderLost(t)
		}
		return nil, err
	}
	if !e.own(nc) {
		_ = nc.Close()
		return nil, admission.ErrClosed
	}
	c := newConn(nc, e.cfg.SessionTimeout)
	hello := &frame{Op: opHello, Epoch: t.Epoch, Replica: e.cfg.Replica, Gen: e.cfg.Gen, Secret: e.cfg.Secret}
	if err := c.send(hello.withRange(e.cfg.protocol)); err != nil {
		e.disown(nc)
		c.stop()
		return nil, err
	}
	w, err := c.read()
	if err == nil && w.Op == opWelcome && w.Err == nil {
		c.proto, err = e.sessionProto(t, w)
	}
	if err != nil || w.Op != opWelcome || w.Err != nil {
		if err == nil {
			err = w.Err.err()
			if err == nil {
				err = errors.New("fleet: the leader answered a hello with " + w.Op)
			}
			if !errors.Is(err, ErrProtocol) {
				e.cfg.Logger.Warn("fleet: the leader refused the session", "addr", t.Addr, "epoch", t.Epoch, "error", err)
			}
		}
		e.disown(nc)
		c.stop()
		return nil, err
	}
	c.r.authenticated()
	return c, nil
}

// sessionProto is the protocol version of a session t's leader welcomed
// with w: the version it names, or, from a leader that names none, the
// highest this replica speaks with that leader's range. ErrProtocol if
// this replica does not speak it.
func (e *Engine) sessionProto(t Term, w *frame) (int, error) {
	v, ok := w.Proto, e.cfg.protocol.has(w.Proto)
	if w.Proto == 0 {
		v, ok = e.cfg.protocol.common(w.protoRange())
	}
	if !ok {
		return 0, protocolMismatch(e.cfg.Replica, e.cfg.protocol, t.Leader, w.protoRange())
	}
	return v, nil
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
			// A lazy release's reply too, which no call waits for.
			e.noteSpent(f.Spent)
			if !c.answer(f) && errors.Is(f.Err.err(), errWrongTerm) {
				// A call posted without a wait (a lazy release) that the
				// leader did not run (errBusy): the session ends, as if
				// lost, so that the next sync settles what it asked.
				return
			}
		case opMirror:
			if f.Epoch == rt.epoch {
				e.onMirror(f, rt.epoch)
			}
		case opAffinity:
			if f.Epoch == rt.epoch {
				e.learnAffinity(boundedAffinity(f.Affinity))
			}
		case opNotify:
			if f.Epoch != rt.epoch {
				continue // another term's outcome: refused
			}
			e.onNotify(f, rt.epoch, true)
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
	e.openTimer = e.afterFunc(e.cfg.Unavailable, func() {
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
	if retired != nil {
		e.cfg.Logger.Info("fleet: a leader answers again; this replica's leases and waiters go to it", "epoch", e.term.Epoch)
	}
	// Running open while the sync is under way would grant leases the
	// sync does not take to the leader.
	e.syncing++
	defer e.syncEnded(retired)
	st, config, ws := e.syncStateLocked()
	e.mu.Unlock()
	if retired != nil {
		retired.mem.Close()
	}
	slices.SortFunc(ws, func(a, b *waiting) int { return cmp.Compare(a.seq, b.seq) })
	for _, w := range ws {
		st.Waiters = append(st.Waiters, w.req)
	}
	reply, err := rt.call(e.ctx, &frame{Op: opSync, Epoch: rt.epoch, State: st})
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
	if !e.reconfigureLocked(rt, config) || e.closed || e.term.Epoch != rt.epoch {
		return false
	}
	e.takeSyncedLocked(rt, st.Leases, reply.Synced)
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

// syncEnded ends a sync that establish began, having retired the open
// engine (nil if it ran none): a sync that failed leaves the engine
// without a leader again, and it runs open again at once.
func (e *Engine) syncEnded(retired *open) {
	e.mu.Lock()
	e.syncing--
	var moved []*waiting
	if retired != nil {
		moved = e.failOpenLocked()
	}
	o := e.open
	e.mu.Unlock()
	if o != nil && o != retired {
		e.queueOpen(o, moved)
	}
}

// syncStateLocked is what a sync tells the leader, but the waiters: the
// configuration (and its change count), the leases with the time left
// to their bounds, and the mirror; and the waiters, for the caller to
// put in their order once unlocked.
func (e *Engine) syncStateLocked() (*syncState, uint64, []*waiting) {
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
	return st, config, ws
}

// reconfigureLocked gives rt's leader the configuration as it is now,
// if it changed since the sync took it (config, its change count): a
// change made while the sync was under way found no route and was only
// recorded. False if that failed, and rt's session is closed.
func (e *Engine) reconfigureLocked(rt *route, config uint64) bool {
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
	return true
}

// takeSyncedLocked gives each lease the sync took along (sent) the id
// rt's leader knows it by (synced, by key of the local id), and forgets
// those the leader no longer holds; a lease released or granted again
// meanwhile is left as it is.
func (e *Engine) takeSyncedLocked(rt *route, sent []heldLease, synced map[string]admission.LeaseID) {
	for _, h := range sent {
		cur := e.leases[h.Local]
		if cur == nil || cur.remote != h.Remote || cur.epoch != h.Epoch {
			continue // released or re-granted meanwhile
		}
		if id, ok := synced[key(h.Local)]; ok {
			cur.remote, cur.epoch = id, rt.epoch
		} else {
			delete(e.leases, h.Local) // the leader no longer holds it
		}
	}
}

// configLocked copies the configuration this replica has recorded into
// st, each budget with the latest spend a leader told of its window,
// and returns its change count.
func (e *Engine) configLocked(st *syncState) uint64 {
	st.Scopes, st.Fenced, st.Active = maps.Clone(e.scopes), maps.Clone(e.fenced), maps.Clone(e.active)
	for name, cfg := range st.Scopes {
		st.Scopes[name] = e.spentConfigLocked(name, cfg)
	}
	st.Removed = e.removed.names(e.now())
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
		r, err := rt.call(e.ctx, f)
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

// onNotify hands a waiter's outcome to its caller; remote: it came from
// another replica's leader, which resolves this replica's waiters from
// their Specs (added).
func (e *Engine) onNotify(f *frame, epoch uint64, remote bool) {
	err := f.Err.err()
	e.mu.Lock()
	w := e.waiters[f.Waiter]
	if w == nil || w.open != nil || e.term.Epoch != epoch {
		e.mu.Unlock()
		if f.Lease != nil {
			// Nobody waits for it (cancelled here meanwhile, or waiting
			// in the open engine): back it goes.
			lease := *f.Lease
			e.run.spawn(func() { e.releaseRemote(epoch, lease.ID, lease.Owner) })
		}
		return
	}
	delete(e.waiters, f.Waiter)
	var out admission.Lease
	if f.Lease != nil {
		var req *wireRequest
		req, out = w.req, *f.Lease
		if remote {
			req, out = added(req, out)
		}
		e.leases[out.ID] = &held{remote: out.ID, epoch: epoch, req: req, cand: out.Candidate, bound: e.boundOf(w.req.Hold)}
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
	r, err := rt.call(e.ctx, &frame{Op: opRelease, Epoch: epoch, LeaseID: id, Owner: owner})
	if err == nil && errors.Is(r.Err.err(), errWrongTerm) {
		// Not run (errBusy): the session ends, as if lost, and the next
		// sync leaves the lease out.
		e.lost(rt)
		return
	}
	dropped(&e.cfg, e.cfg.Logger, "release", err)
}
