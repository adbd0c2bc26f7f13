package admissiontest

// The checks a model run makes after every operation, and the wind-down
// that ends a run.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// ---- checks ----

// check compares the engine with the model after a step.
func (r *runner) check() {
	r.tb.Helper()
	stats := make(map[string]admission.ScopeStats, len(allScopes))
	r.begin(op{kind: "stats"})
	for _, name := range allScopes {
		st, err := r.eng.Scope(r.ctx, name)
		if err != nil {
			r.fatalf("Scope(%s): %v", name, err)
		}
		stats[name] = st
	}
	if n := r.end(); n != 0 {
		r.fatalf("reading ScopeStats caused %d events", n)
	}
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	r.failOnViolationsLocked()
	now := r.clk.Now()
	// Whatever MaxWait passed by now has dropped its candidates; Queued
	// below shows whether the engine agrees.
	m.applyMaxWait(now)
	counts := m.queuedCounts()
	for _, name := range allScopes {
		st, s := stats[name], m.scopes[name]
		r.held[name] = st.Held
		m.heldAtStart[name] = st.Held
		if st.Held > 0 {
			m.counts["steps with a fairness hold in force"]++
			r.checkHoldLocked(s, st.Held, now)
		}
		queued := counts[name]
		switch {
		case st.Name != name || st.Config.Limit != s.cfg.Limit || st.Config.OwnerGen != s.cfg.OwnerGen:
			m.violatef("Scope(%s) reports %q with config %+v; the model has %+v", name, st.Name, st.Config, s.cfg)
		case st.Used != s.used || st.Leases != s.leases:
			m.violatef("Scope(%s) reports Used %d in %d leases; the model's live leases hold %d in %d", name, st.Used, st.Leases, s.used, s.leases)
		case st.Queued != queued:
			m.violatef("Scope(%s) reports Queued %d; the model has %d waiters with a candidate there", name, st.Queued, queued)
		case s.cfg.QueueLimit > 0 && st.Queued > s.cfg.QueueLimit && !m.lenient:
			m.violatef("Scope(%s) has %d queued, over its QueueLimit %d", name, st.Queued, s.cfg.QueueLimit)
		case st.Orphaned != s.orphaned:
			m.violatef("Scope(%s) reports Orphaned %v; the model says %v", name, st.Orphaned, s.orphaned)
		case st.Held < 0 || (s.cfg.FairnessWindow == 0 && st.Held != 0):
			m.violatef("Scope(%s) reports Held %d (limit %d, fairness window %s)", name, st.Held, s.cfg.Limit, s.cfg.FairnessWindow)
		case s.cfg.RPM > 0 && math.Abs(st.RPMAvailable-s.rpm.levelAt(now)) > bucketTolerance:
			m.violatef("Scope(%s) reports %.9f RPM tokens; the model's bucket has %.9f", name, st.RPMAvailable, s.rpm.levelAt(now))
		case s.cfg.TPM > 0 && math.Abs(st.TPMAvailable-s.tpm.levelAt(now)) > bucketTolerance*float64(s.cfg.TPM):
			m.violatef("Scope(%s) reports %.9f TPM tokens; the model's bucket has %.9f", name, st.TPMAvailable, s.tpm.levelAt(now))
		}
	}
	for _, l := range m.liveLeases() {
		switch {
		case !l.expires.IsZero() && l.expires.Before(now):
			m.violatef("lease %d of %s is live at %s, past its expiry %s", l.id, l.waiter, now, l.expires)
		case m.isFenced(l.owner):
			m.violatef("lease %d of %s is live, but its owner %s is fenced", l.id, l.waiter, l.owner)
		case m.usesOrphaned(admission.Candidate{Needs: l.needs}):
			m.violatef("lease %d of %s is live in an orphaned scope: %v", l.id, l.waiter, l.needs)
		}
	}
	queued := m.queuedWaiters()
	ord := m.orders()
	for _, w := range queued {
		offered := false
		for i := range w.cands {
			offered = offered || w.offered(i)
		}
		switch {
		case !w.deadline.IsZero() && w.deadline.Before(now):
			m.violatef("%s is still queued at %s, past its deadline %s", w, now, w.deadline)
		case m.isFenced(w.owner):
			m.violatef("%s is still queued, but its owner %s is fenced", w, w.owner)
		case !offered:
			m.violatef("%s is still queued with no candidate left: %s", w, r.candString(w))
		}
		for i := range w.cands {
			m.counts["prompt: queued candidates checked"]++
			if w.offered(i) && m.roomEverywhere(w.cands[i].Candidate) && !m.rateEverywhere(w.cands[i].Candidate, now) {
				m.counts["prompt: candidates waiting for a rate limit alone"]++
			}
			if m.fitsSurely(w, i, r.held, ord, now) {
				m.violatef("PROMPT: %s is still queued, but its candidate %d %v fits now (%s)%s", w, i, w.cands[i].Needs, m.usage(w.cands[i].Needs), m.reselectNote(w.cands[i].Needs, w))
			}
		}
	}
	r.failOnViolationsLocked()
	r.checkNotifiesLocked(false)
	m.noteBlocked(now)
}

// checkHoldLocked checks that a hold of held in s is for a waiter passed
// over for s's fairness window: one that touches s, has waited that long,
// and needs held of s in a candidate it still has.
func (r *runner) checkHoldLocked(s *modelScope, held int64, now time.Time) {
	m := r.m
	for _, x := range m.holdCandidates(s, now) {
		for i, c := range x.cands {
			if x.offered(i) && slices.Contains(c.Needs, admission.Need{Scope: s.name, Amount: held}) {
				return
			}
		}
	}
	m.violatef("Scope(%s) holds %d, but no queued waiter that has waited its fairness window %s needs that much of it", s.name, held, s.cfg.FairnessWindow)
}

func (r *runner) failOnViolationsLocked() {
	r.tb.Helper()
	if v := r.m.violations; len(v) > 0 {
		r.fatalf("%s", strings.Join(v, "\n\t"))
	}
}

// checkNotifiesLocked checks that every waiter that ended was notified
// exactly once, and that no other was. Only the waiters that changed since
// the last check are looked at, unless all is set. Notifications are
// synchronous in the memory engine, but the contract only says they come
// after the lock is released, so a missing one is waited for, briefly.
func (r *runner) checkNotifiesLocked(all bool) {
	r.tb.Helper()
	m := r.m
	var ws []*modelWaiter
	if all {
		for _, w := range m.waiters {
			ws = append(ws, w)
		}
	} else {
		ws = m.recentlyChanged()
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, w := range ws {
		if w == nil {
			continue
		}
		want := 0
		if w.enqueued && !w.try && w.state == waiterEnded {
			want = 1
		}
		for w.notified < want && time.Now().Before(deadline) {
			m.mu.Unlock()
			select {
			case <-m.kick:
			case <-time.After(time.Until(deadline)):
			}
			m.mu.Lock()
		}
		if w.notified != want {
			r.fatalf("%s (%s, %s, enqueued %v) was notified %d times, want %d", w, w.state, w.end, w.enqueued, w.notified, want)
		}
	}
}

// quiesce cancels every waiter and releases every lease until nothing is
// left, lets the clock run until every bucket is full, and checks that the
// engine is empty.
func (r *runner) quiesce() {
	m := r.m
	for round := 0; ; round++ {
		if round > 1000 {
			r.fatalf("quiescence: waiters and leases keep coming back")
		}
		m.mu.Lock()
		q, live := m.queuedWaiters(), m.liveLeases()
		m.mu.Unlock()
		if len(q) == 0 && len(live) == 0 {
			break
		}
		for _, w := range q {
			m.mu.Lock()
			still := w.state == waiterQueued
			m.mu.Unlock()
			if still {
				r.step++
				r.cancel(w.id, w)
				r.check()
			}
		}
		for _, l := range live {
			m.mu.Lock()
			still := l.live
			m.mu.Unlock()
			if still {
				r.step++
				r.release(l)
				r.check()
			}
		}
	}
	m.mu.Lock()
	wait := time.Minute
	now := r.clk.Now()
	for _, s := range m.scopes {
		for _, b := range []*modelBucket{&s.rpm, &s.tpm} {
			if b.perMinute > 0 {
				missing := float64(b.perMinute) - b.levelAt(now)
				wait = max(wait, time.Duration(missing/float64(b.perMinute)*float64(time.Minute))+time.Minute)
			}
		}
	}
	m.mu.Unlock()
	r.step++
	r.logf("quiesce: Advance %s", wait)
	r.advance(wait)
	r.check()
	for _, name := range allScopes {
		st, err := r.eng.Scope(r.ctx, name)
		if err != nil {
			r.fatalf("Scope(%s): %v", name, err)
		}
		if st.Used != 0 || st.Leases != 0 || st.Queued != 0 || st.Held != 0 ||
			st.RPMAvailable != float64(st.Config.RPM) || st.TPMAvailable != float64(st.Config.TPM) {
			r.fatalf("quiescence: Scope(%s) = %+v, want nothing used, held or queued and full buckets", name, st)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.waiters {
		if w.state == waiterQueued || w.state == waiterPending {
			r.fatalf("quiescence: %s is still %s", w, w.state)
		}
	}
	for _, l := range m.leases {
		if l.live {
			r.fatalf("quiescence: lease %d is still live", l.id)
		}
	}
	r.checkNotifiesLocked(true)
	keys := make([]string, 0, len(m.counts))
	for k := range m.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n\t%s: %d", k, m.counts[k])
	}
	r.tb.Logf("%s: %d operations, clock at +%s; exercised:%s", r.name, r.step, r.clk.Now().Sub(modelStart), b.String())
}
