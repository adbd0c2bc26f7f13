package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// Replicas that go away, as the leader sees them.
//
// A replica whose session ends is either dead — its process is gone,
// and with it every call it ran — or silent: paused, stalled or cut off,
// with its calls perhaps still running upstream. Config.Dead tells the
// two apart (the Member asks the kernel and PostgreSQL: see member.go).
// A replica proven dead is dropped at once and what it held goes back.
// One that is not, and has not come back within the session timeout, is
// dropped silent: its waiters are cancelled, but its leases stay held
// in the engine, each until its bound (peerLease.bound: the request's
// Hold, the longest its call may run, and a margin), until the replica
// comes back and syncs (its word: what it no longer names goes back), or
// until it is proven dead, whichever comes first. Config.ReleaseSilent
// may give them back at the drop instead, knowingly.
//
// The leader's own replica cannot be dropped by itself: if the leader
// goes silent, the next leader must learn what its callers held from
// someone else. So the leader mirrors, to every replica synced with it,
// the leases that no live replica could re-assert to the next leader:
// its own replica's and the silent replicas' it holds. Each replica
// keeps the last mirror it got and sends it with its next sync; the next
// leader holds those leases as a silent replica's (adoptMirror) until
// the replica they belong to syncs itself, or their bounds pass, or it is
// proven dead.

// ReleasePolicy says when a leader gives back the capacity of a replica
// that went silent (Config.ReleaseSilent).
type ReleasePolicy int

const (
	// ReleaseAtBound keeps each lease of a silent replica held until its
	// bound (Request.Hold and the session timeout, from the grant),
	// the replica's own word that it ended, or proof that the replica
	// died. The default: never over a limit, even while a paused
	// replica's calls still run upstream.
	ReleaseAtBound ReleasePolicy = iota
	// ReleaseAtTimeout gives the leases of a silent replica back once its
	// session has been gone for the session timeout, as if it had died.
	// Its calls may still be running then: the fleet may exceed a limit
	// until they end. When the replica resumes it finds itself fenced
	// and stops.
	ReleaseAtTimeout
)

// silentKey names a silent replica's generation.
func silentKey(replica string, gen uint64) string { return fmt.Sprintf("%s@%d", replica, gen) }

// chosen is req narrowed to its candidate cand: what a lease holds.
func chosen(req *wireRequest, cand int) *wireRequest {
	if req == nil {
		return nil
	}
	out := &wireRequest{ID: req.ID, Priority: req.Priority, FairnessKey: req.FairnessKey, Owner: req.Owner, Hold: req.Hold}
	if cand >= 0 && cand < len(req.Candidates) {
		out.Candidates = []admission.Candidate{req.Candidates[cand]}
	}
	return out
}

// boundLeft is the bound of a lease whose holder says it has left
// before it is over; zero for none.
func (l *leader) boundLeft(left time.Duration) time.Time {
	if left <= 0 {
		return time.Time{}
	}
	return l.clock.Now().Add(left)
}

// recordLocked records lease as p's; bound is its bound (zero: none).
// The caller waits on what it returns, once unlocked, before the lease
// reaches its holder (mirrorWait).
func (l *leader) recordLocked(p *peer, lease admission.Lease, req *wireRequest, bound time.Time) mirrorWait {
	pl := &peerLease{owner: lease.Owner, bound: bound, origin: origin{l.epoch, lease.ID}, req: chosen(req, lease.Candidate)}
	p.leases[lease.ID] = pl
	l.owners[lease.ID] = p
	if l.mirroredLocked(p) {
		return l.postWrittenLocked(l.mirrorOfLocked(p, pl))
	}
	return nil
}

// drop forgets a replica that is gone: its waiters are cancelled, and
// its leases go back through the engine's release path — unless it is
// not proven dead and the policy holds them (it is then silent).
func (l *leader) drop(p *peer, dead bool) {
	l.mu.Lock()
	if l.closed || (p.session != nil && !p.dropped) || (p.dropped && !(dead && p.silent)) {
		l.mu.Unlock()
		return
	}
	if p.gone != nil {
		p.gone.Stop()
		p.gone = nil
	}
	delete(l.watching, p)
	delete(l.mirror, p)
	if l.peers[p.replica] == p {
		delete(l.peers, p.replica)
	}
	for _, b := range l.stages {
		b.arrive(p.replica)
	}
	waiters := p.waiters
	p.waiters = map[string]bool{}
	p.undelivered = map[string]*frame{}
	p.dropped = true
	if !dead && l.cfg.ReleaseSilent == ReleaseAtBound && len(p.leases) > 0 {
		p.silent = true
		l.silent[silentKey(p.replica, p.gen)] = p
		var mirrored []mirrorLease
		for _, pl := range p.leases {
			mirrored = append(mirrored, l.mirrorOfLocked(p, pl))
		}
		l.postMirrorLocked(mirrored, nil)
		l.armSweepLocked()
		l.probeSilentLocked()
		n := len(p.leases)
		l.mu.Unlock()
		l.logger.Warn("fleet leader holds the leases of a replica that went silent until their calls are surely over, it syncs again, or it is proven dead",
			"replica", p.replica, "gen", p.gen, "leases", n, "waiters", len(waiters))
		l.cancelAll(waiters)
		return
	}
	p.silent = false
	delete(l.silent, silentKey(p.replica, p.gen))
	leases := p.leases
	p.leases = map[admission.LeaseID]*peerLease{}
	var gone []mirrorKey
	for id, pl := range leases {
		delete(l.owners, id)
		gone = append(gone, keyOf(p, pl))
	}
	l.postMirrorLocked(nil, gone)
	l.mu.Unlock()
	why := "gone"
	if dead {
		why = "proven dead"
	}
	l.logger.Info("fleet leader dropped a replica", "replica", p.replica, "gen", p.gen, "why", why, "leases", len(leases), "waiters", len(waiters))
	ctx := context.Background()
	for id, pl := range leases {
		dropped(l.cfg, l.logger, "release", l.release(ctx, id, pl.owner))
	}
	l.cancelAll(waiters)
}

func (l *leader) cancelAll(waiters map[string]bool) {
	for id := range waiters {
		dropped(l.cfg, l.logger, "cancel", l.mem.Cancel(context.Background(), id))
	}
}

// armSweepLocked arms the sweep for the earliest bound of a silent
// lease.
func (l *leader) armSweepLocked() {
	var next time.Time
	for _, p := range l.silent {
		for _, pl := range p.leases {
			if !pl.bound.IsZero() && (next.IsZero() || pl.bound.Before(next)) {
				next = pl.bound
			}
		}
	}
	if l.sweep != nil {
		l.sweep.Stop()
		l.sweep = nil
	}
	if next.IsZero() || l.closed {
		return
	}
	l.sweep = l.afterFunc(max(next.Sub(l.clock.Now()), 0), l.sweepDue)
}

// sweepDue gives back the silent leases whose bounds have passed: their
// calls are over, whatever became of their replicas.
func (l *leader) sweepDue() {
	now := l.clock.Now()
	l.mu.Lock()
	due := make(map[admission.LeaseID]admission.Owner)
	var gone []mirrorKey
	for k, p := range l.silent {
		for id, pl := range p.leases {
			if !pl.bound.IsZero() && !pl.bound.After(now) {
				due[id] = pl.owner
				gone = append(gone, keyOf(p, pl))
				delete(p.leases, id)
				delete(l.owners, id)
			}
		}
		if len(p.leases) == 0 {
			delete(l.silent, k)
		}
	}
	l.postMirrorLocked(nil, gone)
	l.armSweepLocked()
	l.mu.Unlock()
	if len(due) > 0 {
		l.logger.Info("fleet leader gave back the leases of a silent replica whose bounds passed", "leases", len(due))
	}
	for id, owner := range due {
		dropped(l.cfg, l.logger, "release", l.release(context.Background(), id, owner))
	}
}

// watchLocked starts asking whether the detached peer p died: soon and
// often at first (a process that died closed its session and its
// PostgreSQL connection together, which PostgreSQL notices in a moment),
// then until it comes back or is dropped.
func (l *leader) watchLocked(p *peer) {
	if l.cfg.Dead == nil || l.watching[p] {
		return
	}
	l.watching[p] = true
	l.run.spawn(func() {
		for _, d := range deathProbes(l.cfg.SessionTimeout) {
			if !l.sleep(d) {
				return
			}
			l.mu.Lock()
			watched := l.watching[p] && !l.closed
			l.mu.Unlock()
			if !watched {
				return
			}
			if l.cfg.Dead(l.ctx, p.replica, p.gen) {
				l.drop(p, true)
				return
			}
		}
	})
}

// deathProbes are the pauses between the probes of a detached peer,
// within the session timeout.
func deathProbes(timeout time.Duration) []time.Duration {
	var out []time.Duration
	total := time.Duration(0)
	for _, d := range []time.Duration{0, 20 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond} {
		if total+d >= timeout {
			break
		}
		out = append(out, d)
		total += d
	}
	for d := time.Second; total+d < timeout; total += d {
		out = append(out, d)
	}
	return out
}

// sleep waits d on the leader's clock; false once the term ended here.
func (l *leader) sleep(d time.Duration) bool {
	if d > 0 {
		ch, t := clock.After(l.clock, d)
		defer t.Stop()
		select {
		case <-ch:
		case <-l.ctx.Done():
			return false
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.closed
}

// probeSilentLocked makes sure the silent replicas are asked, every
// session timeout, whether they died: the leases of one that did go
// back at once.
func (l *leader) probeSilentLocked() {
	if l.cfg.Dead == nil || l.probing {
		return
	}
	l.probing = l.run.spawn(func() {
		first := true
		for {
			if !first && !l.sleep(l.cfg.SessionTimeout) {
				return
			}
			first = false
			l.mu.Lock()
			var ps []*peer
			for _, p := range l.silent {
				ps = append(ps, p)
			}
			if len(ps) == 0 || l.closed {
				l.probing = false
				l.mu.Unlock()
				return
			}
			l.mu.Unlock()
			for _, p := range ps {
				if l.cfg.Dead(l.ctx, p.replica, p.gen) {
					l.drop(p, true)
				}
			}
		}
	})
}
