package admission

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// isFencedLocked reports whether o's generation has been fenced.
func (m *Memory) isFencedLocked(o Owner) bool {
	g, ok := m.fenced[o.ID]
	return ok && o.Gen <= g
}

// Fence declares an owner's generations up to gen gone.
func (m *Memory) Fence(ctx context.Context, id string, gen uint64) error {
	if id == "" {
		return invalidf("fence of an empty owner")
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	now := m.nowLocked()
	if gen > m.fenced[id] {
		m.fenced[id] = gen
	} else if _, ok := m.fenced[id]; !ok {
		m.fenced[id] = gen
	}
	gone := func(o string, g uint64) bool { return o == id && g <= gen }

	var orphaned []*scope
	for s := range m.ownedScopes[id] {
		if !s.orphaned && gone(s.cfg.Owner, s.cfg.OwnerGen) {
			s.orphaned = true
			orphaned = append(orphaned, s)
		}
	}
	slices.SortFunc(orphaned, func(a, b *scope) int { return cmp.Compare(a.name, b.name) })
	for _, l := range m.slots {
		if l.needs == nil {
			continue
		}
		hit := gone(l.owner.ID, l.owner.Gen)
		for _, n := range l.needs {
			hit = hit || (n.s.orphaned && gone(n.s.cfg.Owner, n.s.cfg.OwnerGen))
		}
		if hit {
			m.releaseLocked(l, OutcomeFenced)
		}
	}
	var owned []*waiter
	for w := range m.ownerWaiters[id] {
		if gone(w.owner.ID, w.owner.Gen) {
			owned = append(owned, w)
		}
	}
	// In arrival order, so that a replay sees the same events.
	slices.SortFunc(owned, func(a, b *waiter) int { return cmp.Compare(a.seq, b.seq) })
	for _, w := range owned {
		m.dropWaiterLocked(w, OutcomeFenced, fmt.Errorf("%w: %s", ErrFenced, w.owner))
	}
	m.reresolveLocked(now, orphaned, false)
	return nil
}

// Activate makes an owner's scopes usable again at generation gen.
func (m *Memory) Activate(ctx context.Context, id string, gen uint64) error {
	if id == "" {
		return invalidf("activate of an empty owner")
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	now := m.nowLocked()
	if m.isFencedLocked(Owner{ID: id, Gen: gen}) {
		return fmt.Errorf("%w: generation %d of %s is fenced", ErrStaleOwner, gen, id)
	}
	var active []*scope
	for s := range m.ownedScopes[id] {
		if s.cfg.Owner == id {
			s.cfg.OwnerGen = gen
			if s.orphaned {
				s.orphaned = false
				active = append(active, s)
			}
		}
	}
	m.reresolveLocked(now, active, true)
	return nil
}

// index adds v to the set of key in sets; an empty key is no owner, and
// is not indexed.
func index[V comparable](sets map[string]map[V]struct{}, key string, v V) {
	if key == "" {
		return
	}
	set := sets[key]
	if set == nil {
		set = make(map[V]struct{})
		sets[key] = set
	}
	set[v] = struct{}{}
}

// unindex takes v out of the set of key in sets, and drops a set left
// empty.
func unindex[V comparable](sets map[string]map[V]struct{}, key string, v V) {
	set := sets[key]
	if set == nil {
		return
	}
	delete(set, v)
	if len(set) == 0 {
		delete(sets, key)
	}
}
