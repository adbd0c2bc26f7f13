package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// open is a replica's own engine while no leader answers (see the
// package doc, "When the leader cannot be reached"): it admits the
// candidates whose scopes all fail open, each scope limited to this
// replica's share of its limits. It lives from the moment the replica
// starts running open to the next sync with a leader, which takes its
// leases and waiters.
type open struct {
	mem *admission.Memory
	// shares are the scopes usable here, with their shares of the
	// limits; guarded by the Engine's mu.
	shares   map[string]admission.ScopeConfig
	replicas int
}

// errOpen is route's answer while the engine runs open: the caller asks
// the open engine instead of a leader.
var errOpen = errors.New("fleet: running open")

// share is cfg with its limits divided among n replicas (rounded down),
// and whether the scope is usable while no leader answers: it fails open
// and none of its limits' shares is 0 (0 would mean no limit to the
// engine, where the share is nothing). A shadow scope enforces nothing,
// so it fails open whatever it says, and a share of 0 leaves it nothing
// to count. A scope with a Budget fails closed whatever it says: spend is
// the leader's to count, and shares of it would not add up to the budget
// once each replica counts from what the configuration says was spent. A
// shadow one fails open without its budget (what a replica would count
// alone would say nothing true).
func share(cfg admission.ScopeConfig, n int64) (admission.ScopeConfig, bool) {
	limited := cfg.Limit > 0 || cfg.RPM > 0 || cfg.TPM > 0
	if cfg.Owner != "" || (limited && !cfg.FailOpen && !cfg.Shadow) || (cfg.Budget > 0 && !cfg.Shadow) {
		return cfg, false
	}
	cfg.Budget, cfg.BudgetSpent, cfg.BudgetFrom, cfg.BudgetUntil = 0, 0, time.Time{}, time.Time{}
	ok := true
	div := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		s := v / n
		if s == 0 {
			ok = false
		}
		return s
	}
	cfg.Limit, cfg.RPM, cfg.TPM = div(cfg.Limit), div(cfg.RPM), div(cfg.TPM)
	cfg.QueueLimit = int(div(int64(cfg.QueueLimit)))
	return cfg, ok || cfg.Shadow
}

// usable reports whether every scope of needs is usable here.
func (o *open) usable(needs []admission.Need) bool {
	for _, n := range needs {
		if _, ok := o.shares[n.Scope]; !ok {
			return false
		}
	}
	return true
}

// request is req with the candidates usable here alone, and the index
// in req of each. It re-resolves nothing: new candidates would be the
// leader's to judge.
func (o *open) request(req admission.Request) (admission.Request, []int) {
	var cands []admission.Candidate
	var idx []int
	for i, c := range req.Candidates {
		if o.usable(c.Needs) {
			cands = append(cands, c)
			idx = append(idx, i)
		}
	}
	req.Candidates, req.Resolve = cands, nil
	return req, idx
}

// errNoOpenCandidate is the answer, while running open, to a request
// none of whose candidates fails open: it fails closed.
func errNoOpenCandidate(id string) error {
	return fmt.Errorf("%w; no candidate of %s is in scopes that fail open", ErrUnavailable, id)
}

// failOpenLocked starts running open, if the replica may: it has no
// route, knows how many replicas the fleet has, and has a scope that
// fails open. The new engine holds, in each scope usable here, what this
// replica's callers hold there, so that their leases count against its
// share. It returns the waiters to move to the new engine (queueOpen),
// in their order.
func (e *Engine) failOpenLocked() []*waiting {
	if e.closed || e.rt != nil || e.open != nil || e.syncing > 0 || e.replicas <= 0 || e.protoRefused != "" {
		// A replica whose leader refused its protocol runs no share of
		// its own: that leader decides for the others, and the share
		// would come on top.
		return nil
	}
	failOpen := false
	for _, cfg := range e.scopes {
		failOpen = failOpen || cfg.FailOpen
	}
	if !failOpen {
		return nil
	}
	ctx := context.Background()
	o := &open{mem: admission.NewMemory(e.cfg.Options), shares: make(map[string]admission.ScopeConfig), replicas: e.replicas}
	for name, cfg := range e.scopes {
		if s, ok := share(cfg, int64(e.replicas)); ok && o.mem.SetScope(ctx, name, s) == nil {
			o.shares[name] = s
		}
	}
	restored := 0
	for _, h := range e.leases {
		if h.cand < 0 || h.cand >= len(h.req.Candidates) {
			continue
		}
		var needs []admission.Need
		for _, n := range h.req.Candidates[h.cand].Needs {
			if _, ok := o.shares[n.Scope]; ok {
				needs = append(needs, n)
			}
		}
		if len(needs) == 0 {
			continue
		}
		// A fresh engine with no waiters: Restore notifies nobody, so it
		// may run under e.mu.
		l, err := o.mem.Restore(ctx, admission.Request{ID: h.req.ID, Owner: h.req.Owner, Candidates: []admission.Candidate{{Needs: needs}}}, 0)
		if err != nil {
			continue
		}
		h.open, h.openID = o, l.ID
		restored++
	}
	e.open = o
	e.signalLocked()
	var moved []*waiting
	for _, w := range e.waiters {
		if req, _ := o.request(w.req.request()); len(req.Candidates) > 0 {
			w.open = o
			moved = append(moved, w)
		}
	}
	slices.SortFunc(moved, func(a, b *waiting) int { return cmp.Compare(a.seq, b.seq) })
	e.cfg.Logger.Warn("fleet: no leader answers; admitting this replica's share of the scopes that fail open",
		"epoch", e.term.Epoch, "replicas", e.replicas, "scopes", len(o.shares), "leases_held", restored, "waiters_moved", len(moved))
	return moved
}

// queueOpen queues the waiters moved to o, in order. One o refuses (its
// candidates usable here can never be admitted there) keeps waiting for
// a leader.
func (e *Engine) queueOpen(o *open, ws []*waiting) {
	for _, w := range ws {
		e.mu.Lock()
		req, idx := o.request(w.req.request())
		e.mu.Unlock()
		if err := o.mem.Enqueue(context.Background(), req, e.openNotify(o, w, idx)); err != nil {
			e.mu.Lock()
			if w.open == o {
				w.open = nil
			}
			e.mu.Unlock()
		}
	}
}

// retireOpenLocked ends running open, as a sync begins (or a leader's
// protocol is refused): the leases the open engine counted and the
// waiters it queued are the next sync's to take to a leader, and
// outcomes it decides from now on are dropped. It
// returns the engine, for the caller to close outside e.mu.
func (e *Engine) retireOpenLocked() *open {
	o := e.open
	if o == nil {
		return nil
	}
	e.open = nil
	for _, h := range e.leases {
		if h.open == o {
			h.open, h.openID = nil, 0
		}
	}
	for _, w := range e.waiters {
		if w.open == o {
			w.open = nil
		}
	}
	return o
}

// openNotify is the open engine's notify for w, whose candidates there
// are w's at idx. An outcome is w's only while o is the engine w is
// queued in: once o is retired, w is the leader's.
func (e *Engine) openNotify(o *open, w *waiting, idx []int) func(admission.Lease, error) {
	return func(l admission.Lease, err error) {
		e.mu.Lock()
		if e.open != o || w.open != o || e.waiters[w.req.ID] != w {
			e.mu.Unlock()
			return // o is retired and its leases count nowhere
		}
		delete(e.waiters, w.req.ID)
		if err == nil {
			l = e.holdOpenLocked(o, w.req, idx, l)
		}
		e.mu.Unlock()
		w.notify(l, err)
	}
}

// holdOpenLocked records lease l, granted by o for req's candidates at
// idx, as a lease this replica's caller holds, and returns it as the
// caller knows it: an id of its own (the open engine's ids start again
// with each engine) and the candidate's index in req.
func (e *Engine) holdOpenLocked(o *open, req *wireRequest, idx []int, l admission.Lease) admission.Lease {
	e.openLeases++
	id := admission.LeaseID(e.openLeases) // epoch 0: no leader's id is one
	cand := idx[l.Candidate]
	e.leases[id] = &held{req: req, cand: cand, open: o, openID: l.ID}
	e.openAdmitted++
	l.ID, l.Candidate = id, cand
	return l
}

// enqueueOpen queues req in the open engine. errRetry says the engine
// was retired meanwhile: the caller asks the leader.
func (e *Engine) enqueueOpen(ctx context.Context, req admission.Request, notify func(admission.Lease, error)) error {
	e.mu.Lock()
	o := e.open
	if o == nil {
		e.mu.Unlock()
		return errRetry
	}
	if _, dup := e.waiters[req.ID]; dup {
		e.mu.Unlock()
		return fmt.Errorf("%w: %s", admission.ErrDuplicate, req.ID)
	}
	local, idx := o.request(req)
	if len(local.Candidates) == 0 {
		e.mu.Unlock()
		return errNoOpenCandidate(req.ID)
	}
	e.seq++
	w := &waiting{req: toWire(req), seq: e.seq, notify: notify, open: o}
	e.waiters[req.ID] = w
	e.mu.Unlock()
	err := o.mem.Enqueue(ctx, local, e.openNotify(o, w, idx))
	if err == nil {
		return nil
	}
	e.mu.Lock()
	retired := w.open != o
	if e.waiters[req.ID] == w {
		delete(e.waiters, req.ID)
	}
	e.mu.Unlock()
	if retired && errors.Is(err, admission.ErrClosed) {
		return errRetry
	}
	return err
}

// grantOpen admits req at once in the open engine (TryAcquire), or
// restores its candidate cand there.
func (e *Engine) grantOpen(ctx context.Context, req admission.Request, restore bool, cand int) (admission.Lease, error) {
	e.mu.Lock()
	o := e.open
	var local admission.Request
	var idx []int
	if o != nil {
		local, idx = o.request(req)
	}
	e.mu.Unlock()
	if o == nil {
		return admission.Lease{}, errRetry
	}
	var l admission.Lease
	var err error
	switch j := slices.Index(idx, cand); {
	case len(local.Candidates) == 0, restore && j < 0:
		return admission.Lease{}, errNoOpenCandidate(req.ID)
	case restore:
		l, err = o.mem.Restore(ctx, local, j)
	default:
		l, err = o.mem.TryAcquire(ctx, local)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.open != o {
		return admission.Lease{}, errRetry // the sync did not see it: it counts nowhere
	}
	if err != nil {
		return admission.Lease{}, err
	}
	return e.holdOpenLocked(o, toWire(req), idx, l), nil
}

// errRetry says the open engine was retired during a call: the call is
// the leader's to answer.
var errRetry = errors.New("fleet: open engine retired")

// openLeaseCall runs a call on lease local while running open: in the
// open engine if it counts the lease there; a release of one it does not
// count is only forgotten here (the next sync leaves it out, and that
// leader releases it); the others fail with ErrUnavailable.
func (e *Engine) openLeaseCall(ctx context.Context, local admission.LeaseID, f *frame) (*frame, *held, error) {
	e.mu.Lock()
	o, h := e.open, e.leases[local]
	switch {
	case o == nil:
		e.mu.Unlock()
		return nil, nil, errRetry
	case h == nil:
		e.mu.Unlock()
		return nil, nil, admission.ErrLeaseNotHeld
	case h.open != o:
		e.mu.Unlock()
		if f.Op == opRelease {
			return nil, h, nil
		}
		return nil, h, ErrUnavailable
	}
	openID := h.openID
	if f.Op == opRelease {
		if f.Owner != h.req.Owner {
			e.mu.Unlock()
			return nil, h, fmt.Errorf("%w: lease %d is held by %s, not %s", admission.ErrStaleOwner, local, h.req.Owner, f.Owner)
		}
		// Gone from here before it is released there: a sync that begins
		// now must not take it to the leader.
		delete(e.leases, local)
	}
	e.mu.Unlock()
	r := &frame{}
	var err error
	switch f.Op {
	case opRenew:
		r.Expires, err = o.mem.Renew(ctx, openID, f.Owner)
	case opRelease:
		err = o.mem.Release(ctx, openID, f.Owner)
		if errors.Is(err, admission.ErrClosed) {
			err = nil // retired meanwhile, after the lease left: it counts nowhere
		}
	case opReconcile:
		err = o.mem.Reconcile(ctx, openID, f.Owner, f.settlement())
	}
	if errors.Is(err, admission.ErrClosed) {
		return nil, h, errRetry
	}
	return r, h, err
}

// openScope gives the open engine, while the engine runs open, a
// scope's new configuration (nil: it was removed): a key first seen
// meanwhile has a scope there too.
func (e *Engine) openScope(ctx context.Context, name string, cfg *admission.ScopeConfig) {
	e.mu.Lock()
	o := e.open
	e.mu.Unlock()
	if o == nil {
		return
	}
	if cfg != nil {
		if s, ok := share(*cfg, int64(o.replicas)); ok && o.mem.SetScope(ctx, name, s) == nil {
			e.mu.Lock()
			o.shares[name] = s
			e.mu.Unlock()
			return
		}
	}
	e.mu.Lock()
	delete(o.shares, name)
	e.mu.Unlock()
	_ = o.mem.RemoveScope(ctx, name)
}

// Open reports whether the engine runs open now (no leader answers, and
// it admits its share of the scopes that fail open), and how many leases
// it has granted so while it ran.
func (e *Engine) Open() (running bool, admitted uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open != nil, e.openAdmitted
}
