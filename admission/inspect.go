package admission

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"
)

// QueueView is one scope's queue as an operator sees it: the first of its
// waiters in the scope's order, and the leases it holds.
type QueueView struct {
	Scope string
	// Queued counts every waiter with a candidate touching the scope;
	// Waiters holds the first of them (up to the max asked for), in order.
	Queued  int
	Waiters []WaiterView
	// Leases are the scope's held leases (up to the max asked for), oldest
	// id first; Held counts all of them.
	Held   int
	Leases []LeaseView
}

// WaiterView is one queued waiter in a QueueView.
type WaiterView struct {
	ID string
	// Position is its place in the scope's order: 1 is the next to be
	// admitted there once the scope has room (and its other scopes do).
	Position    int
	Priority    int32
	FairnessKey string
	Owner       Owner
	// Amount is what it needs of the scope.
	Amount   int64
	Arrived  time.Time
	Deadline time.Time // zero: none of its own
	// Holder: the scope keeps capacity for this waiter, passed over for
	// longer than the scope's fairness window.
	Holder bool
}

// LeaseView is one held lease in a QueueView.
type LeaseView struct {
	ID       LeaseID
	WaiterID string
	Owner    Owner
	Amount   int64
	// Admitted is when it was granted; zero when the engine did not time
	// it (see Event.Held).
	Admitted time.Time
	Expires  time.Time // zero: never
}

// Inspector is implemented by homes that can show one scope's queue in
// order. The memory home does; a home that decides elsewhere (a fleet
// replica that does not lead) may not.
type Inspector interface {
	// Queue reports scope's first max waiters in its order and up to max
	// of its leases. It costs O(classes on the scope + max × log classes)
	// for the waiters and O(leases held anywhere) for the leases, under
	// the engine's lock: an operator's look, not a per-request call.
	Queue(ctx context.Context, scope string, max int) (QueueView, error)
}

var _ Inspector = (*Memory)(nil)

// Queue implements Inspector. Each class's members are in the scope's
// order among themselves (see aheadIn), so the scope's order is a merge of
// its classes, taken head by head; a class whose turns are mixed is sorted
// first.
func (m *Memory) Queue(ctx context.Context, name string, max int) (QueueView, error) {
	if max <= 0 {
		return QueueView{}, invalidf("queue view of %d waiters", max)
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	s := m.scopes[name]
	if s == nil {
		return QueueView{}, fmt.Errorf("%w: %s", ErrUnknownScope, name)
	}
	out := QueueView{Scope: name, Queued: s.queued, Leases: []LeaseView{}, Waiters: []WaiterView{}}
	h := &mergeHeap{s: s}
	for c := range s.classes {
		cur := classCursor{c: c}
		if c.turnsMixed && s.cfg.RoundRobin {
			cur.sorted = c.members.appendTo(nil)
			slices.SortFunc(cur.sorted, func(a, b *waiter) int {
				if s.precedes(a, b) {
					return -1
				}
				return 1
			})
		} else {
			cur.i = c.members.lo
		}
		if cur.next() != nil {
			h.items = append(h.items, cur)
		}
	}
	heap.Init(h)
	for h.Len() > 0 && len(out.Waiters) < max {
		cur := &h.items[0]
		w := cur.next()
		v := WaiterView{ID: w.id, Position: len(out.Waiters) + 1, Priority: w.prio, FairnessKey: w.class.fkey,
			Owner: w.owner, Amount: w.amountIn(s), Arrived: time.Unix(0, w.arrival), Holder: s.holder == w}
		if w.deadline != 0 {
			v.Deadline = time.Unix(0, w.deadline)
		}
		out.Waiters = append(out.Waiters, v)
		cur.advance()
		if cur.next() == nil {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
	}
	for _, l := range m.slots {
		if l.needs == nil {
			continue
		}
		for _, n := range l.needs {
			if n.s != s {
				continue
			}
			out.Held++
			if len(out.Leases) < max {
				v := LeaseView{ID: l.id, WaiterID: l.waiterID, Owner: l.owner, Amount: n.amt}
				if l.admitted != 0 {
					v.Admitted = time.Unix(0, l.admitted)
				}
				if l.expires != 0 {
					v.Expires = time.Unix(0, l.expires)
				}
				out.Leases = append(out.Leases, v)
			}
		}
	}
	slices.SortFunc(out.Leases, func(a, b LeaseView) int { return cmp.Compare(a.ID&0xffffffff, b.ID&0xffffffff) })
	return out, nil
}

// classCursor walks one class's members in the scope's order: its roster
// from slot i on, or sorted when the class's turns are mixed.
type classCursor struct {
	c      *class
	i      int
	sorted []*waiter
}

func (cur *classCursor) next() *waiter {
	if cur.sorted != nil {
		if cur.i < len(cur.sorted) {
			return cur.sorted[cur.i]
		}
		return nil
	}
	slots := cur.c.members.slots
	for cur.i < len(slots) && slots[cur.i].w == nil {
		cur.i++
	}
	if cur.i < len(slots) {
		return slots[cur.i].w
	}
	return nil
}

func (cur *classCursor) advance() { cur.i++ }

// mergeHeap orders class cursors by their next member in s's order.
type mergeHeap struct {
	s     *scope
	items []classCursor
}

func (h *mergeHeap) Len() int           { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool { return h.s.precedes(h.items[i].next(), h.items[j].next()) }
func (h *mergeHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)         { h.items = append(h.items, x.(classCursor)) }
func (h *mergeHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
