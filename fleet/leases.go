package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// Leases: grants, and the calls on a lease held (Renew, Release,
// Reconcile), at the leader or lazily.

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
		_, _, _ = e.leaseCall(ctx, id, &frame{Op: opReconcile, Owner: owner, Tokens: settle.used.Tokens, Cost: settle.used.Cost})
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
	_ = rt.c.post(&frame{Op: opRelease, Epoch: rt.epoch, LeaseID: h.remote, Owner: owner, Tokens: h.used.Tokens, Cost: h.used.Cost, Settle: h.settle})
	return true
}

// Reconcile settles a lease at the leader (or lazily, with its release).
// Once settled, the lease is re-asserted to a new leader with what it
// used, so that a failover keeps its settlement.
func (e *Engine) Reconcile(ctx context.Context, id admission.LeaseID, owner admission.Owner, used admission.Settlement) error {
	if used.Tokens < 0 || used.Cost < 0 {
		return fmt.Errorf("%w: reconcile with %d tokens and a cost of %d", admission.ErrInvalid, used.Tokens, used.Cost)
	}
	e.mu.Lock()
	if h, _ := e.lazyLocked(id, owner); h != nil {
		h.used, h.settle = used, true
		h.req = h.req.settled(h.cand, used)
		e.mu.Unlock()
		return nil
	}
	e.mu.Unlock()
	_, h, err := e.leaseCall(ctx, id, &frame{Op: opReconcile, Owner: owner, Tokens: used.Tokens, Cost: used.Cost})
	if errors.Is(err, errSessionClosed) {
		return ErrUnavailable
	}
	if err == nil && h != nil {
		e.mu.Lock()
		h.req = h.req.settled(h.cand, used)
		e.mu.Unlock()
	}
	return err
}
