package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-gateway/weir/admission"
)

// Waiters: Enqueue, Acquire and Cancel.

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
