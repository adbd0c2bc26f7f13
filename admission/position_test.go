package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// positionByScan is Position as it was first written, kept as the oracle:
// it compares the waiter with every waiter parked on its scope by
// s.precedes, the definition of the scope's order.
func (m *Memory) positionByScan(waiterID string) (Position, error) {
	m.lockSettled()
	defer m.pumpUnlockDeliver()
	w := m.waiters[waiterID]
	if w == nil {
		return Position{}, fmt.Errorf("%w: %s", ErrNotQueued, waiterID)
	}
	c := w.class
	var s *scope
	if len(c.parks) > 0 {
		s = c.parks[0].s
	} else {
		s = c.cands[0].needs[0].s
	}
	ahead := 0
	counted := false
	for _, e := range s.waiting.items {
		counted = counted || e.p.c == c
		e.p.c.members.each(func(o *waiter) {
			if o != w && s.precedes(o, w) {
				ahead++
			}
		})
	}
	if !counted {
		c.members.each(func(o *waiter) {
			if o != w && o.seq < w.seq {
				ahead++
			}
		})
	}
	return Position{Scope: s.name, Ahead: ahead, Queued: s.queued, Place: w.seq}, nil
}

// TestRosterMatchesSortedList drives a roster and a sorted list of the same
// waiters through random joins (mostly in arrival order, some earlier, as a
// re-resolved waiter joins) and leaves (mostly the head), and compares what
// the roster answers.
func TestRosterMatchesSortedList(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var r roster
		var want []*waiter // by seq
		var gone []*waiter // left, may come back
		next := uint64(1000)
		for step := range 20_000 {
			switch k := rng.IntN(100); {
			case k < 45 || len(want) == 0:
				next += uint64(1 + rng.IntN(3))
				w := &waiter{seq: next}
				if rng.IntN(10) == 0 && len(gone) > 0 {
					i := rng.IntN(len(gone))
					w = gone[i]
					gone = slices.Delete(gone, i, i+1)
				} else if rng.IntN(20) == 0 {
					w.seq = next - uint64(rng.IntN(int(next-900)))
					if slices.ContainsFunc(want, func(o *waiter) bool { return o.seq == w.seq }) ||
						slices.ContainsFunc(gone, func(o *waiter) bool { return o.seq == w.seq }) {
						continue
					}
				}
				r.push(w)
				i, _ := slices.BinarySearchFunc(want, w.seq, func(o *waiter, s uint64) int { return cmpSeq(o.seq, s) })
				want = slices.Insert(want, i, w)
			case k < 80:
				r.remove(want[0])
				gone = append(gone, want[0])
				want = want[1:]
			default:
				i := rng.IntN(len(want))
				r.remove(want[i])
				gone = append(gone, want[i])
				want = slices.Delete(want, i, i+1)
			}
			if r.len() != len(want) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, r.len(), len(want))
			}
			if len(want) == 0 {
				continue
			}
			if r.head() != want[0] {
				t.Fatalf("seed %d step %d: head %d, want %d", seed, step, r.head().seq, want[0].seq)
			}
			i := rng.IntN(len(want))
			probe := want[i].seq + uint64(rng.IntN(2))
			wantBefore, _ := slices.BinarySearchFunc(want, probe, func(o *waiter, s uint64) int { return cmpSeq(o.seq, s) })
			if got := r.before(probe); got != wantBefore {
				t.Fatalf("seed %d step %d: before(%d) = %d, want %d", seed, step, probe, got, wantBefore)
			}
			if got := r.countWhile(func(o *waiter) bool { return o.seq < probe }); got != wantBefore {
				t.Fatalf("seed %d step %d: countWhile(seq < %d) = %d, want %d", seed, step, probe, got, wantBefore)
			}
			prev, next := r.neighbors(want[i])
			if (i > 0 && prev != want[i-1]) || (i == 0 && prev != nil) ||
				(i+1 < len(want) && next != want[i+1]) || (i+1 == len(want) && next != nil) {
				t.Fatalf("seed %d step %d: wrong neighbors of member %d", seed, step, i)
			}
			if step%997 == 0 && !slices.Equal(r.appendTo(nil), want) {
				t.Fatalf("seed %d step %d: members out of order", seed, step)
			}
		}
	}
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestPositionMatchesScan checks Position's Ahead, Scope and Queued against
// positionByScan for every queued waiter, after each step of random work:
// priorities, several fairness keys, FIFO and round-robin scopes (turned
// on and off), candidates in several scopes, holds after a fairness window,
// deadlines, cancels, and fences and activations that re-resolve waiters
// into other classes.
func TestPositionMatchesScan(t *testing.T) {
	t.Parallel()
	seeds := uint64(20)
	if testing.Short() {
		seeds = 5
	}
	for seed := range seeds {
		checkPositionsOnRandomQueues(t, seed)
	}
}

func checkPositionsOnRandomQueues(t *testing.T, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 11))
	clk := clock.NewFake(time.Unix(1000, 0))
	m := NewMemory(Options{Clock: clk})
	defer m.Close()
	names := []string{"a", "b", "c", "rr1", "rr2", "node"}
	cfgs := map[string]ScopeConfig{
		"a":    {Limit: 2, FairnessWindow: 3 * time.Second},
		"b":    {Limit: 3},
		"c":    {Limit: 1, FairnessWindow: time.Second},
		"rr1":  {Limit: 2, RoundRobin: true, FairnessWindow: 2 * time.Second},
		"rr2":  {Limit: 1, RoundRobin: true},
		"node": {Limit: 1, Owner: "n", OwnerGen: 1},
	}
	for _, n := range names {
		if err := m.SetScope(ctx, n, cfgs[n]); err != nil {
			t.Fatal(err)
		}
	}
	gen := uint64(1)
	var leases []Lease
	notify := func(l Lease, err error) {
		if err == nil {
			leases = append(leases, l)
		}
	}
	randCands := func() []Candidate {
		cands := make([]Candidate, 1+rng.IntN(2))
		for i := range cands {
			perm := rng.Perm(len(names))[:1+rng.IntN(2)]
			for _, j := range perm {
				cands[i].Needs = append(cands[i].Needs, Need{Scope: names[j], Amount: int64(1 + rng.IntN(2))})
			}
		}
		return cands
	}
	// A few shapes of candidates, so that classes have many members.
	shapes := make([][]Candidate, 6)
	for i := range shapes {
		shapes[i] = randCands()
	}
	id := 0
	for step := range 1500 {
		switch k := rng.IntN(100); {
		case k < 50:
			id++
			wid := "w" + strconv.Itoa(id)
			req := Request{
				ID:          wid,
				Priority:    int32(rng.IntN(3)),
				FairnessKey: "k" + strconv.Itoa(rng.IntN(4)),
				Candidates:  shapes[rng.IntN(len(shapes))],
			}
			if rng.IntN(4) == 0 {
				req.Deadline = clk.Now().Add(time.Duration(1+rng.IntN(20)) * time.Second)
			}
			if rng.IntN(3) == 0 {
				req.Resolve = func(string) ([]Candidate, error) { return shapes[rng.IntN(len(shapes))], nil }
			}
			_ = m.Enqueue(ctx, req, notify)
		case k < 70 && len(leases) > 0:
			i := rng.IntN(len(leases))
			_ = m.Release(ctx, leases[i].ID, leases[i].Owner)
			leases = slices.Delete(leases, i, i+1)
		case k < 78:
			_ = m.Cancel(ctx, "w"+strconv.Itoa(1+rng.IntN(id+1)))
		case k < 88:
			clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
		case k < 92:
			_ = m.Fence(ctx, "n", gen)
			gen++
			_ = m.Activate(ctx, "n", gen)
		case k < 94:
			_ = m.Fence(ctx, "n", gen)
			gen++
		case k < 97:
			_ = m.Activate(ctx, "n", gen)
		default:
			n := names[rng.IntN(len(names)-1)]
			cfg := cfgs[n]
			cfg.RoundRobin = !cfg.RoundRobin
			cfgs[n] = cfg
			_ = m.SetScope(ctx, n, cfg)
		}
		m.mu.Lock()
		ids := make([]string, 0, len(m.waiters))
		for wid := range m.waiters {
			ids = append(ids, wid)
		}
		m.mu.Unlock()
		slices.Sort(ids)
		if step%50 != 0 && len(ids) > 10 {
			rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			ids = ids[:10] // all of them only now and then
		}
		for _, wid := range ids {
			got, err := m.Position(ctx, wid)
			if err != nil {
				t.Fatalf("seed %d step %d: Position(%s): %v", seed, step, wid, err)
			}
			want, _ := m.positionByScan(wid)
			got.EstimatedWait = 0
			if got != want {
				t.Fatalf("seed %d step %d: Position(%s) = %+v, the scan says %+v", seed, step, wid, got, want)
			}
		}
	}
}
