package fleet

import (
	"context"
	"fmt"

	"github.com/weir-gateway/weir/admission"
)

// A new term's sync, at the leader: the barriers every replica alive
// when the term began passes, and what the leader makes of what each
// replica says it holds (see the package doc, "A new leader").

// The stages of a new term's sync (leader.stages).
const (
	scoped = iota
	owned
	restored
	stages
)

// barrier is passed once every replica expected has arrived, or it was
// forced.
type barrier struct {
	waiting map[string]bool
	done    chan struct{}
	known   bool // the replicas expected are known
}

// newBarrier waits for the replicas of expect; nil says they are not
// known, and only forcing passes it.
func newBarrier(expect []string) *barrier {
	b := &barrier{waiting: make(map[string]bool), done: make(chan struct{}), known: expect != nil}
	for _, r := range expect {
		b.waiting[r] = true
	}
	b.check()
	return b
}

func (b *barrier) passed() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

func (b *barrier) check() {
	if b.known && len(b.waiting) == 0 && !b.passed() {
		close(b.done)
	}
}

// arrive and force are called under the leader's lock.
func (b *barrier) arrive(replica string) {
	delete(b.waiting, replica)
	b.check()
}

func (b *barrier) force() {
	clear(b.waiting)
	b.known = true
	b.check()
}

// await waits until b is passed. It fails when ctx ends, or the term
// ends here: the caller asks the next leader (errWrongTerm).
func (l *leader) await(ctx context.Context, b *barrier) error {
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.ctx.Done():
		return fmt.Errorf("%w: the term of epoch %d ended here", errWrongTerm, l.epoch)
	}
}

// forceReady ends the wait for replicas that never synced: their
// sessions' absence says they are gone, and they hold nothing the new
// term must honour.
func (l *leader) forceReady() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stages[restored].passed() {
		l.logger.Warn("fleet leader admits without replicas that did not sync", "epoch", l.epoch, "missing", len(l.stages[restored].waiting))
		for _, b := range l.stages {
			b.force()
		}
	}
}

// reached notes that replica has passed stage (and every earlier one).
func (l *leader) reached(replica string, stage int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.stages[:stage+1] {
		b.arrive(replica)
	}
}

// waitReady blocks admissions until every replica that was alive when
// the term began has re-asserted what it holds: a new leader that
// admitted before that could exceed a limit with leases it does not know.
func (l *leader) waitReady(ctx context.Context) error {
	return l.await(ctx, l.stages[restored])
}

// sync makes the leader's record of p what p says it holds: its
// scopes' configuration, the owners it fenced and activated, its leases
// (kept if this leader granted them and still holds them, restored if an
// earlier leader did, released if p no longer holds them) and its queued
// waiters (kept in place if queued here, told their outcome if it was
// decided while p was away, queued otherwise, cancelled if p no longer
// waits), one stage after another. It returns, for each lease p sent,
// the id it has here.
func (l *leader) sync(ctx context.Context, p *peer, st *syncState) (map[string]admission.LeaseID, error) {
	if st == nil {
		st = &syncState{}
	}
	later, err := l.syncScopes(ctx, p, st)
	if err != nil {
		return nil, err
	}
	if err := l.syncOwners(ctx, p, st); err != nil {
		return nil, err
	}
	ids := l.syncLeases(ctx, p, st.Leases)
	// The mirrored leases whose scopes were not known before the scoped
	// stage.
	l.adoptMirror(ctx, p, later)

	l.reached(p.replica, restored)
	if err := l.waitReady(ctx); err != nil {
		return ids, err
	}
	l.syncWaiters(ctx, p, st.Waiters)
	l.mu.Lock()
	l.startMirrorLocked(p)
	l.mu.Unlock()
	return ids, nil
}

// syncScopes is a sync's first stage: p's scopes are configured, and
// the leases p was mirrored held, and it waits for every replica's. It
// returns the mirrored leases on scopes not known yet, to hold once
// every replica's scopes are in.
func (l *leader) syncScopes(ctx context.Context, p *peer, st *syncState) ([]mirrorLease, error) {
	for name, cfg := range st.Scopes {
		if err := l.mem.SetScope(ctx, name, cfg); err != nil {
			l.logger.Warn("fleet sync: a replica's scope refused", "replica", p.replica, "scope", name, "error", err)
			continue
		}
		l.raiseSpent(ctx, name, cfg)
	}
	for _, name := range st.Removed {
		dropped(l.cfg, l.logger, "remove_scope", l.mem.RemoveScope(ctx, name))
		l.forgetSpend(name)
	}
	// What the replica was mirrored of the leases that others could not
	// re-assert (silent.go) is held here too, until their holders speak:
	// before this replica counts as arrived, so that the barrier does
	// not pass without them.
	later := l.adoptMirror(ctx, p, st.Mirror)
	l.reached(p.replica, scoped)
	if err := l.await(ctx, l.stages[scoped]); err != nil {
		return nil, err
	}
	return later, nil
}

// syncOwners is a sync's second stage: the owners p fenced and
// activated, then the wait for every replica's.
func (l *leader) syncOwners(ctx context.Context, p *peer, st *syncState) error {
	// Fences before activations: an activation of a generation fenced
	// meanwhile fails, as it would have at the time.
	for id, gen := range st.Fenced {
		dropped(l.cfg, l.logger, "fence", l.mem.Fence(ctx, id, gen))
	}
	for id, gen := range st.Active {
		dropped(l.cfg, l.logger, "activate", l.mem.Activate(ctx, id, gen))
	}
	l.reached(p.replica, owned)
	return l.await(ctx, l.stages[owned])
}

// syncLeases makes the leases p holds here those it says it holds
// (held): kept if this leader granted them and still holds them,
// restored if an earlier leader did, released if p no longer holds
// them. It returns, for each lease of held, the id it has here.
func (l *leader) syncLeases(ctx context.Context, p *peer, held []heldLease) map[string]admission.LeaseID {
	ids := make(map[string]admission.LeaseID, len(held))
	kept := make(map[admission.LeaseID]bool)
	var restore []heldLease
	l.mu.Lock()
	// What p holds here, by the name p knows each lease by: its own
	// grants and restores of this term, and the leases held for it while
	// it was silent.
	named := make(map[origin]admission.LeaseID, len(p.leases))
	for id, pl := range p.leases {
		named[pl.origin] = id
	}
	for _, h := range held {
		if h.Remote != 0 {
			if id, ok := named[origin{h.Epoch, h.Remote}]; ok {
				kept[id] = true
				ids[key(h.Local)] = id
				p.leases[id].origin = origin{l.epoch, id}
				continue
			}
			if h.Epoch == l.epoch {
				// Granted here but gone since (expired, fenced): it
				// stays gone.
				continue
			}
		}
		restore = append(restore, h)
	}
	var release []admission.LeaseID
	owners := make(map[admission.LeaseID]admission.Owner)
	for id, pl := range p.leases {
		if !kept[id] {
			release = append(release, id)
			owners[id] = pl.owner
		}
	}
	l.mu.Unlock()
	for _, id := range release {
		dropped(l.cfg, l.logger, "release", l.release(ctx, id, owners[id]))
	}
	for _, h := range restore {
		lease, err := l.restore(ctx, p, h.Req.request(), h.Cand, l.boundLeft(h.Bound))
		if err != nil {
			l.logger.Warn("fleet sync: a replica's lease could not be restored", "replica", p.replica, "waiter", h.Req.ID, "error", err)
			continue
		}
		ids[key(h.Local)] = lease.ID
	}
	return ids
}

// syncWaiters makes p's waiters here those it says it has (listed, in
// their order): each kept in place if queued here, told its outcome if
// it was decided while p was away, queued otherwise; a waiter p no
// longer lists is cancelled, and a lease granted to one while p was
// away goes back.
func (l *leader) syncWaiters(ctx context.Context, p *peer, waiters []*wireRequest) {
	listed := make(map[string]bool, len(waiters))
	for _, w := range waiters {
		listed[w.ID] = true
		l.mu.Lock()
		told := p.undelivered[w.ID]
		delete(p.undelivered, w.ID)
		queued := p.waiters[w.ID]
		deliver := p.deliver
		l.mu.Unlock()
		switch {
		case told != nil:
			_ = deliver(told)
		case queued:
		default:
			if err := l.enqueue(ctx, p, w.requestWith(l.specs)); err != nil {
				_ = deliver(&frame{Op: opNotify, Epoch: l.epoch, Waiter: w.ID, Err: encodeErr(err)})
			}
		}
	}
	l.mu.Lock()
	var cancel []string
	for id := range p.waiters {
		if !listed[id] {
			cancel = append(cancel, id)
		}
	}
	var unwanted []*frame
	for id, f := range p.undelivered {
		if !listed[id] && f.Lease != nil {
			unwanted = append(unwanted, f)
		}
		delete(p.undelivered, id)
	}
	l.mu.Unlock()
	for _, id := range cancel {
		dropped(l.cfg, l.logger, "cancel", l.mem.Cancel(ctx, id))
	}
	for _, f := range unwanted {
		l.mu.Lock()
		delete(p.leases, f.Lease.ID)
		delete(l.owners, f.Lease.ID)
		l.mu.Unlock()
		dropped(l.cfg, l.logger, "release", l.release(ctx, f.Lease.ID, f.Lease.Owner))
	}
}

// key names a replica's own lease id in a sync reply (JSON object keys
// are strings).
func key(id admission.LeaseID) string { return fmt.Sprint(uint64(id)) }
