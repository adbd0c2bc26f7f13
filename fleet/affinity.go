package fleet

// Cache affinity across the fleet. Each replica's gateway keeps its own
// affinity table (gateway/affinity.go): which candidate served a prompt
// prefix last. A replica shares what it records with the others through
// the leader, off the request path: it posts the entries on its session
// (op "affinity", answered by nobody), and the leader passes them on to
// every other replica's session, and to its own replica in process. A
// lookup never leaves the process; an entry reaches the other replicas
// within a session's one-way trips, or is lost with a session, which
// costs a miss, never a wrong answer. The tables stay each replica's
// own, bounded and forgetting after their TTL.
//
// The frame is new: a leader that does not know it answers it with an
// error no call waits for, and a replica that does not know it ignores
// it, so replicas of an older version beside newer ones share nothing
// and lose nothing else.

// opAffinity carries affinity entries, replica to leader and leader to
// replicas.
const opAffinity = "affinity"

// AffinityEntry says that Target served affinity key Key last.
type AffinityEntry struct {
	Key    string `json:"k"`
	Target string `json:"t"`
}

// Bounds on what one frame shares: entries beyond maxAffinityEntries,
// and any whose key and target pass maxAffinityEntry bytes, are not sent
// on (a key is the gateway's digest of a prefix, a few dozen bytes).
const (
	maxAffinityEntries = 256
	maxAffinityEntry   = 1024
)

// OnAffinity sets f to receive the affinity entries the other replicas
// share; f must not block. nil: they are dropped.
func (e *Engine) OnAffinity(f func([]AffinityEntry)) {
	if f == nil {
		e.onAffinity.Store(nil)
		return
	}
	e.onAffinity.Store(&f)
}

// learnAffinity hands entries another replica shared to the handler.
func (e *Engine) learnAffinity(entries []AffinityEntry) {
	if f := e.onAffinity.Load(); f != nil && len(entries) > 0 {
		(*f)(entries)
	}
}

// ShareAffinity passes entries to every other replica, through the
// leader. It does not wait: without a leader, or once its session is
// lost, they are dropped.
func (e *Engine) ShareAffinity(entries []AffinityEntry) {
	entries = boundedAffinity(entries)
	if len(entries) == 0 {
		return
	}
	e.mu.Lock()
	rt := e.rt
	e.mu.Unlock()
	switch {
	case rt == nil:
	case rt.lead != nil:
		rt.lead.shareAffinity(nil, entries)
	case rt.c != nil:
		_ = rt.c.send(&frame{Op: opAffinity, Epoch: rt.epoch, Affinity: entries})
	}
}

// boundedAffinity is entries within the bounds of a frame.
func boundedAffinity(entries []AffinityEntry) []AffinityEntry {
	out := entries[:0:0]
	for _, a := range entries {
		if len(out) == maxAffinityEntries {
			break
		}
		if a.Key != "" && a.Target != "" && len(a.Key)+len(a.Target) <= maxAffinityEntry {
			out = append(out, a)
		}
	}
	return out
}

// shareAffinity passes entries that from shared (nil: the leader's own
// replica) to every other replica synced with this leader.
func (l *leader) shareAffinity(from *peer, entries []AffinityEntry) {
	entries = boundedAffinity(entries)
	if len(entries) == 0 {
		return
	}
	f := &frame{Op: opAffinity, Epoch: l.epoch, Affinity: entries}
	l.mu.Lock()
	var to []*conn
	own := false
	for _, p := range l.peers {
		switch {
		case p == from || p.dropped:
		case p.session != nil:
			to = append(to, p.session)
		case p.replica == l.cfg.Replica && from != nil:
			own = true
		}
	}
	l.mu.Unlock()
	for _, c := range to {
		_ = c.send(f)
	}
	if own && l.local != nil {
		l.local(entries)
	}
}
