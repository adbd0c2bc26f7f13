package fleet

import "time"

// A replica remembers the scopes it removed, to remove them at the next
// leader too: another replica may still name one in its own sync (it set
// the scope before this one removed it, and has not retired it yet). That
// holds only for a while: every replica retires what it no longer uses
// itself (a catalog version reaches them all within a second; the
// gateway retires an idle end user's scopes on each replica), so a
// removal older than removedTTL guards nothing more, and a scope a
// replica's sync gives a new leader again is held only until that
// replica retires it in its turn — it counts its usage and spend as any
// scope. So the set is bounded: by age, and by count (the oldest
// forgotten first), whatever the rate of removals.
const (
	removedTTL = 10 * time.Minute
	maxRemoved = 4096
)

// removals is the set of scopes a replica removed, newest last.
type removals struct {
	at    map[string]removal
	order []removedName // oldest first; an entry is stale once its name's seq moved on
	seq   uint64
}

type removal struct {
	seq uint64
	at  time.Time
}

type removedName struct {
	name string
	seq  uint64
}

func newRemovals() *removals { return &removals{at: make(map[string]removal)} }

// add records name removed at now, forgetting the oldest removal past
// maxRemoved.
func (r *removals) add(name string, now time.Time) {
	r.seq++
	r.at[name] = removal{seq: r.seq, at: now}
	r.order = append(r.order, removedName{name, r.seq})
	for len(r.at) > maxRemoved {
		r.popOldest()
	}
	if len(r.order) > 2*maxRemoved {
		r.compact()
	}
}

// drop forgets name's removal: it was set again.
func (r *removals) drop(name string) { delete(r.at, name) }

// names are the removals not older than removedTTL at now; older ones
// are forgotten.
func (r *removals) names(now time.Time) []string {
	for len(r.order) > 0 {
		o := r.order[0]
		if cur, ok := r.at[o.name]; ok && cur.seq == o.seq && now.Sub(cur.at) <= removedTTL {
			break
		}
		r.popOldest()
	}
	out := make([]string, 0, len(r.at))
	for name := range r.at {
		out = append(out, name)
	}
	return out
}

// popOldest forgets the oldest entry of order, and its removal if that
// entry is its current one.
func (r *removals) popOldest() {
	o := r.order[0]
	r.order = r.order[1:]
	if cur, ok := r.at[o.name]; ok && cur.seq == o.seq {
		delete(r.at, o.name)
	}
}

// compact drops the stale entries of order (names set again, or removed
// again since), which add's loop does not reach.
func (r *removals) compact() {
	kept := make([]removedName, 0, len(r.at))
	for _, o := range r.order {
		if cur, ok := r.at[o.name]; ok && cur.seq == o.seq {
			kept = append(kept, o)
		}
	}
	r.order = kept
}

// len is how many removals are remembered.
func (r *removals) len() int { return len(r.at) }
