// Regression tests for engine bugs the reference model found (model_test.go).

package admission_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

func TestRegressionPumpEarliestFirst(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	var log []string
	e := admission.NewMemory(admission.Options{Clock: clk, Observer: admission.ObserverFunc(func(ev admission.Event) {
		log = append(log, fmt.Sprintf("%s %s", ev.Outcome, ev.WaiterID))
	})})
	e.SetScope(ctx, "a", admission.ScopeConfig{Limit: 1})
	e.SetScope(ctx, "x", admission.ScopeConfig{Limit: 2})
	one := func(needs ...admission.Need) []admission.Candidate { return []admission.Candidate{{Needs: needs}} }
	l1, err := e.TryAcquire(ctx, admission.Request{ID: "l1", Candidates: one(admission.Need{"a", 1}, admission.Need{"x", 1})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryAcquire(ctx, admission.Request{ID: "l2", Candidates: one(admission.Need{"x", 1})}); err != nil {
		t.Fatal(err)
	}
	nop := func(admission.Lease, error) {}
	// big waits for a and for 2 of x; small, later, for 1 of x.
	e.Enqueue(ctx, admission.Request{ID: "big", Candidates: one(admission.Need{"a", 1}, admission.Need{"x", 2})}, nop)
	e.Enqueue(ctx, admission.Request{ID: "small", Candidates: one(admission.Need{"x", 1})}, nop)
	// Releasing l1 frees a and 1 of x: big now waits for x alone, and
	// precedes small there, so small must not take x.
	e.Release(ctx, l1.ID, admission.Owner{})
	t.Logf("events: %v", log)
	if _, err := e.Position(ctx, "small"); err != nil {
		t.Errorf("small was admitted past big, which waits for x alone: %v", log)
	}
}

func TestRegressionReselectKeepsTurn(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	var log []string
	e := admission.NewMemory(admission.Options{Clock: clk, Observer: admission.ObserverFunc(func(ev admission.Event) {
		log = append(log, fmt.Sprintf("%s %s", ev.Outcome, ev.WaiterID))
	})})
	e.SetScope(ctx, "y", admission.ScopeConfig{Limit: 1, RoundRobin: true})
	e.SetScope(ctx, "z", admission.ScopeConfig{Limit: 1})
	e.SetScope(ctx, "node", admission.ScopeConfig{Limit: 1, Owner: "n1", OwnerGen: 1})
	one := func(needs ...admission.Need) []admission.Candidate { return []admission.Candidate{{Needs: needs}} }
	ly, _ := e.TryAcquire(ctx, admission.Request{ID: "ly", Candidates: one(admission.Need{"y", 1})})
	e.TryAcquire(ctx, admission.Request{ID: "lz", Candidates: one(admission.Need{"z", 1})})
	var got []string
	note := func(id string) func(admission.Lease, error) {
		return func(l admission.Lease, err error) { got = append(got, fmt.Sprintf("%s:%v", id, err)) }
	}
	// first and second have the same key and priority; first arrived first.
	e.Enqueue(ctx, admission.Request{ID: "first", FairnessKey: "k", Candidates: one(admission.Need{"y", 1}),
		Resolve: func(string) ([]admission.Candidate, error) {
			return []admission.Candidate{{Needs: []admission.Need{{"y", 1}}}, {Needs: []admission.Need{{"z", 1}}}}, nil
		}}, note("first"))
	e.Enqueue(ctx, admission.Request{ID: "second", FairnessKey: "k", Candidates: one(admission.Need{"y", 1})}, note("second"))
	// A node reconnects: every waiter with a Resolve is asked again.
	e.Fence(ctx, "n1", 1)
	e.Activate(ctx, "n1", 2)
	e.Release(ctx, ly.ID, admission.Owner{})
	t.Logf("events: %v", log)
	if len(got) != 1 || got[0] != "first:<nil>" {
		t.Errorf("after y freed, notified %v; want first (FIFO within key k)", got)
	}
}

func TestRegressionFenceKeepsDroppedCandidatesDropped(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	e := admission.NewMemory(admission.Options{Clock: clk})
	e.SetScope(ctx, "q", admission.ScopeConfig{Limit: 1, QueueLimit: 1})
	e.SetScope(ctx, "x", admission.ScopeConfig{Limit: 1})
	e.SetScope(ctx, "node", admission.ScopeConfig{Limit: 1, Owner: "n1", OwnerGen: 1})
	one := func(needs ...admission.Need) []admission.Candidate { return []admission.Candidate{{Needs: needs}} }
	e.TryAcquire(ctx, admission.Request{ID: "lq", Candidates: one(admission.Need{"q", 1})})
	e.TryAcquire(ctx, admission.Request{ID: "lx", Candidates: one(admission.Need{"x", 1})})
	e.TryAcquire(ctx, admission.Request{ID: "ln", Candidates: one(admission.Need{"node", 1})})
	nop := func(admission.Lease, error) {}
	if err := e.Enqueue(ctx, admission.Request{ID: "a", Candidates: one(admission.Need{"q", 1})}, nop); err != nil {
		t.Fatal(err)
	}
	// b: q's queue is full, so its q candidate is dropped; it queues on x and node.
	if err := e.Enqueue(ctx, admission.Request{ID: "b", Candidates: []admission.Candidate{
		{Needs: []admission.Need{{"q", 1}}}, {Needs: []admission.Need{{"x", 1}}}, {Needs: []admission.Need{{"node", 1}}}}}, nop); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Scope(ctx, "q")
	t.Logf("q before fence: queued %d (limit %d)", st.Queued, st.Config.QueueLimit)
	e.Fence(ctx, "n1", 1)
	st, _ = e.Scope(ctx, "q")
	if st.Queued > st.Config.QueueLimit {
		t.Errorf("after Fence of n1, q has %d queued, over its QueueLimit %d", st.Queued, st.Config.QueueLimit)
	}
}

func TestRestoreGrantsPastTheLimit(t *testing.T) {
	ctx := context.Background()
	e := admission.NewMemory(admission.Options{Clock: clock.NewFake(time.Unix(1000, 0))})
	e.SetScope(ctx, "s", admission.ScopeConfig{Limit: 1})
	req := func(id string) admission.Request {
		return admission.Request{ID: id, Candidates: []admission.Candidate{{Needs: []admission.Need{{"s", 1}}}}}
	}
	if _, err := e.Restore(ctx, req("a"), 0); err != nil {
		t.Fatal(err)
	}
	b, err := e.Restore(ctx, req("b"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Scope(ctx, "s"); st.Used != 2 {
		t.Fatalf("used %d after restoring two leases, want 2", st.Used)
	}
	// Over the limit: nothing new is admitted until usage is below it.
	if _, err := e.TryAcquire(ctx, req("c")); err == nil {
		t.Fatal("admitted past a restored, over-full scope")
	}
	if err := e.Release(ctx, b.ID, b.Owner); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryAcquire(ctx, req("c")); err == nil {
		t.Fatal("admitted at the limit")
	}
	if _, err := e.Restore(ctx, req("d"), 1); err == nil {
		t.Fatal("restored a candidate the request does not have")
	}
}

// TestRegressionReselectTakesFirstLaterTurn: a waiter re-resolved onto a
// round-robin scope it was not waiting in takes the turn of the first
// later waiter of its key there. That waiter may sit behind an earlier
// one in its class (b behind a): looking only at class heads gave w the
// turn of x, later still, and b was admitted before w though w arrived
// first. Found reviewing Position's roster (admission/position_test.go).
func TestRegressionReselectTakesFirstLaterTurn(t *testing.T) {
	ctx := context.Background()
	e := admission.NewMemory(admission.Options{Clock: clock.NewFake(time.Unix(1000, 0))})
	for name, cfg := range map[string]admission.ScopeConfig{
		"s": {Limit: 1, RoundRobin: true}, "t": {Limit: 1},
		"p": {Limit: 9}, "q": {Limit: 9}, "r": {Limit: 9},
	} {
		if err := e.SetScope(ctx, name, cfg); err != nil {
			t.Fatal(err)
		}
	}
	one := func(scopes ...string) []admission.Candidate {
		c := admission.Candidate{}
		for _, s := range scopes {
			c.Needs = append(c.Needs, admission.Need{Scope: s, Amount: 1})
		}
		return []admission.Candidate{c}
	}
	held, err := e.TryAcquire(ctx, admission.Request{ID: "held", Candidates: one("s")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.TryAcquire(ctx, admission.Request{ID: "t-held", Candidates: one("t")}); err != nil {
		t.Fatal(err)
	}
	var order []string
	admitted := make(chan admission.Lease, 8)
	enqueue := func(id string, cands []admission.Candidate, resolve func(string) ([]admission.Candidate, error)) {
		t.Helper()
		req := admission.Request{ID: id, FairnessKey: "k", Candidates: cands, Resolve: resolve}
		if err := e.Enqueue(ctx, req, func(l admission.Lease, err error) {
			if err != nil {
				t.Errorf("%s: %v", id, err)
				return
			}
			order = append(order, id)
			admitted <- l
		}); err != nil {
			t.Fatal(err)
		}
	}
	// All of key k: a and b share a class on s; w waits on t; x has a
	// class of its own on s.
	enqueue("a", one("s", "p"), nil)
	enqueue("w", one("t"), func(string) ([]admission.Candidate, error) { return one("s", "q"), nil })
	enqueue("b", one("s", "p"), nil)
	enqueue("x", one("s", "r"), nil)
	// Removing t re-resolves w onto s, new to it there.
	if err := e.RemoveScope(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	next := held
	for range 4 {
		if err := e.Release(ctx, next.ID, next.Owner); err != nil {
			t.Fatal(err)
		}
		next = <-admitted
	}
	if fmt.Sprint(order) != "[a w b x]" {
		t.Errorf("admitted %v on s, want [a w b x]: one key is first-in-first-out, and w arrived before b", order)
	}
}
