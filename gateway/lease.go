package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// leaseHold is a granted lease while its request runs. A lease that can
// expire (its platform model sets lease_ttl) is renewed every third of
// its TTL for as long as the request runs, so lease_ttl bounds how long a
// slot outlives a request that died unseen, never a live one: a live
// request's slot is never handed to another while it runs. release gives
// it back, once.
type leaseHold struct {
	s *Service
	c *Call
	// ctx is the request's without its cancellation: the renewals, the
	// settlement and the release go on after the client has left.
	ctx context.Context
	// id and owner name the lease (of the whole admission.Lease, all
	// that renewing and releasing it need).
	id    admission.LeaseID
	owner admission.Owner
	every time.Duration
	// obs is what the attempt under the lease measures (Call.obs).
	obs callObs

	mu    sync.Mutex
	timer clock.Timer
	done  bool
}

// minRenewEvery keeps a lease whose expiry looks past already (the
// engine's clock ahead of ours) from being renewed in a tight loop.
const minRenewEvery = 10 * time.Millisecond

// hold starts holding l for c, whose request's context is ctx.
func (s *Service) hold(ctx context.Context, c *Call, l admission.Lease) *leaseHold {
	h := &leaseHold{s: s, c: c, ctx: context.WithoutCancel(ctx), id: l.ID, owner: l.Owner}
	if !l.Expires.IsZero() {
		h.every = max(l.Expires.Sub(s.deps.Clock.Now())/3, minRenewEvery)
		h.timer = s.deps.Clock.AfterFunc(h.every, h.renew)
	}
	return h
}

func (h *leaseHold) renew() {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	_, err := h.s.deps.Engine.Renew(h.ctx, h.id, h.owner)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return
	}
	if err != nil {
		h.s.logger(h.c).Warn("could not renew the lease of a running request", "lease", uint64(h.id), "error", err)
		if errors.Is(err, admission.ErrLeaseNotHeld) || errors.Is(err, admission.ErrStaleOwner) {
			return // gone: nothing left to renew
		}
	}
	h.timer = h.s.deps.Clock.AfterFunc(h.every, h.renew)
}

// release stops renewing and gives the lease back; later calls do nothing.
// A failure (a stale owner) is logged and counted.
func (h *leaseHold) release() {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		return
	}
	h.done = true
	if h.timer != nil {
		h.timer.Stop()
	}
	h.mu.Unlock()
	if err := h.s.deps.Engine.Release(h.ctx, h.id, h.owner); err != nil {
		h.s.dropped(h.c, "release", "could not release a request's lease", err)
	}
}
