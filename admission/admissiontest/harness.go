package admissiontest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// start is where every test's fake clock begins.
var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// guard bounds every wait for an event that must happen. It is a failure
// guard, not a sleep: a correct engine signals long before it.
const guard = 10 * time.Second

// harness is one engine under test with its fake clock and the events it has
// reported. Each subtest builds its own, so subtests can run in parallel.
type harness struct {
	t      *testing.T
	ctx    context.Context
	clock  *clock.Fake
	events *recorder
	e      admission.Engine
	seq    atomic.Int64
}

func newHarness(t *testing.T, newEngine NewEngine) *harness {
	t.Helper()
	fake := clock.NewFake(start)
	rec := newRecorder()
	e := newEngine(t, admission.Options{Clock: fake, Observer: rec})
	if e == nil {
		t.Fatal("newEngine returned nil")
	}
	return &harness{t: t, ctx: t.Context(), clock: fake, events: rec, e: e}
}

// run declares one parallel subtest with a fresh engine.
func run(t *testing.T, name string, newEngine NewEngine, f func(t *testing.T, h *harness)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		f(t, newHarness(t, newEngine))
	})
}

func (h *harness) advance(d time.Duration) { h.clock.Advance(d) }

func (h *harness) setScope(name string, cfg admission.ScopeConfig) {
	h.t.Helper()
	if err := h.e.SetScope(h.ctx, name, cfg); err != nil {
		h.t.Fatalf("SetScope(%s, %+v): %v", name, cfg, err)
	}
}

func (h *harness) stats(name string) admission.ScopeStats {
	h.t.Helper()
	st, err := h.e.Scope(h.ctx, name)
	if err != nil {
		h.t.Fatalf("Scope(%s): %v", name, err)
	}
	if st.Name != name {
		h.t.Errorf("Scope(%s).Name = %q", name, st.Name)
	}
	return st
}

// wantUsage checks a scope's Used, Leases and Queued.
func (h *harness) wantUsage(name string, used int64, leases, queued int) {
	h.t.Helper()
	st := h.stats(name)
	if st.Used != used || st.Leases != leases || st.Queued != queued {
		h.t.Errorf("scope %s: used=%d leases=%d queued=%d, want used=%d leases=%d queued=%d",
			name, st.Used, st.Leases, st.Queued, used, leases, queued)
	}
}

func (h *harness) nextID(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, h.seq.Add(1))
}

// hold takes a lease on needs at once, failing the test if it cannot.
func (h *harness) hold(needs ...admission.Need) admission.Lease {
	h.t.Helper()
	return h.holdReq(req(h.nextID("hold"), cand(needs...)))
}

// holdAs is hold with an owner.
func (h *harness) holdAs(owner admission.Owner, needs ...admission.Need) admission.Lease {
	h.t.Helper()
	r := req(h.nextID("hold"), cand(needs...))
	r.Owner = owner
	return h.holdReq(r)
}

func (h *harness) holdReq(r admission.Request) admission.Lease {
	h.t.Helper()
	l, err := h.e.TryAcquire(h.ctx, r)
	if err != nil {
		h.t.Fatalf("TryAcquire(%s): %v", r.ID, err)
	}
	checkLease(h.t, l, r, true)
	return l
}

func (h *harness) release(l admission.Lease) {
	h.t.Helper()
	if err := h.e.Release(h.ctx, l.ID, l.Owner); err != nil {
		h.t.Fatalf("Release(lease %d of %s): %v", l.ID, l.WaiterID, err)
	}
}

// releaseAndNext releases l and returns the id of the waiter admitted next.
func (h *harness) releaseAndNext(l admission.Lease) string {
	h.t.Helper()
	mark := h.events.len()
	h.release(l)
	e := h.events.waitAfter(h.t, mark, fmt.Sprintf("an admission after releasing %s", l.WaiterID),
		func(e admission.Event) bool { return e.Outcome == admission.OutcomeAdmitted })
	return e.WaiterID
}

// enqueue queues r and returns a handle on its outcome.
func (h *harness) enqueue(r admission.Request) *waiter {
	h.t.Helper()
	w := h.newWaiter(r)
	if err := h.e.Enqueue(h.ctx, r, w.notify); err != nil {
		h.t.Fatalf("Enqueue(%s): %v", r.ID, err)
	}
	return w
}

func (h *harness) newWaiter(r admission.Request) *waiter {
	w := &waiter{h: h, req: r, ch: make(chan result, 1)}
	t := h.t
	// Cleanups run last-in first-out, so this runs before the engine's own
	// cleanup (which may fail still-queued waiters with their first notify).
	t.Cleanup(func() {
		if n := w.calls.Load(); n > 1 {
			t.Errorf("waiter %s: notify called %d times, want at most once", r.ID, n)
		}
	})
	return w
}

// acquireQueued starts Acquire in its own goroutine and returns once the
// engine has reported the waiter queued.
func (h *harness) acquireQueued(ctx context.Context, r admission.Request) *waiter {
	h.t.Helper()
	w := h.newWaiter(r)
	go func() {
		l, err := h.e.Acquire(ctx, r)
		w.notify(l, err)
	}()
	h.events.waitFor(h.t, "queued "+r.ID, isWaiterEvent(admission.OutcomeQueued, r.ID))
	// The event comes from inside the engine's critical section, which
	// may then arm a timer on the clock; a test that moves the clock
	// before that would move it past a timer not yet set. A call that
	// takes the engine's lock returns once the section is over.
	h.e.Scopes(h.ctx)
	return w
}

type result struct {
	lease admission.Lease
	err   error
}

// waiter is the outcome of one Enqueue or Acquire.
type waiter struct {
	h     *harness
	req   admission.Request
	ch    chan result
	calls atomic.Int32
	got   *result
}

func (w *waiter) notify(l admission.Lease, err error) {
	w.calls.Add(1)
	select {
	case w.ch <- result{l, err}:
	default:
	}
}

// poll returns the outcome if it has arrived, without waiting.
func (w *waiter) poll() (result, bool) {
	if w.got != nil {
		return *w.got, true
	}
	select {
	case r := <-w.ch:
		w.got = &r
		return r, true
	default:
		return result{}, false
	}
}

// wait returns the outcome, failing the test if none comes within guard.
func (w *waiter) wait() result {
	w.h.t.Helper()
	if r, ok := w.poll(); ok {
		return r
	}
	select {
	case r := <-w.ch:
		w.got = &r
		return r
	case <-time.After(guard):
		w.h.t.Fatalf("waiter %s: no outcome within %s", w.req.ID, guard)
		return result{}
	}
}

// admitted waits for the lease.
func (w *waiter) admitted() admission.Lease {
	w.h.t.Helper()
	r := w.wait()
	if r.err != nil {
		w.h.t.Fatalf("waiter %s: got error %v, want a lease", w.req.ID, r.err)
	}
	checkLease(w.h.t, r.lease, w.req, false)
	return r.lease
}

// admittedNow checks that the lease was delivered already: before the call
// that freed the capacity returned.
func (w *waiter) admittedNow(after string) admission.Lease {
	w.h.t.Helper()
	r, ok := w.poll()
	if !ok {
		w.h.t.Fatalf("waiter %s: not notified by the time %s returned", w.req.ID, after)
	}
	if r.err != nil {
		w.h.t.Fatalf("waiter %s: got error %v, want a lease", w.req.ID, r.err)
	}
	checkLease(w.h.t, r.lease, w.req, false)
	return r.lease
}

// failed waits for an error matching target.
func (w *waiter) failed(target error) {
	w.h.t.Helper()
	r := w.wait()
	if !errors.Is(r.err, target) {
		w.h.t.Errorf("waiter %s: got (lease %d, err %v), want error %v", w.req.ID, r.lease.ID, r.err, target)
	}
}

// pending checks that no outcome has arrived yet.
func (w *waiter) pending() {
	w.h.t.Helper()
	if r, ok := w.poll(); ok {
		w.h.t.Errorf("waiter %s: ended early with (lease %d %v, err %v), want still queued",
			w.req.ID, r.lease.ID, r.lease.Needs, r.err)
	}
}

// checkLease checks l against the request it answers; atOnce says it was
// granted without queueing.
func checkLease(t *testing.T, l admission.Lease, r admission.Request, atOnce bool) {
	t.Helper()
	if l.ID == 0 {
		t.Errorf("lease for %s has id 0", r.ID)
	}
	if l.WaiterID != r.ID {
		t.Errorf("lease WaiterID = %q, want %q", l.WaiterID, r.ID)
	}
	if l.Owner != r.Owner {
		t.Errorf("lease for %s: Owner = %v, want %v", r.ID, l.Owner, r.Owner)
	}
	if atOnce && l.Waited != 0 {
		t.Errorf("lease for %s, granted at once: Waited = %s, want 0", r.ID, l.Waited)
	}
	if l.Candidate < 0 || l.Candidate >= len(r.Candidates) {
		t.Errorf("lease for %s: Candidate = %d of %d", r.ID, l.Candidate, len(r.Candidates))
		return
	}
	// Without Resolve the candidate list never grows, so the chosen needs
	// must be one of the request's candidates.
	if r.Resolve == nil {
		found := false
		for _, c := range r.Candidates {
			if sameNeeds(l.Needs, c.Needs...) && l.Tokens == c.Tokens {
				found = true
			}
		}
		if !found {
			t.Errorf("lease for %s holds %v (tokens %d), which is none of its candidates", r.ID, l.Needs, l.Tokens)
		}
	}
}

// Request builders.

func need(scope string, amount int64) admission.Need {
	return admission.Need{Scope: scope, Amount: amount}
}

func cand(needs ...admission.Need) admission.Candidate {
	return admission.Candidate{Needs: needs}
}

// one is a candidate needing one unit of each scope.
func one(scopes ...string) admission.Candidate {
	c := admission.Candidate{}
	for _, s := range scopes {
		c.Needs = append(c.Needs, need(s, 1))
	}
	return c
}

func req(id string, cands ...admission.Candidate) admission.Request {
	return admission.Request{ID: id, Candidates: cands}
}

func withPriority(r admission.Request, p int32) admission.Request {
	r.Priority = p
	return r
}

func withKey(r admission.Request, key string) admission.Request {
	r.FairnessKey = key
	return r
}

func withDeadline(r admission.Request, d time.Time) admission.Request {
	r.Deadline = d
	return r
}

func withOwner(r admission.Request, o admission.Owner) admission.Request {
	r.Owner = o
	return r
}

func sameNeeds(got []admission.Need, want ...admission.Need) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	byScope := func(x, y admission.Need) int { return strings.Compare(x.Scope, y.Scope) }
	slices.SortFunc(a, byScope)
	slices.SortFunc(b, byScope)
	return slices.Equal(a, b)
}

func wantNeeds(t *testing.T, what string, got []admission.Need, want ...admission.Need) {
	t.Helper()
	if !sameNeeds(got, want...) {
		t.Errorf("%s: needs %v, want %v", what, got, want)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

func wantNoErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// recorder is the Observer the suite hands to every engine. It keeps every
// event and wakes whoever waits for one.
type recorder struct {
	mu      sync.Mutex
	events  []admission.Event
	changed chan struct{}
}

var _ admission.Observer = (*recorder)(nil)

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Observe(e admission.Event) {
	e.Needs = slices.Clone(e.Needs)
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *recorder) all() []admission.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) count(pred func(admission.Event) bool) int {
	n := 0
	for _, e := range r.all() {
		if pred(e) {
			n++
		}
	}
	return n
}

func (r *recorder) find(pred func(admission.Event) bool) (admission.Event, bool) {
	for _, e := range r.all() {
		if pred(e) {
			return e, true
		}
	}
	return admission.Event{}, false
}

// waitFor waits for an event matching pred, at any index.
func (r *recorder) waitFor(t *testing.T, what string, pred func(admission.Event) bool) admission.Event {
	t.Helper()
	return r.waitAfter(t, 0, what, pred)
}

// waitAfter waits for an event matching pred at index mark or later.
func (r *recorder) waitAfter(t *testing.T, mark int, what string, pred func(admission.Event) bool) admission.Event {
	t.Helper()
	timeout := time.After(guard)
	for {
		r.mu.Lock()
		for _, e := range r.events[min(mark, len(r.events)):] {
			if pred(e) {
				r.mu.Unlock()
				return e
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no event %s within %s; events: %s", what, guard, r.describe())
			return admission.Event{}
		}
	}
}

func (r *recorder) describe() string {
	var b strings.Builder
	for _, e := range r.all() {
		fmt.Fprintf(&b, "\n\t%s waiter=%q lease=%d needs=%v", e.Outcome, e.WaiterID, e.Lease, e.Needs)
	}
	return b.String()
}

func isWaiterEvent(o admission.Outcome, waiterID string) func(admission.Event) bool {
	return func(e admission.Event) bool { return e.Outcome == o && e.WaiterID == waiterID }
}

func isLeaseEvent(o admission.Outcome, id admission.LeaseID) func(admission.Event) bool {
	return func(e admission.Event) bool { return e.Outcome == o && e.Lease == id }
}

// wantEvent checks that an event matching pred has been reported already.
func (h *harness) wantEvent(what string, pred func(admission.Event) bool) admission.Event {
	h.t.Helper()
	e, ok := h.events.find(pred)
	if !ok {
		h.t.Errorf("no event %s; events: %s", what, h.events.describe())
	}
	return e
}

// wantNoEvent checks that no event matching pred has been reported.
func (h *harness) wantNoEvent(what string, pred func(admission.Event) bool) {
	h.t.Helper()
	if e, ok := h.events.find(pred); ok {
		h.t.Errorf("unexpected event %s: %+v", what, e)
	}
}
