package fleet

import (
	"context"
	"errors"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// The mirror (see silent.go): the leases no live replica could re-assert
// to the next leader — the leader's own replica's, and those it holds
// for silent replicas — copied to every replica synced with the leader.

// mirrorKey names a mirrored lease: its holder's generation and the
// name the holder knows it by.
type mirrorKey struct {
	Replica string `json:"replica"`
	Gen     uint64 `json:"gen"`
	Origin  origin `json:"origin"`
}

// mirrorLease is one mirrored lease.
type mirrorLease struct {
	mirrorKey
	Owner admission.Owner `json:"owner,omitzero"`
	// Req is the request with the lease's candidate alone.
	Req *wireRequest `json:"req"`
	// Left is how long the lease had until its bound when sent; zero:
	// no bound.
	Left time.Duration `json:"left,omitempty"`
}

func keyOf(p *peer, pl *peerLease) mirrorKey {
	return mirrorKey{Replica: p.replica, Gen: p.gen, Origin: pl.origin}
}

// mirroredLocked reports whether p's leases are mirrored: p is the
// leader's own replica, or silent. With ReleaseAtTimeout nothing is: a
// silent leader's leases go back as any silent replica's do.
func (l *leader) mirroredLocked(p *peer) bool {
	if l.cfg.ReleaseSilent == ReleaseAtTimeout {
		return false
	}
	return p.silent || (p.session == nil && !p.dropped && p.replica == l.cfg.Replica)
}

func (l *leader) mirrorOfLocked(p *peer, pl *peerLease) mirrorLease {
	m := mirrorLease{mirrorKey: keyOf(p, pl), Owner: pl.owner, Req: pl.req}
	if !pl.bound.IsZero() {
		m.Left = max(pl.bound.Sub(l.clock.Now()), time.Nanosecond)
	}
	return m
}

// postMirrorLocked sends a change of the mirror to every replica that
// takes it. Frames go out in the order they are sent, so a replica sees
// the changes in the order they were made.
func (l *leader) postMirrorLocked(add []mirrorLease, remove []mirrorKey) {
	if len(add) == 0 && len(remove) == 0 {
		return
	}
	l.sendMirrorLocked(&frame{Op: opMirror, Epoch: l.epoch, Mirror: add, Unmirror: remove})
}

// sendMirrorLocked sends a mirror frame to every replica that takes it.
func (l *leader) sendMirrorLocked(f *frame) {
	for p := range l.mirror {
		if p.session != nil {
			_ = p.session.send(f)
		}
	}
}

// postUnmirrorLocked sends the removal of a lease from the mirror, with
// the spend of its budget scopes now that it ended.
func (l *leader) postUnmirrorLocked(k mirrorKey, spent []wireSpend) {
	l.sendMirrorLocked(&frame{Op: opMirror, Epoch: l.epoch, Unmirror: []mirrorKey{k}, Spent: spent})
}

// mirrorWait is the wait for a mirrored grant of the leader's own
// replica to be written to the replicas that take the mirror.
type mirrorWait []mirrorWritten

type mirrorWritten struct {
	written <-chan struct{}
	done    <-chan struct{}
}

// postWrittenLocked is postMirrorLocked of one added lease, returning
// the wait for it to be written to every session.
func (l *leader) postWrittenLocked(m mirrorLease) mirrorWait {
	f := &frame{Op: opMirror, Epoch: l.epoch, Mirror: []mirrorLease{m}}
	var w mirrorWait
	for p := range l.mirror {
		if p.session == nil {
			continue
		}
		if ch, err := p.session.sendWritten(f); err == nil {
			w = append(w, mirrorWritten{written: ch, done: p.session.done})
		}
	}
	return w
}

// mirrorWriteBound bounds the wait of a grant of the leader's own
// replica for its mirror to be written: a replica whose connection
// takes no more gives up no grant of the leader's.
const mirrorWriteBound = 100 * time.Millisecond

// wait returns once the mirror is written, each session is over, or
// mirrorWriteBound has passed: a grant of the leader's own replica goes
// to its caller, whose call may start, only once the other replicas
// can tell the next leader about it, even if this process is paused
// right after.
func (w mirrorWait) wait() {
	if len(w) == 0 {
		return
	}
	// Real time: it bounds a write to the network.
	bound := time.NewTimer(mirrorWriteBound)
	defer bound.Stop()
	for _, m := range w {
		select {
		case <-m.written:
		case <-m.done:
		case <-bound.C:
			return
		}
	}
}

// startMirrorLocked makes p, whose session has just synced, take the
// mirror: the whole of it first, then each change.
func (l *leader) startMirrorLocked(p *peer) {
	if p.session == nil || p.dropped || l.closed {
		return
	}
	var all []mirrorLease
	if l.cfg.ReleaseSilent == ReleaseAtTimeout {
		return
	}
	for _, q := range l.peers {
		if l.mirroredLocked(q) {
			for _, pl := range q.leases {
				all = append(all, l.mirrorOfLocked(q, pl))
			}
		}
	}
	for _, q := range l.silent {
		for _, pl := range q.leases {
			all = append(all, l.mirrorOfLocked(q, pl))
		}
	}
	l.mirror[p] = true
	_ = p.session.send(&frame{Op: opMirror, Epoch: l.epoch, Reset: true, Mirror: all})
}

// adoptMirror holds here, as a silent replica's, each lease in ms that
// its holder has not re-asserted itself: ms is what replica p was
// mirrored by an earlier leader. It returns those on a scope not known
// yet, to adopt again once every replica's scopes are in.
func (l *leader) adoptMirror(ctx context.Context, p *peer, ms []mirrorLease) (unknown []mirrorLease) {
	if l.cfg.ReleaseSilent == ReleaseAtTimeout {
		return nil
	}
	adopted := 0
	for _, m := range ms {
		if m.Req == nil || len(m.Req.Candidates) != 1 {
			continue
		}
		l.mu.Lock()
		s := l.silent[silentKey(m.Replica, m.Gen)]
		skip := l.closed
		if q := l.peers[m.Replica]; q != nil && q.gen == m.Gen {
			skip = true // its own word counts, or soon will
		}
		if m.Replica == l.cfg.Replica && m.Gen == l.cfg.Gen {
			skip = true
		}
		if s != nil {
			for _, pl := range s.leases {
				if pl.origin == m.Origin {
					skip = true
				}
			}
		}
		l.mu.Unlock()
		if skip {
			continue
		}
		req := m.Req.request()
		req.Resolve = nil
		lease, err := l.mem.Restore(ctx, req, 0)
		if errors.Is(err, admission.ErrUnknownScope) {
			unknown = append(unknown, m)
			continue
		}
		if err != nil {
			l.logger.Warn("fleet sync: a mirrored lease could not be held", "replica", m.Replica, "waiter", m.Req.ID, "error", err)
			continue
		}
		lease = l.fleetLease(lease)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			dropped(l.cfg, l.logger, "release", l.release(ctx, lease.ID, lease.Owner))
			continue
		}
		s = l.silent[silentKey(m.Replica, m.Gen)]
		if s == nil {
			s = &peer{replica: m.Replica, gen: m.Gen, dropped: true, silent: true,
				deliver:     func(*frame) error { return errSessionClosed },
				leases:      make(map[admission.LeaseID]*peerLease),
				waiters:     make(map[string]bool),
				undelivered: make(map[string]*frame)}
			l.silent[silentKey(m.Replica, m.Gen)] = s
		}
		pl := &peerLease{owner: lease.Owner, bound: l.boundLeft(m.Left), origin: m.Origin, req: m.Req}
		s.leases[lease.ID] = pl
		l.owners[lease.ID] = s
		l.postMirrorLocked([]mirrorLease{l.mirrorOfLocked(s, pl)}, nil)
		l.armSweepLocked()
		l.probeSilentLocked()
		l.mu.Unlock()
		adopted++
	}
	if adopted > 0 {
		l.logger.Warn("fleet leader holds leases an earlier leader mirrored, of replicas that have not synced", "from", p.replica, "leases", adopted)
	}
	return unknown
}

// mirrored is a lease this replica was mirrored, with its bound on this
// replica's clock.
type mirrored struct {
	m     mirrorLease
	bound time.Time
}

// onMirror takes a change of the mirror from the leader of epoch.
func (e *Engine) onMirror(f *frame, epoch uint64) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term.Epoch != epoch {
		return
	}
	if f.Reset {
		e.mirror = make(map[mirrorKey]mirrored, len(f.Mirror))
	}
	for _, m := range f.Mirror {
		var bound time.Time
		if m.Left > 0 {
			bound = now.Add(m.Left)
		}
		e.mirror[m.mirrorKey] = mirrored{m: m, bound: bound}
	}
	for _, k := range f.Unmirror {
		delete(e.mirror, k)
	}
	e.noteSpentLocked(f.Spent)
}

// mirrorLocked is the mirror to send with a sync: what is not yet past
// its bound.
func (e *Engine) mirrorLocked() []mirrorLease {
	now := e.now()
	var out []mirrorLease
	for k, m := range e.mirror {
		ml := m.m
		if !m.bound.IsZero() {
			left := m.bound.Sub(now)
			if left <= 0 {
				delete(e.mirror, k)
				continue
			}
			ml.Left = left
		}
		out = append(out, ml)
	}
	return out
}

// mirrorCount is how many leases of other replicas this replica keeps
// a mirror of.
func (e *Engine) mirrorCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.mirror)
}
