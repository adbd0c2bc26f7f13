package admissiontest

// The operations a model run draws from, each checked against the model
// as it returns (model.go runs them).

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// ---- requests ----

// genCandidates draws 1–3 candidates of 1–3 distinct scopes from names.
func genCandidates(c chooser, names []string) []admission.Candidate {
	n := 1 + c.intn(3)
	out := make([]admission.Candidate, 0, n)
	for range n {
		k := 1 + c.intn(3)
		var cand admission.Candidate
		if c.intn(3) == 0 && slices.Contains(names, "global") {
			cand.Needs = append(cand.Needs, admission.Need{Scope: "global", Amount: int64(1 + c.intn(2))})
		}
		for len(cand.Needs) < k {
			// Draw from the scopes not taken yet, so that a chooser that
			// has run dry (always 0) still terminates.
			var left []string
			for _, name := range names {
				if !slices.ContainsFunc(cand.Needs, func(x admission.Need) bool { return x.Scope == name }) {
					left = append(left, name)
				}
			}
			name := left[c.intn(len(left))]
			var amt int64
			switch x := c.intn(20); {
			case x == 0:
				amt = 0
			case x < 12:
				amt = 1
			case x < 18:
				amt = 2
			default:
				amt = 3
			}
			cand.Needs = append(cand.Needs, admission.Need{Scope: name, Amount: amt})
			if name == "pm:tpm" {
				cand.Tokens = int64(c.intn(301))
				if c.intn(40) == 0 {
					cand.Tokens = 601 + int64(c.intn(100)) // more than its TPM ever holds
				}
			}
		}
		out = append(out, cand)
	}
	return out
}

func usesNode(cands []admission.Candidate) bool {
	for _, c := range cands {
		for _, n := range c.Needs {
			if strings.HasPrefix(n.Scope, "node:") {
				return true
			}
		}
	}
	return false
}

// activeOwnersLocked lists the owners not fenced at their generation.
func (r *runner) activeOwnersLocked() []admission.Owner {
	var out []admission.Owner
	for _, id := range modelOwners {
		o := admission.Owner{ID: id, Gen: r.m.owners[id].gen}
		if !r.m.isFenced(o) {
			out = append(out, o)
		}
	}
	return out
}

// newRequest draws a request and registers its waiter as pending. ok is
// false when no owner is active.
func (r *runner) newRequest() (admission.Request, *modelWaiter, bool) {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	owners := r.activeOwnersLocked()
	if len(owners) == 0 {
		return admission.Request{}, nil, false
	}
	now := r.clk.Now()
	r.nextID++
	m.seq++
	req := admission.Request{
		ID:          fmt.Sprintf("w%d", r.nextID),
		Priority:    int32(r.src.intn(3)),
		FairnessKey: fmt.Sprintf("t%d", r.src.intn(3)),
		Owner:       owners[r.src.intn(len(owners))],
		Candidates:  genCandidates(r.src, allScopes),
	}
	if r.src.intn(10) >= 4 {
		req.Deadline = now.Add(time.Duration(1+r.src.intn(90))*time.Second + time.Duration(r.src.intn(1000))*time.Millisecond)
	}
	w := &modelWaiter{
		id: req.ID, seq: m.seq, prio: req.Priority, key: req.FairnessKey, owner: req.Owner,
		arrival: now, deadline: req.Deadline, orig: req.Candidates,
	}
	for _, c := range req.Candidates {
		mc := m.newCandidate(c)
		for _, n := range c.Needs {
			s := m.scopes[n.Scope]
			if !mc.dropped && s.cfg.QueueLimit > 0 && m.queuedCount(s.name) >= s.cfg.QueueLimit {
				mc.dropped, mc.queueFull, mc.fullScope = true, true, s.name
			}
		}
		w.cands = append(w.cands, mc)
	}
	if usesNode(req.Candidates) && r.src.intn(2) == 0 {
		rng := randChooser{rand.New(rand.NewPCG(uint64(r.src.intn(1<<16)), uint64(r.nextID)))}
		req.Resolve = m.resolver(w.id, func() []admission.Candidate { return genCandidates(rng, resolveScopes) })
		w.hasResolve = true
	}
	m.waiters[w.id] = w
	m.queued = append(m.queued, w)
	return req, w, true
}

func (r *runner) opEnqueue() {
	req, w, ok := r.newRequest()
	if !ok {
		r.opActivate()
		return
	}
	r.logf("Enqueue %s prio=%d key=%s owner=%s deadline=%s resolve=%v cands=%s", w.id, w.prio, w.key, w.owner,
		fmtDeadline(w.deadline, r.clk.Now()), w.hasResolve, r.candString(w))
	r.begin(op{kind: "enqueue", waiter: w.id})
	err := r.eng.Enqueue(r.ctx, req, r.m.notifier(w.id))
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	r.endLocked()
	// Refusals: every candidate dropped, a full queue's for the first it
	// dropped; with none usable at all, too many tokens for every one.
	allDropped, noneUsable, anyOrphaned := true, true, false
	var full, over *modelCandidate
	for i := range w.cands {
		c := &w.cands[i]
		allDropped = allDropped && c.dropped
		noneUsable = noneUsable && c.dropped && !c.queueFull
		anyOrphaned = anyOrphaned || (c.dropped && !c.queueFull && !c.tooMany)
		if c.queueFull && full == nil {
			full = c
		}
		if c.tooMany && over == nil {
			over = c
		}
	}
	if err != nil {
		switch {
		case w.state == waiterQueued || (w.state == waiterEnded && w.end == admission.OutcomeAdmitted):
			m.violatef("Enqueue of %s returned %v, but it is %s (%s)", w, err, w.state, w.end)
		case w.state == waiterPending:
			m.violatef("Enqueue of %s returned %v without an event", w, err)
		case !errors.Is(err, outcomeErr(w.end)):
			m.violatef("Enqueue of %s returned %v after a %s event", w, err, w.end)
		case errors.Is(err, admission.ErrNoCandidate) && !noneUsable:
			m.violatef("Enqueue of %s returned %v, but not all its candidates use orphaned scopes or too many tokens: %s", w, err, r.candString(w))
		case errors.Is(err, admission.ErrNoCandidate) && !anyOrphaned:
			var te *admission.TokenLimitError
			s := m.scopes[over.overScope]
			if !errors.As(err, &te) || te.Scope != s.name || te.TPM != s.cfg.TPM || te.Tokens != over.Tokens {
				m.violatef("Enqueue of %s returned %v; want a *TokenLimitError for %d tokens in %s: %s", w, err, over.Tokens, s.name, r.candString(w))
			}
			m.counts["tokens: requests refused, too many for every candidate"]++
		case errors.Is(err, admission.ErrQueueFull) && !allDropped:
			m.violatef("Enqueue of %s returned %v, but it has a candidate whose queues have room: %s", w, err, r.candString(w))
		case errors.Is(err, admission.ErrQueueFull):
			var qe *admission.QueueFullError
			if s := m.scopes[full.fullScope]; !errors.As(err, &qe) || qe.Scope != s.name || qe.Limit != s.cfg.QueueLimit || qe.RetryAfter < 0 {
				m.violatef("Enqueue of %s returned %v; want a *QueueFullError for %s (queue_limit %d): %s", w, err, s.name, s.cfg.QueueLimit, r.candString(w))
			}
		}
		w.state = waiterRefused
		m.changed = append(m.changed, w)
		return
	}
	w.enqueued = true
	switch {
	case w.state == waiterPending:
		m.violatef("Enqueue of %s returned nil without a queued or admitted event", w)
		w.state = waiterQueued
	case w.state == waiterQueued && allDropped:
		m.violatef("Enqueue of %s queued it, but every candidate is dropped: %s", w, r.candString(w))
	}
}

func fmtDeadline(d, now time.Time) string {
	if d.IsZero() {
		return "none"
	}
	return "+" + d.Sub(now).String()
}

func (r *runner) candString(w *modelWaiter) string { return r.m.candString(w) }

func (r *runner) opTryAcquire() {
	req, w, ok := r.newRequest()
	if !ok {
		r.opActivate()
		return
	}
	m := r.m
	m.mu.Lock()
	w.try = true
	req.Resolve = nil
	w.hasResolve = false
	fit := -1
	ord := m.orders()
	for i := range w.cands {
		if m.fitsSurely(w, i, r.held, ord, r.clk.Now()) {
			fit = i
			break
		}
	}
	m.mu.Unlock()
	r.logf("TryAcquire %s prio=%d key=%s owner=%s cands=%s (candidate %d surely fits)", w.id, w.prio, w.key, w.owner, r.candString(w), fit)
	r.begin(op{kind: "try", waiter: w.id})
	l, err := r.eng.TryAcquire(r.ctx, req)
	m.mu.Lock()
	defer m.mu.Unlock()
	r.endLocked()
	if err == nil {
		if w.state != waiterEnded || w.end != admission.OutcomeAdmitted {
			m.violatef("TryAcquire of %s returned lease %d without an admitted event", w, l.ID)
			return
		}
		m.checkLease(w, l)
		return
	}
	if w.state == waiterEnded && w.end == admission.OutcomeAdmitted {
		m.violatef("TryAcquire of %s returned %v after admitting it", w, err)
	}
	if fit >= 0 {
		m.violatef("TryAcquire of %s refused (%v) although candidate %d surely fits", w, err, fit)
	}
	if !errors.Is(err, admission.ErrWouldWait) && !errors.Is(err, admission.ErrRateLimited) && !errors.Is(err, admission.ErrNoCandidate) {
		m.violatef("TryAcquire of %s returned %v", w, err)
	}
	if w.state == waiterPending {
		w.state = waiterRefused
	}
}

// opDuplicate enqueues a second waiter under a queued waiter's id.
func (r *runner) opDuplicate() {
	m := r.m
	m.mu.Lock()
	q := m.queuedWaiters()
	if len(q) == 0 {
		m.mu.Unlock()
		r.opEnqueue()
		return
	}
	x := q[r.src.intn(len(q))]
	m.mu.Unlock()
	r.logf("Enqueue duplicate of %s", x.id)
	req := admission.Request{ID: x.id, Owner: x.owner, Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "global", Amount: 1}}}}}
	r.begin(op{kind: "duplicate"})
	err := r.eng.Enqueue(r.ctx, req, func(l admission.Lease, err error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.violatef("the refused duplicate of %s was notified: lease %d, %v", x.id, l.ID, err)
	})
	if n := r.end(); !errors.Is(err, admission.ErrDuplicate) || n != 0 {
		r.fatalf("Enqueue of a duplicate of queued %s returned %v with %d events, want ErrDuplicate and none", x.id, err, n)
	}
}

func (r *runner) opUnknownScope() {
	r.logf("Enqueue naming an unknown scope")
	req := admission.Request{ID: "unknown",
		Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "global", Amount: 1}, {Scope: "nowhere", Amount: 1}}}}}
	r.begin(op{kind: "unknown"})
	err := r.eng.Enqueue(r.ctx, req, func(admission.Lease, error) {
		r.m.mu.Lock()
		defer r.m.mu.Unlock()
		r.m.violatef("a refused request naming an unknown scope was notified")
	})
	if n := r.end(); !errors.Is(err, admission.ErrUnknownScope) || n != 0 {
		r.fatalf("Enqueue naming an unknown scope returned %v with %d events, want ErrUnknownScope and none", err, n)
	}
}

// pickWaiter picks any waiter id drawn so far, queued or not.
func (r *runner) pickWaiter() (string, *modelWaiter) {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queuedWaiters()
	if len(q) > 0 && r.src.intn(5) > 0 {
		w := q[r.src.intn(len(q))]
		return w.id, w
	}
	id := fmt.Sprintf("w%d", r.src.intn(r.nextID+1)) // w0 never exists
	return id, m.waiters[id]
}

func (r *runner) opCancel() {
	id, w := r.pickWaiter()
	r.cancel(id, w)
}

func (r *runner) cancel(id string, w *modelWaiter) {
	m := r.m
	m.mu.Lock()
	queued := w != nil && w.state == waiterQueued
	m.mu.Unlock()
	r.logf("Cancel %s (queued %v)", id, queued)
	r.begin(op{kind: "cancel", waiter: id})
	err := r.eng.Cancel(r.ctx, id)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := r.endLocked()
	if !queued {
		if !errors.Is(err, admission.ErrNotQueued) || n != 0 {
			m.violatef("Cancel of %s, not queued, returned %v with %d events; want ErrNotQueued and none", id, err, n)
		}
		return
	}
	if err != nil || w.state != waiterEnded || w.end != admission.OutcomeCancelled {
		m.violatef("Cancel of queued %s returned %v and left it %s (%s)", w, err, w.state, w.end)
	}
}

func (r *runner) opPosition() {
	id, w := r.pickWaiter()
	m := r.m
	m.mu.Lock()
	queued := w != nil && w.state == waiterQueued
	m.mu.Unlock()
	r.logf("Position %s (queued %v)", id, queued)
	r.begin(op{kind: "position"})
	pos, err := r.eng.Position(r.ctx, id)
	// Nothing falls due between the two calls: the fake clock stands still.
	var scan admission.Position
	var scanErr error
	if r.scan != nil {
		scan, scanErr = r.scan(r.eng, id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := r.endLocked(); n != 0 {
		m.violatef("Position of %s caused %d events", id, n)
	}
	if !queued {
		if !errors.Is(err, admission.ErrNotQueued) {
			m.violatef("Position of %s, not queued, returned %+v, %v; want ErrNotQueued", id, pos, err)
		}
		return
	}
	if err != nil || !m.touches(w, pos.Scope) || pos.Ahead < 0 || pos.Ahead >= pos.Queued || pos.Queued != m.queuedCount(pos.Scope) {
		m.violatef("Position of queued %s (candidates %s) is %+v, %v", w, r.candString(w), pos, err)
	}
	// Ahead is counted by search; the scan compares with every waiter.
	if r.scan != nil && (scanErr != nil || scan.Ahead != pos.Ahead || scan.Scope != pos.Scope) {
		m.violatef("Position of queued %s is %+v; a scan of its scope says %+v, %v", w, pos, scan, scanErr)
	}
}

func (r *runner) opAdvance() {
	var d time.Duration
	now := r.clk.Now()
	switch r.src.intn(16) {
	case 0:
		d = 0
	case 1, 2, 3:
		d = time.Duration(1+r.src.intn(1000)) * time.Millisecond
	case 4, 5, 6:
		d = time.Second
	case 7, 8:
		d = 3 * time.Second
	case 9:
		d = 10 * time.Second
	case 10:
		d = 30 * time.Second
	case 11:
		d = 61 * time.Second
	case 12, 13:
		if next, ok := r.clk.NextDue(); ok && next.After(now) {
			d = next.Sub(now) // exactly to the next timer
		}
	default:
		if next, ok := r.clk.NextDue(); ok && next.After(now) {
			d = next.Sub(now) - time.Nanosecond // just short of it
		}
	}
	r.logf("Advance %s", d)
	r.advance(d)
}

func (r *runner) advance(d time.Duration) {
	r.begin(op{kind: "advance"})
	r.clk.Advance(d)
	r.end()
}

// pickLease picks a live lease, or nil.
func (r *runner) pickLease() *modelLease {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	live := m.liveLeases()
	if len(live) == 0 {
		return nil
	}
	return live[r.src.intn(len(live))]
}

// pickEnded picks a lease that has ended, or nil.
func (r *runner) pickEnded() *modelLease {
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.ended) == 0 {
		return nil
	}
	return m.leases[m.ended[r.src.intn(len(m.ended))]]
}

func (r *runner) opRelease() {
	l := r.pickLease()
	if l == nil {
		r.opEnqueue()
		return
	}
	r.release(l)
}

func (r *runner) release(l *modelLease) {
	r.logf("Release lease %d of %s owner=%s", l.id, l.waiter, l.owner)
	r.begin(op{kind: "release", lease: l.id})
	err := r.eng.Release(r.ctx, l.id, l.owner)
	m := r.m
	m.mu.Lock()
	defer m.mu.Unlock()
	r.endLocked()
	if err != nil || l.live || l.end != admission.OutcomeReleased {
		m.violatef("Release of live lease %d returned %v and left it live=%v, ended %s", l.id, err, l.live, l.end)
	}
}

// opReleaseAgain releases a lease that already ended: a no-op, or
// ErrStaleOwner when its owner has been fenced since.
func (r *runner) opReleaseAgain() {
	l := r.pickEnded()
	if l == nil {
		r.opRelease()
		return
	}
	r.m.mu.Lock()
	fenced := r.m.isFenced(l.owner)
	r.m.mu.Unlock()
	r.logf("Release again lease %d (%s) owner=%s (fenced %v)", l.id, l.end, l.owner, fenced)
	r.begin(op{kind: "release again", lease: l.id})
	err := r.eng.Release(r.ctx, l.id, l.owner)
	n := r.end()
	switch {
	case n != 0:
		r.fatalf("releasing ended lease %d caused %d events", l.id, n)
	case fenced && !errors.Is(err, admission.ErrStaleOwner):
		r.fatalf("releasing ended lease %d as fenced owner %s returned %v, want ErrStaleOwner", l.id, l.owner, err)
	case !fenced && err != nil:
		r.fatalf("releasing ended lease %d again returned %v, want nil (a no-op)", l.id, err)
	}
}

// staleOwner is an owner that does not hold l: an older generation of its
// owner, or another owner.
func (r *runner) staleOwner(l *modelLease) admission.Owner {
	if r.src.intn(2) == 0 {
		return admission.Owner{ID: l.owner.ID, Gen: l.owner.Gen - 1}
	}
	others := slices.DeleteFunc(slices.Clone(modelOwners), func(id string) bool { return id == l.owner.ID })
	return admission.Owner{ID: others[r.src.intn(len(others))], Gen: l.owner.Gen}
}

func (r *runner) opReleaseStale() {
	l := r.pickLease()
	if l == nil {
		r.opEnqueue()
		return
	}
	o := r.staleOwner(l)
	r.logf("Release lease %d of %s as stale owner %s (holder %s)", l.id, l.waiter, o, l.owner)
	r.begin(op{kind: "release stale", lease: l.id})
	err := r.eng.Release(r.ctx, l.id, o)
	n := r.end()
	if !errors.Is(err, admission.ErrStaleOwner) || n != 0 || !l.live {
		r.fatalf("Release of lease %d (owner %s) as %s returned %v with %d events, lease live %v; want ErrStaleOwner, no events, still live", l.id, l.owner, o, err, n, l.live)
	}
}

func (r *runner) opRenew() {
	l := r.pickLease()
	if l != nil && r.src.intn(4) == 0 {
		if e := r.pickEnded(); e != nil {
			l = e
		}
	}
	if l == nil {
		r.opEnqueue()
		return
	}
	m := r.m
	m.mu.Lock()
	live, fenced := l.live, m.isFenced(l.owner)
	m.mu.Unlock()
	r.logf("Renew lease %d of %s owner=%s (live %v, fenced %v)", l.id, l.waiter, l.owner, live, fenced)
	r.begin(op{kind: "renew", lease: l.id})
	exp, err := r.eng.Renew(r.ctx, l.id, l.owner)
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := r.endLocked(); n != 0 {
		m.violatef("Renew of lease %d caused %d events", l.id, n)
	}
	switch {
	case !live && fenced:
		if !errors.Is(err, admission.ErrStaleOwner) {
			m.violatef("Renew of ended lease %d by fenced owner %s returned %s, %v; want ErrStaleOwner", l.id, l.owner, exp, err)
		}
	case !live:
		if !errors.Is(err, admission.ErrLeaseNotHeld) {
			m.violatef("Renew of ended lease %d returned %s, %v; want ErrLeaseNotHeld", l.id, exp, err)
		}
	default:
		var want time.Time
		if l.ttl > 0 {
			want = r.clk.Now().Add(l.ttl)
		}
		if err != nil || !exp.Equal(want) {
			m.violatef("Renew of lease %d (ttl %s) returned %s, %v; want %s", l.id, l.ttl, exp, err, want)
		}
		l.expires = want
	}
}

func (r *runner) opRenewStale() {
	l := r.pickLease()
	if l == nil {
		r.opEnqueue()
		return
	}
	o := r.staleOwner(l)
	r.logf("Renew lease %d of %s as stale owner %s (holder %s)", l.id, l.waiter, o, l.owner)
	r.begin(op{kind: "renew stale", lease: l.id})
	exp, err := r.eng.Renew(r.ctx, l.id, o)
	if n := r.end(); !errors.Is(err, admission.ErrStaleOwner) || n != 0 {
		r.fatalf("Renew of lease %d (owner %s) as %s returned %s, %v with %d events; want ErrStaleOwner and none", l.id, l.owner, o, exp, err, n)
	}
}

func (r *runner) opReconcile() {
	l := r.pickLease()
	if l == nil {
		r.opEnqueue()
		return
	}
	tokens := int64(r.src.intn(401))
	m := r.m
	m.mu.Lock()
	now := r.clk.Now()
	if diff := l.tokens - tokens; diff != 0 {
		for _, n := range l.needs {
			if s := m.scopes[n.Scope]; s.cfg.TPM > 0 {
				s.tpm.add(now, float64(diff))
			}
		}
	}
	old := l.tokens
	l.tokens = tokens
	m.mu.Unlock()
	r.logf("Reconcile lease %d of %s (needs %v) from %d to %d tokens", l.id, l.waiter, l.needs, old, tokens)
	r.begin(op{kind: "reconcile", lease: l.id})
	err := r.eng.Reconcile(r.ctx, l.id, l.owner, admission.Settlement{Tokens: tokens})
	r.end()
	if err != nil {
		r.fatalf("Reconcile of live lease %d returned %v", l.id, err)
	}
}

func (r *runner) opFence() {
	m := r.m
	id := modelOwners[r.src.intn(len(modelOwners))]
	m.mu.Lock()
	mo := m.owners[id]
	gen := mo.gen
	if r.src.intn(4) == 0 && gen > 0 {
		gen-- // an older generation: nothing current is touched
	}
	if !mo.hasFenced || gen > mo.fenced {
		mo.fenced = gen
	}
	mo.hasFenced = true
	var orphaned []string
	for _, name := range m.names {
		if s := m.scopes[name]; !s.orphaned && s.cfg.Owner == id && s.cfg.OwnerGen <= gen {
			s.orphaned = true
			orphaned = append(orphaned, name)
		}
	}
	// Waiters lose candidates that use the orphaned scopes; those with a
	// Resolve must be asked for fresh ones.
	mustResolve := make(map[*modelWaiter]int)
	uses := func(c admission.Candidate) bool {
		return slices.ContainsFunc(c.Needs, func(n admission.Need) bool { return slices.Contains(orphaned, n.Scope) })
	}
	var revivable []string // waiters an engine re-deriving candidates would give dropped ones back
	for _, w := range m.queuedWaiters() {
		if !w.hasResolve && slices.ContainsFunc(w.cands, func(c modelCandidate) bool { return !c.dropped && uses(c.Candidate) }) &&
			slices.ContainsFunc(w.cands, func(c modelCandidate) bool { return c.dropped && !m.usesOrphaned(c.Candidate) }) {
			revivable = append(revivable, w.id)
		}
		if m.lenient && !w.hasResolve && slices.ContainsFunc(w.cands, func(c modelCandidate) bool { return !c.dropped && uses(c.Candidate) }) {
			w.cands = w.cands[:0]
			for _, c := range w.orig {
				w.cands = append(w.cands, m.newCandidate(c))
			}
			w.revived = true // its deadline ignores the MaxWait of revived candidates
			continue
		}
		for i := range w.cands {
			c := &w.cands[i]
			if c.dropped || !uses(c.Candidate) {
				continue
			}
			c.dropped, c.queueFull = true, false
			if w.hasResolve && !m.isFenced(w.owner) {
				mustResolve[w] = w.resolved
			}
		}
	}
	m.mu.Unlock()
	r.logf("Fence %s@%d (orphans %v)", id, gen, orphaned)
	r.begin(op{kind: "fence", owner: id, gen: gen})
	err := r.eng.Fence(r.ctx, id, gen)
	m.mu.Lock()
	defer m.mu.Unlock()
	r.endLocked()
	if err != nil {
		m.violatef("Fence(%s, %d) returned %v", id, gen, err)
	}
	if len(m.violations) > 0 && len(revivable) > 0 && !m.lenient {
		m.violatef("(this Fence re-resolved %v, which had candidates dropped earlier; if the engine gave those back, failures above may follow from that — compare with %s)", revivable, m.lenientFlag)
	}
	for w, before := range mustResolve {
		if w.resolved == before && !(w.state == waiterEnded && w.end == admission.OutcomeFenced) {
			m.violatef("Fence(%s, %d) orphaned a scope of %s, which has a Resolve that was not called", id, gen, w)
		}
	}
}

func (r *runner) opActivate() {
	m := r.m
	m.mu.Lock()
	var fenced []string
	for _, id := range modelOwners {
		if mo := m.owners[id]; mo.hasFenced && mo.gen <= mo.fenced {
			fenced = append(fenced, id)
		}
	}
	if len(fenced) == 0 {
		m.mu.Unlock()
		r.opFence()
		return
	}
	id := fenced[r.src.intn(len(fenced))]
	mo := m.owners[id]
	if r.src.intn(5) == 0 {
		gen := mo.fenced
		m.mu.Unlock()
		r.logf("Activate %s@%d, a fenced generation", id, gen)
		r.begin(op{kind: "activate stale", owner: id, gen: gen})
		err := r.eng.Activate(r.ctx, id, gen)
		if n := r.end(); !errors.Is(err, admission.ErrStaleOwner) || n != 0 {
			r.fatalf("Activate(%s, %d) of a fenced generation returned %v with %d events; want ErrStaleOwner and none", id, gen, err, n)
		}
		return
	}
	gen := mo.fenced + 1
	mo.gen = gen
	for _, name := range m.names {
		if s := m.scopes[name]; s.cfg.Owner == id {
			s.cfg.OwnerGen = gen
			s.orphaned = false
		}
	}
	m.mu.Unlock()
	r.logf("Activate %s@%d", id, gen)
	r.begin(op{kind: "activate", owner: id, gen: gen})
	err := r.eng.Activate(r.ctx, id, gen)
	r.end()
	if err != nil {
		r.fatalf("Activate(%s, %d) returned %v", id, gen, err)
	}
}

func (r *runner) opSetScope() {
	m := r.m
	name := allScopes[r.src.intn(len(allScopes))]
	limit := int64(r.src.intn(6)) // 0: unlimited
	m.mu.Lock()
	s := m.scopes[name]
	old := s.cfg.Limit
	s.cfg.Limit = limit
	cfg := s.cfg
	m.mu.Unlock()
	r.logf("SetScope %s limit %d -> %d (used %d)", name, old, limit, s.used)
	r.begin(op{kind: "setscope"})
	err := r.eng.SetScope(r.ctx, name, cfg)
	r.end()
	if err != nil {
		r.fatalf("SetScope(%s, %+v) returned %v", name, cfg, err)
	}
}
