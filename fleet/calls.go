package fleet

import (
	"context"
	"errors"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// Calls to the leader, and the engine's scope and owner methods.

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
		e.removed.drop(name)
	}); err != nil {
		return err
	}
	e.openScope(ctx, name, &cfg)
	return nil
}

// RemoveScope retires a scope at the leader and here, as SetScope. A
// scope this replica set that the leader has not (another replica
// retired it first: each retires the scopes its catalog left) is
// retired here too, or the next leader would be given it again; the
// leader's ErrUnknownScope is returned all the same.
func (e *Engine) RemoveScope(ctx context.Context, name string) error {
	forget := func() {
		delete(e.scopes, name)
		e.removed.add(name, e.now())
		delete(e.spent, name)
	}
	err := e.configure(ctx, &frame{Op: opRemoveScope, Scope: name}, forget)
	if errors.Is(err, admission.ErrUnknownScope) {
		e.mu.Lock()
		_, known := e.scopes[name]
		if known {
			forget()
			e.config++
		}
		e.mu.Unlock()
		if known {
			e.openScope(ctx, name, nil)
		}
		return err
	}
	if err != nil {
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
