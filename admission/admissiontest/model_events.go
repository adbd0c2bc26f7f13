package admissiontest

// The model's side of the engine's events, notifications and Resolve
// calls (model_state.go says what is checked).

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// ---- events ----

// Observe checks one event against the contract and applies it.
func (m *model) Observe(e admission.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	m.op.events++
	m.counts["event "+e.Outcome.String()]++
	m.events.add(fmt.Sprintf("%d @%s: %s waiter=%s lease=%d needs=%v", m.op.step, now.Sub(m.start), e.Outcome, e.WaiterID, e.Lease, e.Needs))
	// The engine settles what fell due before it decides anything else,
	// so by any event it has dropped every candidate whose MaxWait passed
	// (doing it here for a waiter it is yet to reach at this instant
	// changes no check of this event).
	m.applyMaxWait(now)
	switch e.Outcome {
	case admission.OutcomeQueued:
		w := m.waiters[e.WaiterID]
		if w == nil || w.state != waiterPending || m.op.waiter != w.id {
			m.violatef("queued event for %s, which is not being enqueued (%v)", e.WaiterID, describe(w))
			return
		}
		w.state = waiterQueued
	case admission.OutcomeAdmitted:
		m.admitted(e, now)
	case admission.OutcomeReleased, admission.OutcomeExpired:
		m.leaseEnded(e, now)
	case admission.OutcomeFenced:
		if e.Lease != 0 {
			m.leaseEnded(e, now)
		} else {
			m.waiterEnded(e, now)
		}
	case admission.OutcomeTimeout, admission.OutcomeCancelled, admission.OutcomeQueueFull, admission.OutcomeNoCandidate:
		m.waiterEnded(e, now)
	case admission.OutcomeRateLimited:
		w := m.waiters[e.WaiterID]
		if w == nil || (w.state != waiterPending && w.state != waiterQueued) {
			m.violatef("rate_limited event for %s, which is not waiting (%v)", e.WaiterID, describe(w))
		}
	case admission.OutcomeReselected:
		w := m.waiters[e.WaiterID]
		if w == nil || w.state != waiterQueued {
			m.violatef("reselected event for %s, which is not queued (%v)", e.WaiterID, describe(w))
			return
		}
		if k := m.op.kind; k == "fence" || k == "activate" {
			w.reselected = true // new candidates, from Resolve or fewer
			return
		}
		// Otherwise a MaxWait dropped some of its candidates, keeping its
		// place (no new turns): it must have some left.
		m.counts["max_wait: candidates dropped, others left"]++
		switch {
		case !w.lastMaxWait.Equal(now):
			m.violatef("reselected event for %s during %s, but no MaxWait of its candidates passed now: %s", w, m.op.kind, m.candString(w))
		case !slices.ContainsFunc(w.cands, func(c modelCandidate) bool { return !c.dropped }):
			m.violatef("reselected event for %s after a MaxWait, but it has no candidate left: %s", w, m.candString(w))
		}
	default:
		m.violatef("unknown event %v", e)
	}
}

func describe(w *modelWaiter) string {
	if w == nil {
		return "unknown waiter"
	}
	return fmt.Sprintf("%s is %s, ended %s", w, w.state, w.end)
}

func (m *model) admitted(e admission.Event, now time.Time) {
	w := m.waiters[e.WaiterID]
	if w == nil || (w.state != waiterQueued && w.state != waiterPending) {
		m.violatef("admitted %s, which is not waiting (%s)", e.WaiterID, describe(w))
		return
	}
	if w.state == waiterPending && m.op.waiter != w.id {
		m.violatef("admitted %s during another request's call", w)
	}
	if _, dup := m.leases[e.Lease]; dup || e.Lease == 0 {
		m.violatef("admitted %s with lease id %d, which was used before", w, e.Lease)
	}
	// The event names needs, not a candidate: among candidates with these
	// needs (they may differ in tokens) take the first whose tokens the TPM
	// buckets have, as the engine must.
	k := -1
	for i, c := range w.cands {
		if !w.offered(i) || !slices.Equal(c.Needs, e.Needs) {
			continue
		}
		if k < 0 {
			k = i
		}
		if m.tokensAvailable(c.Candidate, now) {
			k = i
			break
		}
	}
	if k < 0 {
		m.violatef("admitted %s with needs %v, not one of the candidates it still has %s", w, e.Needs, m.candString(w))
		return
	}
	cand := w.cands[k]
	if e.Waited != now.Sub(w.arrival) || e.Priority != w.prio {
		m.violatef("admitted event of %s says waited %s, priority %d; want %s, %d", w, e.Waited, e.Priority, now.Sub(w.arrival), w.prio)
	}
	if m.isFenced(w.owner) {
		m.violatef("admitted %s although its owner %s is fenced", w, w.owner)
	}
	if !w.deadline.IsZero() && now.After(w.deadline) {
		m.violatef("admitted %s at %s, after its deadline %s", w, now, w.deadline)
	}
	for _, n := range cand.Needs {
		s := m.scopes[n.Scope]
		if mw := s.cfg.MaxWait; mw > 0 && !now.Before(w.arrival.Add(mw)) && !w.revived {
			m.violatef("admitted %s at %s, after arrival %s + MaxWait %s of %s", w, now, w.arrival, mw, s.name)
		}
		if s.orphaned {
			m.violatef("admitted %s to orphaned scope %s", w, s.name)
		}
		if !s.room(n.Amount) {
			m.violatef("NEVER OVER: admitted %s taking %d of %s, which holds %d of limit %d", w, n.Amount, s.name, s.used, s.cfg.Limit)
		}
		if s.cfg.RPM > 0 {
			if l := s.rpm.levelAt(now); l < 1-1e-9 {
				m.violatef("admitted %s to %s with %.6f of RPM %d left", w, s.name, l, s.cfg.RPM)
			}
		}
		if s.cfg.TPM > 0 && cand.Tokens > 0 {
			if l := s.tpm.levelAt(now); l < float64(cand.Tokens)-1e-6 {
				m.violatef("admitted %s reserving %d tokens in %s with %.6f of TPM %d left", w, cand.Tokens, s.name, l, s.cfg.TPM)
			}
		}
	}

	// A hold: a newcomer admitted before anything else happened in the
	// operation, with no higher priority than any waiter the hold can be
	// for, uses only what is beyond the hold (doc.go "Order").
	if w.state == waiterPending && m.op.events == 1 {
		for _, n := range cand.Needs {
			s := m.scopes[n.Scope]
			h := m.heldAtStart[s.name]
			if h == 0 || s.cfg.Limit == 0 {
				continue
			}
			m.counts["hold: newcomers admitted to a scope with a hold"]++
			outranks := false
			for _, x := range m.holdCandidates(s, now) {
				outranks = outranks || w.prio > x.prio
			}
			if !outranks && !s.room(n.Amount+h) {
				m.violatef("HOLD: admitted newcomer %s taking %d of %s (%d of %d used) into the %d held for a waiter passed over", w, n.Amount, s.name, s.used, s.cfg.Limit, h)
			}
		}
	}

	ord := m.orders()
	for j := range k {
		if m.fitsSurely(w, j, nil, ord, now) {
			m.violatef("PREFERENCE: admitted %s to candidate %d %v although its earlier candidate %d %v fits (%s)%s", w, k, cand.Needs, j, w.cands[j].Needs, m.usage(w.cands[j].Needs), m.reselectNote(w.cands[j].Needs, w))
		}
	}
	for _, n := range cand.Needs {
		s := m.scopes[n.Scope]
		if fw := s.cfg.FairnessWindow; fw > 0 && w.state == waiterQueued && now.Sub(w.arrival) >= fw {
			continue // w may be s's hold holder, which may use its hold
		}
		for _, x := range m.queuedWaiters() {
			if x == w || !m.precedes(x, w, s) || !m.touches(x, s.name) {
				continue
			}
			m.counts["order: earlier waiter in a scope taken"]++
			if !m.blockedOnlyBy(x, s, ord, now) {
				continue
			}
			m.counts["order: earlier waiter blocked by that scope alone"]++
			if before := m.blockedBefore[blockKey{x, s.name}]; !m.lenient || before {
				note := m.reselectNote([]admission.Need{n}, w, x)
				if !before {
					note += fmt.Sprintf(" (note: when this operation began %s also waited for another scope; an engine that re-parks it only when that scope is handed on fails like this — compare with %s)", x.id, m.lenientFlag)
				}
				m.violatef("ORDER: admitted %s to %s (taking %d, %d of %d used) past %s, which precedes it there and waits for %s alone (candidates %s)%s",
					w, s.name, n.Amount, s.used, s.cfg.Limit, x, s.name, m.candString(x), note)
			}
		}
	}

	// Apply.
	l := &modelLease{
		id: e.Lease, waiter: w.id, needs: cand.Needs, tokens: cand.Tokens, granted: cand.Tokens,
		candIdx: k, owner: w.owner, admitted: now, live: true,
	}
	for _, n := range cand.Needs {
		s := m.scopes[n.Scope]
		s.used += n.Amount
		s.leases++
		s.rpm.add(now, -1)
		if cand.Tokens > 0 {
			s.tpm.add(now, -float64(cand.Tokens))
		}
		if t := s.cfg.LeaseTTL; t > 0 && (l.ttl == 0 || t < l.ttl) {
			l.ttl = t
		}
	}
	if l.ttl > 0 {
		l.expires = now.Add(l.ttl)
	}
	l.expires0 = l.expires
	m.leases[l.id] = l
	m.live = append(m.live, l.id)
	w.state, w.end, w.lease = waiterEnded, admission.OutcomeAdmitted, l.id
	m.changed = append(m.changed, w)
}

// recentlyChanged returns the waiters changed since the last call.
func (m *model) recentlyChanged() []*modelWaiter {
	out := m.changed
	m.changed = nil
	return out
}

func (m *model) leaseEnded(e admission.Event, now time.Time) {
	l := m.leases[e.Lease]
	if l == nil {
		m.violatef("%s event for lease %d, which was never admitted", e.Outcome, e.Lease)
		return
	}
	if !l.live {
		m.violatef("EXACTLY ONCE: %s event for lease %d, which already ended %s", e.Outcome, e.Lease, l.end)
		return
	}
	// Held is zero when the engine did not time the lease (admission.go).
	if !slices.Equal(e.Needs, l.needs) || e.WaiterID != l.waiter || (e.Held != 0 && e.Held != now.Sub(l.admitted)) {
		m.violatef("%s event for lease %d says waiter %s, needs %v, held %s; want %s, %v, %s", e.Outcome, l.id, e.WaiterID, e.Needs, e.Held, l.waiter, l.needs, now.Sub(l.admitted))
	}
	switch e.Outcome {
	case admission.OutcomeReleased:
		if !(m.op.kind == "release" && m.op.lease == l.id) && !(m.op.kind == "fence" && m.fencedBy(l)) {
			m.violatef("lease %d of %s released during %s", l.id, l.waiter, m.op.kind)
		}
	case admission.OutcomeExpired:
		if l.ttl == 0 || now.Before(l.expires) {
			m.violatef("lease %d of %s expired at %s, its expiry is %s (ttl %s)", l.id, l.waiter, now, l.expires, l.ttl)
		}
	case admission.OutcomeFenced:
		if m.op.kind != "fence" || !m.fencedBy(l) {
			m.violatef("lease %d of %s (owner %s, needs %v) fenced during %s %s@%d", l.id, l.waiter, l.owner, l.needs, m.op.kind, m.op.owner, m.op.gen)
		}
	}
	l.live, l.end = false, e.Outcome
	for _, n := range l.needs {
		s := m.scopes[n.Scope]
		s.used -= n.Amount
		s.leases--
	}
	m.ended = append(m.ended, l.id)
	if len(m.ended) > 64 {
		m.ended = m.ended[len(m.ended)-64:]
	}
}

// fencedBy reports whether the Fence in progress covers lease l.
func (m *model) fencedBy(l *modelLease) bool {
	if l.owner.ID == m.op.owner && l.owner.Gen <= m.op.gen {
		return true
	}
	for _, n := range l.needs {
		if s := m.scopes[n.Scope]; s.orphaned && s.cfg.Owner == m.op.owner && s.cfg.OwnerGen <= m.op.gen {
			return true
		}
	}
	return false
}

func (m *model) waiterEnded(e admission.Event, now time.Time) {
	w := m.waiters[e.WaiterID]
	if w == nil || (w.state != waiterQueued && w.state != waiterPending) {
		m.violatef("%s event for %s, which is not waiting (%s)", e.Outcome, e.WaiterID, describe(w))
		return
	}
	if w.state == waiterQueued && e.Waited != now.Sub(w.arrival) {
		m.violatef("%s event of %s says waited %s; it arrived %s ago", e.Outcome, w, e.Waited, now.Sub(w.arrival))
	}
	switch e.Outcome {
	case admission.OutcomeTimeout:
		w.wantTimeout = &admission.TimeoutError{Waited: now.Sub(w.arrival)}
		if !w.deadline.IsZero() && !now.Before(w.deadline) {
			w.wantTimeout.Setting = admission.SettingDeadline
			w.wantTimeout.Value = w.deadline.Sub(w.arrival)
			break
		}
		w.wantTimeout.Setting = admission.SettingMaxWait
		m.counts["max_wait: waiters timed out, no candidate left"]++
		switch {
		case slices.ContainsFunc(w.cands, func(c modelCandidate) bool { return !c.dropped }):
			m.violatef("%s timed out at %s, before its deadline %s and with candidates left: %s", w, now, w.deadline, m.candString(w))
		case !w.lastMaxWait.Equal(now):
			m.violatef("%s timed out at %s, before its deadline %s, but no MaxWait dropped a candidate now: %s", w, now, w.deadline, m.candString(w))
		}
	case admission.OutcomeCancelled:
		if m.op.kind != "cancel" || m.op.waiter != w.id {
			m.violatef("%s cancelled during %s %s", w, m.op.kind, m.op.waiter)
		}
	case admission.OutcomeFenced:
		if m.op.kind != "fence" || !m.isFenced(w.owner) {
			m.violatef("%s (owner %s) fenced during %s %s@%d", w, w.owner, m.op.kind, m.op.owner, m.op.gen)
		}
	case admission.OutcomeQueueFull:
		if w.state != waiterPending {
			m.violatef("%s failed queue_full after it was queued", w)
		}
	case admission.OutcomeNoCandidate:
		if k := m.op.kind; !(k == "fence" || k == "activate" || m.op.waiter == w.id) {
			m.violatef("%s failed no_candidate during %s", w, k)
		}
	}
	w.state, w.end = waiterEnded, e.Outcome
	m.changed = append(m.changed, w)
}

// outcomeErr is the error a waiter's notify must carry for its end.
func outcomeErr(o admission.Outcome) error {
	switch o {
	case admission.OutcomeTimeout:
		return admission.ErrTimeout
	case admission.OutcomeCancelled:
		return admission.ErrCancelled
	case admission.OutcomeFenced:
		return admission.ErrFenced
	case admission.OutcomeQueueFull:
		return admission.ErrQueueFull
	case admission.OutcomeNoCandidate:
		return admission.ErrNoCandidate
	}
	return nil
}

// notifier is the notify func for waiter id.
func (m *model) notifier(id string) func(admission.Lease, error) {
	return func(l admission.Lease, err error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		defer func() {
			select {
			case m.kick <- struct{}{}:
			default:
			}
		}()
		w := m.waiters[id]
		w.notified++
		m.changed = append(m.changed, w)
		m.events.add(fmt.Sprintf("%d: notify %s lease=%d err=%v", m.op.step, id, l.ID, err))
		switch {
		case w.notified > 1:
			m.violatef("EXACTLY ONCE: %s notified %d times (now lease %d, err %v)", w, w.notified, l.ID, err)
			return
		case w.state == waiterRefused:
			m.violatef("%s notified (lease %d, err %v) although its Enqueue failed", w, l.ID, err)
			return
		case w.state != waiterEnded:
			m.violatef("%s notified (lease %d, err %v) while %s, before any end event", w, l.ID, err, w.state)
			return
		}
		if w.end != admission.OutcomeAdmitted {
			if want := outcomeErr(w.end); err == nil || !errors.Is(err, want) {
				m.violatef("%s ended %s but was notified lease %d, err %v", w, w.end, l.ID, err)
			}
			if w.end == admission.OutcomeTimeout {
				m.checkTimeoutError(w, err)
			}
			return
		}
		if err != nil {
			m.violatef("%s was admitted (lease %d) but notified err %v", w, w.lease, err)
			return
		}
		m.checkLease(w, l)
	}
}

// checkTimeoutError checks that a timeout's error names the limit that
// fired: w's own deadline, or the MaxWait of a scope of a candidate that a
// MaxWait dropped.
func (m *model) checkTimeoutError(w *modelWaiter, err error) {
	var te *admission.TimeoutError
	want := w.wantTimeout
	if !errors.As(err, &te) || want == nil {
		m.violatef("%s timed out with %v, not a *TimeoutError", w, err)
		return
	}
	ok := te.Setting == want.Setting && te.Waited == want.Waited && te.RetryAfter >= 0 && te.WaitingOn != ""
	switch want.Setting {
	case admission.SettingDeadline:
		ok = ok && te.Scope == "" && te.Value == want.Value
	default:
		s := m.scopes[te.Scope]
		named := slices.ContainsFunc(w.cands, func(c modelCandidate) bool {
			return c.maxWaited && slices.ContainsFunc(c.Needs, func(n admission.Need) bool { return n.Scope == te.Scope })
		})
		ok = ok && s != nil && named && te.Value == s.cfg.MaxWait && !w.arrival.Add(s.cfg.MaxWait).After(m.clk.Now())
	}
	if !ok {
		m.violatef("%s timed out with %+v; want setting %s, waited %s, value %s, and a scope whose MaxWait dropped one of its candidates %s",
			w, *te, want.Setting, want.Waited, want.Value, m.candString(w))
	}
}

// passedScope is the first scope of c whose MaxWait, counted from w's
// arrival, has passed by now; nil if none has.
func (m *model) passedScope(w *modelWaiter, c admission.Candidate, now time.Time) *modelScope {
	for _, n := range c.Needs {
		if s := m.scopes[n.Scope]; s.cfg.MaxWait > 0 && !w.arrival.Add(s.cfg.MaxWait).After(now) {
			return s
		}
	}
	return nil
}

// applyMaxWait drops every queued waiter's candidates whose MaxWait has
// passed by now.
func (m *model) applyMaxWait(now time.Time) {
	for _, w := range m.queuedWaiters() {
		for i := range w.cands {
			c := &w.cands[i]
			if !c.dropped && m.passedScope(w, c.Candidate, now) != nil {
				c.dropped, c.queueFull, c.maxWaited = true, false, true
				w.lastMaxWait = now
			}
		}
	}
}

// newCandidate is c as a waiter arriving (or resolving) now has it: dropped
// if it uses an orphaned scope or reserves more tokens than a TPM before
// that; a full queue is the caller's to check.
func (m *model) newCandidate(c admission.Candidate) modelCandidate {
	mc := modelCandidate{Candidate: c}
	for _, n := range c.Needs {
		s := m.scopes[n.Scope]
		if s.orphaned {
			mc.dropped = true
			return mc
		}
		if s.cfg.TPM > 0 && c.Tokens > s.cfg.TPM {
			mc.dropped, mc.tooMany, mc.overScope = true, true, s.name
			return mc
		}
	}
	return mc
}

// checkLease compares a Lease handed out for w with the model's.
func (m *model) checkLease(w *modelWaiter, got admission.Lease) {
	ml := m.leases[w.lease]
	want := admission.Lease{
		ID: ml.id, WaiterID: w.id, Candidate: ml.candIdx, Needs: ml.needs, Tokens: ml.granted,
		Owner: ml.owner, Waited: ml.admitted.Sub(w.arrival), Expires: ml.expires0,
	}
	if got.ID != want.ID || got.WaiterID != want.WaiterID || got.Candidate != want.Candidate ||
		!slices.Equal(got.Needs, want.Needs) || got.Tokens != want.Tokens || got.Owner != want.Owner ||
		got.Waited != want.Waited || !got.Expires.Equal(want.Expires) {
		m.violatef("lease handed to %s is %+v, want %+v", w, got, want)
	}
}

// resolver is the Resolve func of waiter id: it answers with candidates
// drawn from gen and records them.
func (m *model) resolver(id string, gen func() []admission.Candidate) func(string) ([]admission.Candidate, error) {
	return func(got string) ([]admission.Candidate, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		w := m.waiters[id]
		if got != id {
			m.violatef("Resolve of %s called with id %q", id, got)
		}
		if k := m.op.kind; k != "fence" && k != "activate" {
			m.violatef("Resolve of %s called during %s", id, k)
		}
		cands := gen()
		m.events.add(fmt.Sprintf("%d: resolve %s -> %v", m.op.step, id, cands))
		if w.state != waiterQueued {
			m.violatef("Resolve of %s called while it is %s", w, w.state)
			return cands, nil
		}
		w.resolved++
		w.cands = w.cands[:0]
		for _, c := range cands {
			w.cands = append(w.cands, m.newCandidate(c))
		}
		return cands, nil
	}
}

func (m *model) usesOrphaned(c admission.Candidate) bool {
	for _, n := range c.Needs {
		if m.scopes[n.Scope].orphaned {
			return true
		}
	}
	return false
}

func (m *model) candString(w *modelWaiter) string {
	var b strings.Builder
	for i, c := range w.cands {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%v", i, c.Needs)
		if c.Tokens > 0 {
			fmt.Fprintf(&b, "+%dtok", c.Tokens)
		}
		switch {
		case c.maxWaited:
			b.WriteString("(dropped: max wait)")
		case c.tooMany:
			b.WriteString("(dropped: tokens)")
		case c.queueFull:
			b.WriteString("(dropped: queue full)")
		case c.dropped:
			b.WriteString("(dropped)")
		}
	}
	return b.String()
}

// ring keeps the last max strings.
type ring struct {
	max  int
	next int
	buf  []string
}

func (r *ring) add(s string) {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % r.max
}

func (r *ring) String() string {
	var b strings.Builder
	for i := range r.buf {
		b.WriteString("\t")
		b.WriteString(r.buf[(r.next+i)%len(r.buf)])
		b.WriteString("\n")
	}
	return b.String()
}
