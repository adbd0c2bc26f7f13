package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1000, 0))
	m := NewMemory(Options{Clock: clk})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.SetScope(ctx, "k", ScopeConfig{Limit: 1}))
	must(m.SetScope(ctx, "p", ScopeConfig{Limit: 2}))
	req := func(id string, prio int32) Request {
		return Request{ID: id, Priority: prio, Candidates: []Candidate{{Needs: []Need{{"k", 1}, {"p", 1}}}}}
	}
	l1, err := m.TryAcquire(ctx, req("a", 0))
	must(err)
	if _, err := m.TryAcquire(ctx, req("b", 0)); !errors.Is(err, ErrWouldWait) {
		t.Fatalf("want would wait, got %v", err)
	}
	got := make(chan string, 10)
	var leases []Lease
	notify := func(l Lease, err error) {
		if err != nil {
			got <- "err:" + err.Error()
			return
		}
		leases = append(leases, l)
		got <- l.WaiterID
	}
	must(m.Enqueue(ctx, req("b", 0), notify))
	must(m.Enqueue(ctx, req("c", 5), notify))
	r := Request{ID: "d", Deadline: clk.Now().Add(time.Second), Candidates: []Candidate{{Needs: []Need{{"k", 1}}}}}
	must(m.Enqueue(ctx, r, notify))
	must(m.Release(ctx, l1.ID, Owner{}))
	if w := <-got; w != "c" {
		t.Fatalf("want c first, got %s", w)
	}
	clk.Advance(2 * time.Second)
	if w := <-got; w[:4] != "err:" {
		t.Fatalf("want timeout of d, got %s", w)
	}
	must(m.Release(ctx, leases[0].ID, Owner{}))
	if w := <-got; w != "b" {
		t.Fatalf("want b, got %s", w)
	}
	must(m.Release(ctx, leases[1].ID, Owner{}))
	must(m.Release(ctx, leases[1].ID, Owner{}))
	st, _ := m.Scope(ctx, "p")
	if st.Used != 0 || st.Queued != 0 || st.Leases != 0 {
		t.Fatalf("not quiescent: %+v", st)
	}
}
