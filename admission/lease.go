package admission

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// lease is a granted candidate. It lives in a slot of m.slots, which is
// free (needs nil) once the lease is released.
type lease struct {
	id       LeaseID
	waiterID string
	candIdx  int
	needs    []need
	buf      [3]need
	pub      []Need
	tokens   int64
	cost     int64 // reserved in each of its scopes' budgets
	owner    Owner
	admitted int64
	waited   int64
	ttl      int64
	expires  int64
	eidx     int
	prio     int32
	place    uint64
	marks    []shadowMark // its would-be states in shadow scopes
}

// admitLocked grants w its class's candidate j.
func (m *Memory) admitLocked(w *waiter, j int) {
	now := m.nowLocked()
	c := w.class
	cd := c.cands[j]
	pub := &w.cands[cd.idx]
	for i, s := range c.rr {
		if vt := w.vtAt(i); vt > s.vclock && slices.ContainsFunc(cd.needs, func(n need) bool { return n.s == s }) {
			s.vclock = vt
		}
	}
	m.removeWaiterLocked(w)
	l := m.grantLocked(w.id, w.prio, w.seq, cd.idx, cd.needs, pub, w.owner, now-w.arrival)
	m.pending = append(m.pending, delivery{notify: w.notify, lease: l})
	w.notify = nil
}

func (m *Memory) grantLocked(waiterID string, prio int32, place uint64, candIdx int, needs []need, c *Candidate, owner Owner, waited int64) Lease {
	l := m.newLeaseLocked()
	l.waiterID = waiterID
	l.place = place
	l.candIdx = candIdx
	l.needs = append(l.buf[:0], needs...)
	l.pub = c.Needs
	l.tokens = c.Tokens
	l.cost = c.Cost
	l.owner = owner
	l.waited = waited
	l.prio = prio
	l.ttl = 0
	if m.shadowScopes > 0 {
		// Judged before they count it; they charge their own buckets.
		for _, n := range needs {
			if n.s.shadow != nil {
				m.shadowGrantLocked(l, n.s, n.amt, c.Tokens, c.Cost)
			}
		}
	}
	for _, n := range needs {
		s := n.s
		s.used += n.amt
		s.leases++
		s.budget.reserved += c.Cost
		if s.cfg.RPM > 0 && s.shadow == nil {
			s.rpm.add(m.nowLocked(), -1)
		}
		if s.cfg.TPM > 0 && c.Tokens > 0 && s.shadow == nil {
			s.tpm.add(m.nowLocked(), -float64(c.Tokens))
		}
		if t := int64(s.cfg.LeaseTTL); t > 0 && (l.ttl == 0 || t < l.ttl) {
			l.ttl = t
		}
	}
	// The admission time feeds hold-time figures (Event.Held and the mean
	// hold behind wait estimates). A clock read costs as much as the rest of
	// an admission on some machines, so unless the clock was read anyway it
	// is taken for one lease in 16: a sample, not a census.
	m.sampled++
	l.admitted = 0
	if m.tnow != 0 || l.ttl > 0 || m.sampled%16 == 0 {
		l.admitted = m.nowLocked()
	}
	l.expires = 0
	if l.ttl > 0 {
		l.expires = l.admitted + l.ttl
		m.expiries.push(l)
	}
	out := l.public()
	m.emitLocked(Event{Outcome: OutcomeAdmitted, WaiterID: waiterID, Priority: prio, Lease: l.id, Needs: l.pub, Waited: time.Duration(waited)})
	if len(l.marks) > 0 {
		m.shadowReportLocked(l)
	}
	return out
}

func (l *lease) public() Lease {
	out := Lease{
		ID:        l.id,
		WaiterID:  l.waiterID,
		Candidate: l.candIdx,
		Needs:     l.pub,
		Tokens:    l.tokens,
		Cost:      l.cost,
		Owner:     l.owner,
		Waited:    time.Duration(l.waited),
		Place:     l.place,
	}
	if l.expires != 0 {
		out.Expires = time.Unix(0, l.expires)
	}
	return out
}

func (m *Memory) newLeaseLocked() *lease {
	var slot uint32
	if n := len(m.freeSlots); n > 0 {
		slot = m.freeSlots[n-1]
		m.freeSlots = m.freeSlots[:n-1]
	} else {
		slot = uint32(len(m.slots))
		m.slots = append(m.slots, &lease{})
	}
	l := m.slots[slot]
	reuse := uint64(l.id>>32) + 1
	l.id = LeaseID(reuse<<32 | uint64(slot))
	l.eidx = -1
	m.nLeases++
	return l
}

func (m *Memory) leaseLocked(id LeaseID) *lease {
	slot := uint64(id) & math.MaxUint32
	if slot >= uint64(len(m.slots)) {
		return nil
	}
	if l := m.slots[slot]; l.id == id && l.needs != nil {
		return l
	}
	return nil
}

// releaseLocked is the one path by which a lease ends, whatever the cause.
func (m *Memory) releaseLocked(l *lease, o Outcome) {
	var held int64
	if l.admitted != 0 {
		held = m.nowLocked() - l.admitted
	}
	for _, n := range l.needs {
		s := n.s
		s.used -= n.amt
		s.leases--
		if l.cost != 0 {
			m.settleCostLocked(s, l.cost)
		}
		switch {
		case l.admitted == 0: // hold time not sampled
		case s.meanHold == 0:
			s.meanHold = float64(held)
		default:
			s.meanHold += (float64(held) - s.meanHold) / 16
		}
		if s.waiting.len() > 0 {
			m.markDirtyLocked(s)
		}
	}
	if l.eidx >= 0 {
		m.expiries.remove(l.eidx)
	}
	m.emitLocked(Event{Outcome: o, WaiterID: l.waiterID, Priority: l.prio, Lease: l.id, Needs: l.pub, Held: time.Duration(held)})
	if len(l.marks) > 0 || m.shadowScopes > 0 {
		m.shadowReleaseLocked(l)
	}
	l.needs = nil
	l.pub = nil
	l.waiterID = ""
	m.nLeases--
	m.freeSlots = append(m.freeSlots, uint32(uint64(l.id)&math.MaxUint32))
}

// checkOwnerLocked refuses fenced or foreign owners.
func (m *Memory) checkOwnerLocked(l *lease, owner Owner) error {
	if owner.ID != "" && m.isFencedLocked(owner) {
		return fmt.Errorf("%w: %s was fenced", ErrStaleOwner, owner)
	}
	if l != nil && l.owner != owner {
		return fmt.Errorf("%w: lease %d belongs to %s, not %s", ErrStaleOwner, l.id, l.owner, owner)
	}
	return nil
}

// Release returns a lease's capacity; a second release is a no-op.
func (m *Memory) Release(ctx context.Context, id LeaseID, owner Owner) error {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	l := m.leaseLocked(id)
	if err := m.checkOwnerLocked(l, owner); err != nil {
		return err
	}
	if l != nil {
		m.releaseLocked(l, OutcomeReleased)
	}
	return nil
}

// Renew extends a lease by its TTL.
func (m *Memory) Renew(ctx context.Context, id LeaseID, owner Owner) (time.Time, error) {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	now := m.nowLocked()
	l := m.leaseLocked(id)
	if err := m.checkOwnerLocked(l, owner); err != nil {
		return time.Time{}, err
	}
	if l == nil {
		return time.Time{}, fmt.Errorf("%w: lease %d", ErrLeaseNotHeld, id)
	}
	if l.ttl == 0 {
		return time.Time{}, nil
	}
	l.expires = now + l.ttl
	m.expiries.fix(l.eidx)
	return time.Unix(0, l.expires), nil
}

// Reconcile settles a lease's TPM and Budget reservations against what
// its work used.
func (m *Memory) Reconcile(ctx context.Context, id LeaseID, owner Owner, used Settlement) error {
	if used.Tokens < 0 || used.Cost < 0 {
		return invalidf("reconcile with %d tokens and a cost of %d", used.Tokens, used.Cost)
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	now := m.nowLocked()
	l := m.leaseLocked(id)
	if err := m.checkOwnerLocked(l, owner); err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("%w: lease %d", ErrLeaseNotHeld, id)
	}
	diff := l.tokens - used.Tokens
	l.tokens = used.Tokens
	more := used.Cost - l.cost
	l.cost = used.Cost
	for _, n := range l.needs {
		if n.s.cfg.TPM > 0 && diff < 0 && n.s.shadow != nil {
			n.s.tpm.drain(now, float64(-diff))
		} else if n.s.cfg.TPM > 0 && diff != 0 {
			n.s.tpm.add(now, float64(diff))
			if diff > 0 && n.s.waiting.len() > 0 {
				m.markDirtyLocked(n.s)
			}
		}
		n.s.budget.reserved += more
		if more < 0 && n.s.cfg.Budget > 0 && n.s.waiting.len() > 0 {
			m.markDirtyLocked(n.s)
		}
	}
	return nil
}
