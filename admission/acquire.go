package admission

import (
	"context"
	"fmt"
	"time"
)

// Restore re-creates a lease granted before a restart.
func (m *Memory) Restore(ctx context.Context, req Request, cand int) (Lease, error) {
	if err := req.Validate(); err != nil {
		return Lease{}, err
	}
	if cand < 0 || cand >= len(req.Candidates) {
		return Lease{}, invalidf("restore of %s names candidate %d of %d", req.ID, cand, len(req.Candidates))
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	if m.closed {
		return Lease{}, ErrClosed
	}
	if req.Owner.ID != "" && m.isFencedLocked(req.Owner) {
		return Lease{}, fmt.Errorf("%w: %s", ErrFenced, req.Owner)
	}
	c := &req.Candidates[cand]
	needs, err := m.resolveNeedsLocked(c.Needs, nil)
	if err != nil {
		return Lease{}, err
	}
	if needs == nil {
		return Lease{}, fmt.Errorf("%w: candidate %d of %s uses an orphaned scope", ErrNoCandidate, cand, req.ID)
	}
	m.seq++
	m.restoring = true
	l := m.grantLocked(req.ID, req.Priority, m.seq, cand, needs, c, req.Owner, 0)
	m.restoring = false
	return l, nil
}

// TryAcquire admits at once or fails without queueing.
func (m *Memory) TryAcquire(ctx context.Context, req Request) (Lease, error) {
	if err := req.Validate(); err != nil {
		return Lease{}, err
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	l, err, _ := m.admitNowLocked(&req, true)
	return l, err
}

// Enqueue queues a waiter; notify gets its lease or error exactly once.
func (m *Memory) Enqueue(ctx context.Context, req Request, notify func(Lease, error)) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if notify == nil {
		return invalidf("enqueue of %s without notify", req.ID)
	}
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	l, err, done := m.admitNowLocked(&req, false)
	if done {
		if err == nil {
			m.pending = append(m.pending, delivery{notify: notify, lease: l})
		}
		return err
	}
	_, err = m.queueLocked(&req, notify)
	return err
}

// Acquire waits for admission until ctx is done or the deadline passes.
func (m *Memory) Acquire(ctx context.Context, req Request) (Lease, error) {
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	if err := req.Validate(); err != nil {
		return Lease{}, err
	}
	type result struct {
		lease Lease
		err   error
	}
	m.lockSettled()
	l, err, done := m.admitNowLocked(&req, false)
	if done {
		m.pumpUnlockDeliver()
		return l, err
	}
	ch := make(chan result, 1)
	w, err := m.queueLocked(&req, func(l Lease, err error) { ch <- result{l, err} })
	m.pumpUnlockDeliver()
	if err != nil {
		return Lease{}, err
	}
	select {
	case r := <-ch:
		return r.lease, r.err
	case <-ctx.Done():
	}
	m.lockSettled()
	if m.waiters[req.ID] == w && w.notify != nil {
		m.dropWaiterLocked(w, OutcomeCancelled, ErrCancelled)
	}
	m.pumpUnlockDeliver()
	// The waiter was settled one way or the other; a lease granted while we
	// were giving up goes straight back.
	r := <-ch
	if r.err == nil {
		_ = m.Release(context.WithoutCancel(ctx), r.lease.ID, r.lease.Owner)
	}
	return Lease{}, ctx.Err()
}

// admitNowLocked tries to admit a newcomer without queueing it. done says
// whether the request was settled (admitted or refused); otherwise it must
// queue. With try set, it is always settled.
func (m *Memory) admitNowLocked(req *Request, try bool) (l Lease, err error, done bool) {
	if m.closed {
		return Lease{}, ErrClosed, true
	}
	if req.Owner.ID != "" && m.isFencedLocked(req.Owner) {
		return Lease{}, fmt.Errorf("%w: %s", ErrFenced, req.Owner), true
	}
	if len(m.waiters) > 0 {
		if _, dup := m.waiters[req.ID]; dup {
			return Lease{}, fmt.Errorf("%w: %s", ErrDuplicate, req.ID), true
		}
	}
	p := probe{prio: req.Priority, seq: m.seq + 1, fkey: req.FairnessKey}
	if place := m.placeLocked(req); place != 0 {
		p.seq = place
	}
	var buf [3]need
	rateOnly, usable, orphaned := true, false, false
	var never error // of the first candidate that can never fit
	var wake int64
	for i := range req.Candidates {
		c := &req.Candidates[i]
		needs, b, over, err := m.checkCandidateLocked(&p, c, buf[:0])
		if err != nil {
			return Lease{}, err, true
		}
		if needs == nil {
			// It touches an orphaned scope, or can never fit a TPM or a
			// budget.
			if over == nil {
				orphaned = true
			} else if never == nil {
				never = over
			}
			continue
		}
		usable = true
		if b.s == nil {
			// Bad input changes nothing, even in a candidate not taken.
			for _, rest := range req.Candidates[i+1:] {
				for _, n := range rest.Needs {
					if m.scopes[n.Scope] == nil {
						return Lease{}, fmt.Errorf("%w: %s", ErrUnknownScope, n.Scope), true
					}
				}
			}
			m.seq++
			l := m.grantLocked(req.ID, req.Priority, p.seq, i, needs, c, req.Owner, 0)
			return l, nil, true
		}
		if b.wake == 0 {
			rateOnly = false
		} else if wake == 0 || b.wake < wake {
			wake = b.wake
		}
	}
	if !usable {
		if !orphaned {
			// No candidate could ever be admitted; an orphaned one could
			// once its owner is back.
			m.emitLocked(Event{Outcome: outcomeOf(never), WaiterID: req.ID, Priority: req.Priority})
			return Lease{}, never, true
		}
		m.emitLocked(Event{Outcome: OutcomeNoCandidate, WaiterID: req.ID, Priority: req.Priority})
		return Lease{}, fmt.Errorf("%w: every candidate of %s uses an orphaned scope, or more tokens than a TPM or more cost than a budget has left", ErrNoCandidate, req.ID), true
	}
	if !try {
		return Lease{}, nil, false
	}
	if rateOnly {
		m.emitLocked(Event{Outcome: OutcomeRateLimited, WaiterID: req.ID, Priority: req.Priority})
		return Lease{}, &RateLimitedError{RetryAfter: time.Duration(wake - m.nowLocked())}, true
	}
	return Lease{}, ErrWouldWait, true
}

// queueLocked turns a newcomer that could not be admitted into a waiter.
func (m *Memory) queueLocked(req *Request, notify func(Lease, error)) (*waiter, error) {
	now := m.nowLocked()
	// Candidates whose scopes' queues are full are dropped; the class key
	// keeps each candidate's index in the request. The key is built in a
	// reused buffer and the candidates resolved only for a new class, so
	// joining an existing class allocates nothing but the waiter.
	var live uint64
	var full *scope // of the most preferred candidate a full queue dropped
	b := appendKeyHead(m.keyBuf[:0], req.FairnessKey, req.Priority)
	for i := range req.Candidates {
		c := &req.Candidates[i]
		if ok, f := m.queueableLocked(c); !ok {
			if full == nil {
				full = f
			}
			continue
		}
		live |= 1 << i
		b = appendKeyCand(b, i, c.Needs)
	}
	m.keyBuf = b
	if live == 0 {
		// admitNowLocked found a usable candidate, so a queue was full.
		m.emitLocked(Event{Outcome: OutcomeQueueFull, WaiterID: req.ID, Priority: req.Priority})
		return nil, &QueueFullError{Scope: full.name, Limit: full.cfg.QueueLimit, RetryAfter: full.waitEstimate(1)}
	}
	c := m.classes[string(b)]
	if c == nil {
		var cands []cand
		for i := range req.Candidates {
			if live&(1<<i) != 0 {
				needs, _ := m.resolveNeedsLocked(req.Candidates[i].Needs, nil)
				cands = append(cands, cand{idx: i, needs: needs})
			}
		}
		c = m.newClassLocked(string(b), req.FairnessKey, req.Priority, cands)
	}
	m.seq++
	seq := m.seq
	place := m.placeLocked(req)
	if place != 0 {
		seq = place
	}
	w := &waiter{
		id:       req.ID,
		prio:     req.Priority,
		didx:     -1,
		seq:      seq,
		arrival:  now,
		owner:    req.Owner,
		cands:    req.Candidates,
		resolve:  req.Resolve,
		notify:   notify,
		deadline: req.Deadline.UnixNano(),
	}
	if req.Deadline.IsZero() {
		w.deadline = 0
	}
	if w.deadline != 0 && w.deadline <= now {
		on := c.waitingOn()
		m.dropClassIfEmptyLocked(c)
		m.emitLocked(Event{Outcome: OutcomeTimeout, WaiterID: req.ID, Priority: req.Priority})
		return nil, &TimeoutError{Setting: SettingDeadline, WaitingOn: on.name, RetryAfter: on.waitEstimate(on.queued + 1)}
	}
	m.joinClassLocked(w, c)
	if place != 0 {
		m.takePlaceLocked(w)
	}
	m.waiters[w.id] = w
	index(m.ownerWaiters, w.owner.ID, w)
	m.scheduleLocked(w)
	m.emitLocked(Event{Outcome: OutcomeQueued, WaiterID: w.id, Priority: w.prio})
	if c.head() == w {
		m.settleLocked(c)
	}
	return w, nil
}

// placeLocked is the place in arrival order that req asks for, if the
// engine can have given it; else 0 (it arrives now).
func (m *Memory) placeLocked(req *Request) uint64 {
	if req.Place > m.seq {
		return 0
	}
	return req.Place
}

// takePlaceLocked gives w, joined at a place it asked for, its key's turn
// there in each round-robin scope: that of the first later waiter of its
// key, if there is one, so the key stays first-in-first-out (a joiner's
// turn is otherwise its key's last).
func (m *Memory) takePlaceLocked(w *waiter) {
	c := w.class
	for i, rs := range c.rr {
		if vt, ok := firstTurnAfter(rs, c.fkey, w); ok {
			w.setVT(i, vt)
		}
	}
	c.noteTurns(w)
	if c.head() == w {
		m.classHeadChangedLocked(c)
	}
}
