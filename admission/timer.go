package admission

import "time"

// reapLocked settles what fell due by now: waiters past their deadline or
// a MaxWait, leases past their expiry, scopes whose rate limits refilled.
func (m *Memory) reapLocked(now int64) {
	for m.deadlines.len() > 0 && m.deadlines.top().due <= now {
		m.dueLocked(m.deadlines.top(), now)
	}
	for m.expiries.len() > 0 && m.expiries.top().expires <= now {
		m.releaseLocked(m.expiries.top(), OutcomeExpired)
	}
	for m.rateWakes.len() > 0 && m.rateWakes.top().rateWakeAt <= now {
		s := m.rateWakes.top()
		m.rateWakes.remove(0)
		s.rateWakeAt = 0
		// A shadow scope's wake is its would-be queue's MaxWait.
		m.shadowServeLocked(s, now)
		m.markDirtyLocked(s)
	}
}

// armLocked makes sure the timer fires by the next due event.
func (m *Memory) armLocked() {
	if m.closed {
		return
	}
	var next int64
	if m.deadlines.len() > 0 {
		next = m.deadlines.top().due
	}
	if m.expiries.len() > 0 {
		if t := m.expiries.top().expires; next == 0 || t < next {
			next = t
		}
	}
	if m.rateWakes.len() > 0 {
		if t := m.rateWakes.top().rateWakeAt; next == 0 || t < next {
			next = t
		}
	}
	if next == 0 || (m.timer != nil && m.timerAt <= next) {
		return
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	m.timerAt = next
	m.timer = m.clock.AfterFunc(time.Duration(next-m.now()), m.onTimer)
}

func (m *Memory) onTimer() {
	m.mu.Lock()
	m.timer = nil
	m.timerAt = 0
	m.reapLocked(m.now())
	m.pumpUnlockDeliver()
}
