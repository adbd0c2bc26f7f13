package admission_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// boundedBundle is a memory engine on a fake clock.
type boundedBundle struct {
	e   *admission.Memory
	clk *clock.Fake
	ctx context.Context
}

func setupBounded(t testing.TB) *boundedBundle {
	t.Helper()
	clk := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	e := admission.NewMemory(admission.Options{Clock: clk})
	t.Cleanup(e.Close)
	return &boundedBundle{e: e, clk: clk, ctx: context.Background()}
}

func oneOf(scopes ...string) admission.Candidate {
	var c admission.Candidate
	for _, s := range scopes {
		c.Needs = append(c.Needs, admission.Need{Scope: s, Amount: 1})
	}
	return c
}

func (b *boundedBundle) setScope(t testing.TB, name string, cfg admission.ScopeConfig) {
	t.Helper()
	if err := b.e.SetScope(b.ctx, name, cfg); err != nil {
		t.Fatal(err)
	}
}

func (b *boundedBundle) hold(t testing.TB, id string, cands ...admission.Candidate) admission.Lease {
	t.Helper()
	l, err := b.e.TryAcquire(b.ctx, admission.Request{ID: id, Candidates: cands})
	if err != nil {
		t.Fatalf("TryAcquire(%s): %v", id, err)
	}
	return l
}

// enqueue queues a waiter and returns where its outcome arrives.
func (b *boundedBundle) enqueue(t testing.TB, req admission.Request) <-chan error {
	t.Helper()
	ch := make(chan error, 1)
	if err := b.e.Enqueue(b.ctx, req, func(_ admission.Lease, err error) { ch <- err }); err != nil {
		t.Fatalf("Enqueue(%s): %v", req.ID, err)
	}
	return ch
}

// holdMeasured leaves one unit of scope held, after a lease that queued
// (so that the engine timed it) was held there for d.
func (b *boundedBundle) holdMeasured(t testing.TB, scope string, d time.Duration) admission.Lease {
	t.Helper()
	l0 := b.hold(t, "first", oneOf(scope))
	got := make(chan admission.Lease, 1)
	if err := b.e.Enqueue(b.ctx, admission.Request{ID: "timed", Candidates: []admission.Candidate{oneOf(scope)}},
		func(l admission.Lease, _ error) { got <- l }); err != nil {
		t.Fatal(err)
	}
	if err := b.e.Release(b.ctx, l0.ID, l0.Owner); err != nil {
		t.Fatal(err)
	}
	l1 := <-got
	b.clk.Advance(d)
	if err := b.e.Release(b.ctx, l1.ID, l1.Owner); err != nil {
		t.Fatal(err)
	}
	return b.hold(t, "held", oneOf(scope))
}

// A timeout's RetryAfter is the wait estimate of the scope the waiter
// waited on for a request arriving then: everyone queued there, at the
// recent mean hold time, Limit at a time. A full queue's is the time one
// admission takes there.
func TestRetryAfterEstimates(t *testing.T) {
	t.Parallel()
	b := setupBounded(t)
	b.setScope(t, "s", admission.ScopeConfig{Limit: 1, MaxWait: 5 * time.Second, QueueLimit: 3})
	b.holdMeasured(t, "s", 8*time.Second)
	w1 := b.enqueue(t, admission.Request{ID: "w1", Candidates: []admission.Candidate{oneOf("s")}})
	b.clk.Advance(time.Second)
	b.enqueue(t, admission.Request{ID: "w2", Candidates: []admission.Candidate{oneOf("s")}})
	b.enqueue(t, admission.Request{ID: "w3", Candidates: []admission.Candidate{oneOf("s")}})

	err := b.e.Enqueue(b.ctx, admission.Request{ID: "w4", Candidates: []admission.Candidate{oneOf("s")}}, func(admission.Lease, error) {})
	var qe *admission.QueueFullError
	if !errors.As(err, &qe) || qe.RetryAfter != 8*time.Second {
		t.Errorf("Enqueue past the queue limit: %v (%+v), want a *QueueFullError with RetryAfter 8s (one 8s hold)", err, qe)
	}

	b.clk.Advance(4 * time.Second)
	var te *admission.TimeoutError
	if err := <-w1; !errors.As(err, &te) {
		t.Fatalf("w1: %v, want a *TimeoutError", err)
	}
	// w1, w2 and w3 were queued: a newcomer would wait for three holds.
	if te.WaitingOn != "s" || te.RetryAfter != 24*time.Second {
		t.Errorf("w1's timeout: %+v, want waiting on s, RetryAfter 24s", *te)
	}
}

// With no hold measured, an RPM limit still gives an estimate: n requests
// at its rate.
func TestRetryAfterFromRPM(t *testing.T) {
	t.Parallel()
	b := setupBounded(t)
	b.setScope(t, "r", admission.ScopeConfig{RPM: 6})
	for i := range 6 {
		b.hold(t, "h"+strconv.Itoa(i), oneOf("r"))
	}
	w := b.enqueue(t, admission.Request{ID: "w", Deadline: b.clk.Now().Add(time.Second), Candidates: []admission.Candidate{oneOf("r")}})
	b.clk.Advance(time.Second)
	var te *admission.TimeoutError
	if err := <-w; !errors.As(err, &te) || te.Setting != admission.SettingDeadline || te.RetryAfter != 10*time.Second {
		t.Errorf("w: %v (%+v), want its deadline, RetryAfter 10s (one request at 6 a minute)", err, te)
	}
}

// Waiters that a MaxWait moves to their fallback keep their arrival order
// there, ahead of newcomers that asked for the fallback alone, and the
// move is cheap: the moved ones join a class of their own at its end
// (BenchmarkMaxWaitStep shows the cost does not grow with the queue).
func TestMaxWaitMovedKeepOrder(t *testing.T) {
	t.Parallel()
	b := setupBounded(t)
	b.setScope(t, "p", admission.ScopeConfig{Limit: 1, MaxWait: 10 * time.Second})
	b.setScope(t, "f", admission.ScopeConfig{Limit: 1})
	b.hold(t, "hp", oneOf("p"))
	lf := b.hold(t, "hf", oneOf("f"))
	var order []string
	done := make(chan string, 8)
	for i := range 3 {
		a, n := "a"+strconv.Itoa(i), "n"+strconv.Itoa(i)
		for _, r := range []admission.Request{
			{ID: a, Candidates: []admission.Candidate{oneOf("p"), oneOf("f")}},
			{ID: n, Candidates: []admission.Candidate{oneOf("f")}},
		} {
			if err := b.e.Enqueue(b.ctx, r, func(l admission.Lease, err error) {
				if err != nil {
					t.Errorf("%s: %v", r.ID, err)
				}
				done <- r.ID
				_ = b.e.Release(context.Background(), l.ID, l.Owner)
			}); err != nil {
				t.Fatal(err)
			}
		}
		b.clk.Advance(time.Second)
	}
	b.clk.Advance(10 * time.Second) // every a has lost p
	if st, _ := b.e.Scope(b.ctx, "f"); st.Queued != 6 {
		t.Fatalf("f has %d queued, want 6", st.Queued)
	}
	if err := b.e.Release(b.ctx, lf.ID, lf.Owner); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		order = append(order, <-done)
	}
	if got, want := fmt.Sprint(order), "[a0 n0 a1 n1 a2 n2]"; got != want {
		t.Errorf("admitted to f in order %s, want %s (arrival order)", got, want)
	}
}

// BenchmarkMaxWaitStep measures a step in which a MaxWait moves one waiter
// off its primary to its fallback, with N waiters queued, all asking for
// the same primary and fallback: a third waiting on both, two thirds that
// found the primary's queue full and wait on the fallback alone, half of
// these arrived after the one moving (so that, were it to join their
// class, it would be inserted among them). A step also queues one of each
// and cancels the oldest of each, so the queue keeps its shape. Moving
// must not cost O(N).
func BenchmarkMaxWaitStep(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			bb := setupBounded(b)
			wait := n / 3 // steps, of a millisecond each
			bb.setScope(b, "p", admission.ScopeConfig{Limit: 1, QueueLimit: wait, MaxWait: time.Duration(wait) * time.Millisecond})
			bb.setScope(b, "f", admission.ScopeConfig{Limit: 1})
			bb.hold(b, "hp", oneOf("p"))
			bb.hold(b, "hf", oneOf("f"))
			notify := func(_ admission.Lease, err error) {
				if err != nil && !errors.Is(err, admission.ErrCancelled) && !errors.Is(err, admission.ErrClosed) {
					b.Error(err)
				}
			}
			cands := []admission.Candidate{oneOf("p"), oneOf("f")}
			enqueue := func(id string) {
				if err := bb.e.Enqueue(bb.ctx, admission.Request{ID: id, Candidates: cands}, notify); err != nil {
					b.Fatal(err)
				}
			}
			cancel := func(id string) {
				if err := bb.e.Cancel(bb.ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			k := 0
			// a(k) queues on both (the one moved in the step before left
			// room in the primary's queue), n(k) finds it full.
			step := func() {
				enqueue("a" + strconv.Itoa(k))
				enqueue("n" + strconv.Itoa(k))
				bb.clk.Advance(time.Millisecond) // a(k+1-wait) loses p
				cancel("a" + strconv.Itoa(k+1-wait))
				if old := k + 1 - 2*wait; old >= wait-1 { // the first n is n(wait-1)
					cancel("n" + strconv.Itoa(old))
				}
				k++
			}
			for ; k < wait-1; k++ {
				enqueue("a" + strconv.Itoa(k))
				bb.clk.Advance(time.Millisecond)
			}
			for k < 3*wait {
				step()
			}
			for b.Loop() {
				step()
			}
		})
	}
}
