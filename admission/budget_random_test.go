package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// TestBudgetRandom runs random admissions, settlements, releases, budget
// changes and clock moves against two budget scopes and checks, at every
// admission, that the budget had room for the cost beside what was spent
// and reserved; after every step, that spent and reserved are what the
// leases settled and hold; and at the end, once every lease is given
// back, that no waiter is left queued.
func TestBudgetRandom(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := newBudgetRun(t, seed)
			for range 3000 {
				r.step()
				r.check()
			}
			r.drain()
		})
	}
}

type budgetRun struct {
	t   *testing.T
	rng *rand.Rand
	clk *clock.Fake
	m   *Memory
	ctx context.Context
	n   int

	mu     sync.Mutex
	leases map[LeaseID]*heldCost // granted, not yet released by the run
	queued map[string]bool
	// spent is what each budget scope has spent in its window, by the
	// run's count; until its window's end.
	spent map[string]int64
	until map[string]time.Time
}

type heldCost struct {
	l    Lease
	cost int64
}

var budgetNames = []string{"b1", "b2"}

func newBudgetRun(t *testing.T, seed uint64) *budgetRun {
	r := &budgetRun{t: t, rng: rand.New(rand.NewPCG(seed, 0xb0d6)), clk: clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		ctx: context.Background(), leases: make(map[LeaseID]*heldCost), queued: make(map[string]bool),
		spent: make(map[string]int64), until: make(map[string]time.Time)}
	r.m = NewMemory(Options{Clock: r.clk, Observer: ObserverFunc(r.observe)})
	t.Cleanup(r.m.Close)
	r.set("c", ScopeConfig{Limit: 3})
	for _, name := range budgetNames {
		r.set(name, ScopeConfig{Budget: 200, BudgetFrom: r.clk.Now(), BudgetUntil: r.clk.Now().Add(time.Hour)})
		r.until[name] = r.clk.Now().Add(time.Hour)
	}
	return r
}

func (r *budgetRun) set(name string, cfg ScopeConfig) {
	if err := r.m.SetScope(r.ctx, name, cfg); err != nil {
		r.t.Fatalf("SetScope(%s): %v", name, err)
	}
}

// observe checks, with the engine's lock held, that an admission's cost
// fit each budget beside what was spent and reserved before it (the
// engine has added its reservation by the time it reports it).
func (r *budgetRun) observe(e Event) {
	if e.Outcome != OutcomeAdmitted {
		return
	}
	if l := r.m.leaseLocked(e.Lease); l == nil || l.cost == 0 {
		return // a cost of 0 spends nothing: no budget stops it
	}
	for _, n := range e.Needs {
		s := r.m.scopes[n.Scope]
		if s == nil || s.cfg.Budget == 0 {
			continue
		}
		if b := s.budget; b.spent+b.reserved > s.cfg.Budget {
			r.t.Errorf("%s admitted with %s spent %d and reserved %d (its own cost included), past its budget %d",
				e.WaiterID, n.Scope, b.spent, b.reserved, s.cfg.Budget)
		}
	}
}

func (r *budgetRun) step() {
	switch k := r.rng.IntN(10); {
	case k < 4:
		r.enqueue()
	case k < 6:
		if h := r.pick(); h != nil {
			cost := r.rng.Int64N(60)
			if err := r.m.Reconcile(r.ctx, h.l.ID, h.l.Owner, Settlement{Cost: cost}); err != nil {
				r.t.Fatalf("Reconcile: %v", err)
			}
			r.mu.Lock()
			h.cost = cost
			r.mu.Unlock()
		}
	case k < 8:
		if h := r.pick(); h != nil {
			r.release(h)
		}
	case k < 9:
		r.clk.Advance(time.Duration(r.rng.Int64N(int64(10 * time.Minute))))
		r.rollAll()
	default:
		name := budgetNames[r.rng.IntN(len(budgetNames))]
		st, _ := r.m.Scope(r.ctx, name)
		// Within the window in force: BudgetSpent is ignored.
		from := st.BudgetFrom
		until := from.Add(time.Hour)
		r.set(name, ScopeConfig{Budget: 100 + r.rng.Int64N(200), BudgetSpent: 9999, BudgetFrom: from, BudgetUntil: until})
		r.until[name] = until
		r.rollAll()
	}
}

func (r *budgetRun) enqueue() {
	r.n++
	id := fmt.Sprintf("w%d", r.n)
	var cands []Candidate
	for range 1 + r.rng.IntN(2) {
		c := Candidate{Cost: r.rng.Int64N(50), Needs: []Need{{Scope: "c", Amount: 1}}}
		for _, name := range budgetNames {
			if r.rng.IntN(2) == 0 {
				c.Needs = append(c.Needs, Need{Scope: name, Amount: 1})
			}
		}
		cands = append(cands, c)
	}
	r.mu.Lock()
	r.queued[id] = true
	r.mu.Unlock()
	err := r.m.Enqueue(r.ctx, Request{ID: id, Candidates: cands}, func(l Lease, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.queued, id)
		if err == nil {
			r.leases[l.ID] = &heldCost{l: l, cost: l.Cost}
		} else if !errors.Is(err, ErrBudgetExceeded) {
			r.t.Errorf("%s: %v; want a lease or ErrBudgetExceeded", id, err)
		}
	})
	if err != nil {
		r.mu.Lock()
		delete(r.queued, id)
		r.mu.Unlock()
		if !errors.Is(err, ErrBudgetExceeded) {
			r.t.Fatalf("Enqueue(%s): %v", id, err)
		}
	}
}

func (r *budgetRun) pick() *heldCost {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.leases { // map order: random enough
		return h
	}
	return nil
}

// release gives h back and counts its cost spent in its budget scopes.
func (r *budgetRun) release(h *heldCost) {
	r.mu.Lock()
	delete(r.leases, h.l.ID)
	cost := h.cost
	r.mu.Unlock()
	if err := r.m.Release(r.ctx, h.l.ID, h.l.Owner); err != nil {
		r.t.Fatalf("Release: %v", err)
	}
	for _, n := range h.l.Needs {
		if _, ok := r.until[n.Scope]; ok {
			r.spent[n.Scope] += cost
		}
	}
}

// rollAll starts the next window, by the run's count, of each budget
// whose window has ended.
func (r *budgetRun) rollAll() {
	for name, until := range r.until {
		if !until.IsZero() && !r.clk.Now().Before(until) {
			r.spent[name], r.until[name] = 0, time.Time{}
		}
	}
}

// check compares each budget scope's spent and reserved with the run's,
// and checks that no waiter still queued there reserves more than it has
// left.
func (r *budgetRun) check() {
	r.t.Helper()
	r.m.mu.Lock()
	for _, name := range budgetNames {
		s := r.m.scopes[name]
		s.budget.roll(r.clk.Now().UnixNano())
		if s.overs.len() > 0 && s.budget.spent+s.overs.top().cost > s.cfg.Budget {
			r.t.Errorf("%s queues %s with a cost of %d, but has %d left", name, s.overs.top().w.id, s.overs.top().cost, s.cfg.Budget-s.budget.spent)
		}
	}
	r.m.mu.Unlock()
	r.mu.Lock()
	reserved := make(map[string]int64)
	for _, h := range r.leases {
		for _, n := range h.l.Needs {
			reserved[n.Scope] += h.cost
		}
	}
	r.mu.Unlock()
	for _, name := range budgetNames {
		st, err := r.m.Scope(r.ctx, name)
		if err != nil {
			r.t.Fatal(err)
		}
		if st.BudgetSpent != r.spent[name] || st.BudgetReserved != reserved[name] {
			r.t.Fatalf("%s: spent %d reserved %d; the run counts spent %d reserved %d", name, st.BudgetSpent, st.BudgetReserved, r.spent[name], reserved[name])
		}
	}
}

// drain gives every lease back, and those granted meanwhile, and checks
// that no waiter is left queued with nothing held.
func (r *budgetRun) drain() {
	for {
		h := r.pick()
		if h == nil {
			break
		}
		r.release(h)
	}
	r.check()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queued) > 0 {
		r.t.Errorf("%d waiters left queued with no lease held: %v", len(r.queued), r.queued)
	}
}
