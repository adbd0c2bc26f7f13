package admission

import (
	"context"
	"fmt"
	"time"
)

// waiter is a queued request; its class holds its place in each scope.
type waiter struct {
	id       string
	prio     int32
	didx     int32
	seq      uint64
	arrival  int64
	deadline int64 // its own; 0 if none
	// due is its key in m.deadlines: the earlier of its deadline and the
	// first moment a MaxWait of its scopes passes; 0 if neither.
	due     int64
	owner   Owner
	cands   []Candidate
	class   *class
	vt0     int64   // turn in the class's first round-robin scope
	vts     []int64 // turns in the others
	resolve func(string) ([]Candidate, error)
	notify  func(Lease, error)
	// costs are its entries in its budget scopes' heaps (budget.go).
	costs []*costEntry
}

// removeWaiterLocked takes w out of every index.
func (m *Memory) removeWaiterLocked(w *waiter) {
	delete(m.waiters, w.id)
	unindex(m.ownerWaiters, w.owner.ID, w)
	if w.didx >= 0 {
		m.deadlines.remove(int(w.didx))
	}
	m.leaveClassLocked(w)
}

// dropWaiterLocked ends w's wait with err.
func (m *Memory) dropWaiterLocked(w *waiter, o Outcome, err error) {
	now := m.nowLocked()
	m.removeWaiterLocked(w)
	m.emitLocked(Event{Outcome: o, WaiterID: w.id, Priority: w.prio, Waited: time.Duration(now - w.arrival)})
	if w.notify != nil {
		m.pending = append(m.pending, delivery{notify: w.notify, err: err})
		w.notify = nil
	}
}

// Cancel removes a queued waiter.
func (m *Memory) Cancel(ctx context.Context, waiterID string) error {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	w := m.waiters[waiterID]
	if w == nil {
		return fmt.Errorf("%w: %s", ErrNotQueued, waiterID)
	}
	m.dropWaiterLocked(w, OutcomeCancelled, ErrCancelled)
	return nil
}
