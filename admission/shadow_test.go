package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// shadowBundle is a memory engine on a fake clock, for the shadow
// scopes' bookkeeping seen from inside.
type shadowBundle struct {
	m   *Memory
	clk *clock.Fake
	ctx context.Context
	n   int
}

func setupShadow(t *testing.T) *shadowBundle {
	t.Helper()
	clk := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	m := NewMemory(Options{Clock: clk})
	t.Cleanup(m.Close)
	return &shadowBundle{m: m, clk: clk, ctx: context.Background()}
}

func (b *shadowBundle) set(t *testing.T, name string, cfg ScopeConfig) {
	t.Helper()
	if err := b.m.SetScope(b.ctx, name, cfg); err != nil {
		t.Fatal(err)
	}
}

func (b *shadowBundle) hold(t *testing.T, c Candidate) Lease {
	t.Helper()
	b.n++
	l, err := b.m.TryAcquire(b.ctx, Request{ID: fmt.Sprintf("r%d", b.n), Candidates: []Candidate{c}})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	return l
}

func (b *shadowBundle) release(t *testing.T, l Lease) {
	t.Helper()
	if err := b.m.Release(b.ctx, l.ID, l.Owner); err != nil {
		t.Fatal(err)
	}
}

func (b *shadowBundle) stats(t *testing.T, name string) ScopeStats {
	t.Helper()
	st, err := b.m.Scope(b.ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// excess reads a shadow scope's would-be excess.
func (b *shadowBundle) excess(name string) int64 {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if sh := b.m.scopes[name].shadow; sh != nil {
		return sh.excess
	}
	return -1
}

func unit(scopes ...string) Candidate {
	var c Candidate
	for _, s := range scopes {
		c.Needs = append(c.Needs, Need{Scope: s, Amount: 1})
	}
	return c
}

// A would-be queue whose head never moves keeps its dead entries
// bounded: leases that queue and end behind it do not pile up.
func TestShadowQueueStaysBounded(t *testing.T) {
	b := setupShadow(t)
	b.set(t, "s", ScopeConfig{Limit: 1, Shadow: true})
	b.hold(t, unit("s")) // held throughout: the head never gets in
	b.hold(t, unit("s")) // queued throughout
	for range 10000 {
		b.release(t, b.hold(t, unit("s")))
	}
	b.m.mu.Lock()
	sh := b.m.scopes["s"].shadow
	n, live := len(sh.queue)-sh.head, sh.live
	b.m.mu.Unlock()
	if live != 1 || n > 2*live+65 {
		t.Errorf("would-be queue: %d entries for %d live, want at most %d", n, live, 2*live+65)
	}
	if st := b.stats(t, "s"); st.ShadowWaits != 10001 || st.ShadowQueued != 1 {
		t.Errorf("ShadowWaits=%d ShadowQueued=%d, want 10001 and 1", st.ShadowWaits, st.ShadowQueued)
	}
}

// A lease's slot, reused by a lease of an enforced scope, carries none of
// the shadow marks of the lease before it.
func TestShadowMarksDoNotOutliveTheLease(t *testing.T) {
	b := setupShadow(t)
	b.set(t, "s", ScopeConfig{Limit: 1, Shadow: true})
	b.set(t, "e", ScopeConfig{Limit: 5})
	first := b.hold(t, unit("s"))
	queued := b.hold(t, unit("s"))
	b.release(t, queued)
	l := b.hold(t, unit("e")) // takes the freed slot
	b.m.mu.Lock()
	marks := len(b.m.leaseLocked(l.ID).marks)
	b.m.mu.Unlock()
	if marks != 0 {
		t.Errorf("a lease of an enforced scope has %d shadow marks, want 0", marks)
	}
	b.release(t, l)
	b.release(t, first)
	if got := b.excess("s"); got != 0 {
		t.Errorf("excess after every release = %d, want 0", got)
	}
}

// Restored leases were admitted before: a shadow scope takes them as
// held, counts nothing for them, and judges the next admission with them.
func TestShadowRestoreCountsNothing(t *testing.T) {
	b := setupShadow(t)
	b.set(t, "s", ScopeConfig{Limit: 1, Shadow: true})
	for i := range 3 {
		if _, err := b.m.Restore(b.ctx, Request{ID: fmt.Sprintf("restored%d", i), Candidates: []Candidate{unit("s")}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.stats(t, "s"); st.ShadowWaits != 0 || st.ShadowQueued != 0 || st.Used != 3 {
		t.Errorf("after restores: %+v, want used 3 and nothing counted", st)
	}
	b.hold(t, unit("s"))
	if st := b.stats(t, "s"); st.ShadowWaits != 1 || st.ShadowQueued != 1 {
		t.Errorf("after a newcomer: ShadowWaits=%d ShadowQueued=%d, want 1 and 1", st.ShadowWaits, st.ShadowQueued)
	}
}

// Marks of an earlier shadow period count nothing in a later one.
func TestShadowPeriodsDoNotMix(t *testing.T) {
	b := setupShadow(t)
	b.set(t, "s", ScopeConfig{Limit: 1, Shadow: true})
	var ls []Lease
	for range 3 {
		ls = append(ls, b.hold(t, unit("s")))
	}
	b.set(t, "s", ScopeConfig{Limit: 1})
	b.set(t, "s", ScopeConfig{Limit: 1, Shadow: true})
	if got := b.excess("s"); got != 0 {
		t.Fatalf("excess of a new shadow period = %d, want 0", got)
	}
	late := b.hold(t, unit("s")) // 3 held as in: it would wait
	for _, l := range ls {
		b.release(t, l)
	}
	if st := b.stats(t, "s"); st.ShadowQueued != 0 || st.ShadowWaits != 3 {
		t.Errorf("ShadowQueued=%d ShadowWaits=%d, want 0 and 3 (2 then 1)", st.ShadowQueued, st.ShadowWaits)
	}
	b.release(t, late)
	if got := b.excess("s"); got != 0 {
		t.Errorf("excess after every release = %d, want 0", got)
	}
}

// Changing a shadow scope's limits re-judges its would-be queue at once.
func TestShadowReconfigured(t *testing.T) {
	b := setupShadow(t)
	b.set(t, "s", ScopeConfig{Limit: 1, MaxWait: time.Minute, Shadow: true})
	for range 4 {
		b.hold(t, unit("s"))
	}
	b.set(t, "s", ScopeConfig{Limit: 2, MaxWait: time.Minute, Shadow: true})
	if st := b.stats(t, "s"); st.ShadowQueued != 2 {
		t.Errorf("after raising the limit: ShadowQueued=%d, want 2", st.ShadowQueued)
	}
	b.clk.Advance(10 * time.Second)
	b.set(t, "s", ScopeConfig{Limit: 2, MaxWait: 5 * time.Second, Shadow: true})
	if st := b.stats(t, "s"); st.ShadowQueued != 0 || st.ShadowTimeouts != 2 {
		t.Errorf("after shortening max wait: ShadowQueued=%d ShadowTimeouts=%d, want 0 and 2", st.ShadowQueued, st.ShadowTimeouts)
	}
	b.set(t, "s", ScopeConfig{Limit: 2, Shadow: true})
	b.hold(t, unit("s")) // 4 held, 2 of them out: 2 would be held
	if st := b.stats(t, "s"); st.ShadowQueued != 1 {
		t.Errorf("ShadowQueued=%d, want 1", st.ShadowQueued)
	}
}

// A shadow scope's TPM bucket is charged by reconciliation too, and is
// never left in debt.
func TestShadowReconcileNeverInDebt(t *testing.T) {
	b := setupShadow(t)
	b.set(t, "s", ScopeConfig{TPM: 100, Shadow: true})
	l := b.hold(t, Candidate{Needs: []Need{{Scope: "s", Amount: 1}}, Tokens: 50})
	if err := b.m.Reconcile(b.ctx, l.ID, l.Owner, Settlement{Tokens: 400}); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(t, "s"); st.TPMAvailable != 0 {
		t.Errorf("TPMAvailable = %v, want 0", st.TPMAvailable)
	}
	if err := b.m.Reconcile(b.ctx, l.ID, l.Owner, Settlement{}); err != nil {
		t.Fatal(err)
	}
	if st := b.stats(t, "s"); st.TPMAvailable != 100 {
		t.Errorf("TPMAvailable after a refund = %v, want 100", st.TPMAvailable)
	}
}
