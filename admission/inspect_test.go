package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// TestQueueListsTheOrderOfAdmission queues waiters of mixed priorities and
// tenants on a scope of limit 1, FIFO and round-robin, and checks that
// Queue lists them in exactly the order in which releases then admit them,
// with positions 1, 2, … and the one lease held.
func TestQueueListsTheOrderOfAdmission(t *testing.T) {
	t.Parallel()
	for _, rr := range []bool{false, true} {
		t.Run(fmt.Sprintf("round_robin=%t", rr), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			fc := clock.NewFake(time.Unix(1000, 0))
			m := NewMemory(Options{Clock: fc})
			defer m.Close()
			if err := m.SetScope(ctx, "s", ScopeConfig{Limit: 1, RoundRobin: rr}); err != nil {
				t.Fatal(err)
			}
			cand := []Candidate{{Needs: []Need{{Scope: "s", Amount: 1}}}}
			first, err := m.TryAcquire(ctx, Request{ID: "first", Candidates: cand, Owner: Owner{ID: "me"}})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			admitted := make(chan string, 64)
			leases := make(chan Lease, 64)
			const n = 40
			for i := range n {
				req := Request{ID: fmt.Sprintf("w%02d", i), Priority: int32(rng.IntN(3)), FairnessKey: fmt.Sprintf("k%d", rng.IntN(4)),
					Candidates: cand, Owner: Owner{ID: "me"}}
				if i%5 == 0 {
					req.Deadline = fc.Now().Add(time.Hour)
				}
				if err := m.Enqueue(ctx, req, func(l Lease, err error) {
					if err == nil {
						admitted <- l.WaiterID
						leases <- l
					}
				}); err != nil {
					t.Fatal(err)
				}
				fc.Advance(time.Millisecond)
			}
			q, err := m.Queue(ctx, "s", 1000)
			if err != nil {
				t.Fatal(err)
			}
			if q.Queued != n || len(q.Waiters) != n || q.Held != 1 || len(q.Leases) != 1 || q.Leases[0].WaiterID != "first" {
				t.Fatalf("queue: %d queued, %d listed, %d held %+v", q.Queued, len(q.Waiters), q.Held, q.Leases)
			}
			var listed []string
			for i, w := range q.Waiters {
				if w.Position != i+1 || w.Amount != 1 {
					t.Fatalf("waiter %d: %+v", i, w)
				}
				if (w.ID[1:] == "00" || w.ID[1:] == "05") && w.Deadline.IsZero() {
					t.Fatalf("waiter %s has no deadline", w.ID)
				}
				listed = append(listed, w.ID)
			}
			var order []string
			prev := first
			for range n {
				if err := m.Release(ctx, prev.ID, prev.Owner); err != nil {
					t.Fatal(err)
				}
				order = append(order, <-admitted)
				prev = <-leases
			}
			if !slices.Equal(listed, order) {
				t.Fatalf("listed %v\nadmitted %v", listed, order)
			}
		})
	}
}

// TestQueueBoundsAndErrors: max bounds the list but not the counts; an
// unknown scope and a non-positive max are errors.
func TestQueueBoundsAndErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := NewMemory(Options{Clock: clock.NewFake(time.Unix(1000, 0))})
	defer m.Close()
	if err := m.SetScope(ctx, "s", ScopeConfig{Limit: 0}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetScope(ctx, "blocked", ScopeConfig{Limit: 1, Paused: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		req := Request{ID: fmt.Sprint(i), Candidates: []Candidate{{Needs: []Need{{Scope: "blocked", Amount: 1}, {Scope: "s", Amount: 2}}}}}
		if err := m.Enqueue(ctx, req, func(Lease, error) {}); err != nil {
			t.Fatal(err)
		}
	}
	q, err := m.Queue(ctx, "s", 2)
	if err != nil {
		t.Fatal(err)
	}
	if q.Queued != 5 || len(q.Waiters) != 2 || q.Waiters[0].ID != "0" || q.Waiters[1].Amount != 2 {
		t.Fatalf("queue %+v", q)
	}
	if _, err := m.Queue(ctx, "nope", 2); !errors.Is(err, ErrUnknownScope) {
		t.Fatalf("unknown scope: %v", err)
	}
	if _, err := m.Queue(ctx, "s", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("max 0: %v", err)
	}
}
