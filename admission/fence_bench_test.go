package admission_test

// BenchmarkFence is the "fence-cost" scenario of docs/benchmarks.md:
//
//	BenchmarkFence/elsewhere=N
//	    fence-ns/op        one Fence of a node among 10^3, each node a scope
//	                       of its own (limit 4, all 4 held) with 2 waiters of
//	                       its own queued, while N other waiters queue on a
//	                       scope of no owner; only the Fence is timed
//	    1k-fence-ns/op     the same with 10^3 waiters elsewhere
//	    x-1k               fence-ns/op ÷ 1k-fence-ns/op
//	(ns/op is suppressed: it counts the untimed refill of the node too)

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

const (
	fenceNodes      = 1_000
	fenceNodeLimit  = 4
	fenceNodeQueued = 2
)

// fenceFixture is an engine with fenceNodes node scopes and a queue
// elsewhere.
type fenceFixture struct {
	m    *admission.Memory
	gens []uint64 // each node's current generation
	seq  int
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

func newFenceFixture(elsewhere int) (*fenceFixture, error) {
	ctx := context.Background()
	f := &fenceFixture{m: newBenchEngine(), gens: make([]uint64, fenceNodes)}
	if err := f.m.SetScope(ctx, "cloud", admission.ScopeConfig{Limit: 1}); err != nil {
		return nil, err
	}
	gw := admission.Owner{ID: "gw", Gen: 1}
	cloud := []admission.Candidate{{Needs: []admission.Need{{Scope: "cloud", Amount: 1}}}}
	if _, err := f.m.TryAcquire(ctx, admission.Request{ID: "cloud-holder", Owner: gw, Candidates: cloud}); err != nil {
		return nil, err
	}
	for i := range elsewhere {
		req := admission.Request{ID: fmt.Sprintf("cloud-%d", i), Owner: gw, Candidates: cloud}
		if err := f.m.Enqueue(ctx, req, func(admission.Lease, error) {}); err != nil {
			return nil, err
		}
	}
	for i := range fenceNodes {
		if err := f.fill(ctx, i); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// fill brings node i back at its next generation: its scope, its slots
// all held, its waiters queued.
func (f *fenceFixture) fill(ctx context.Context, i int) error {
	f.gens[i]++
	owner := admission.Owner{ID: nodeName(i), Gen: f.gens[i]}
	if err := f.m.SetScope(ctx, nodeName(i), admission.ScopeConfig{Limit: fenceNodeLimit, Owner: owner.ID, OwnerGen: owner.Gen}); err != nil {
		return err
	}
	cands := []admission.Candidate{{Needs: []admission.Need{{Scope: nodeName(i), Amount: 1}}}}
	for range fenceNodeLimit + fenceNodeQueued {
		f.seq++
		req := admission.Request{ID: fmt.Sprintf("n%d-%d", i, f.seq), Owner: owner, Candidates: cands}
		if err := f.m.Enqueue(ctx, req, func(admission.Lease, error) {}); err != nil {
			return err
		}
	}
	st, err := f.m.Scope(ctx, nodeName(i))
	if err != nil {
		return err
	}
	if st.Leases != fenceNodeLimit || st.Queued != fenceNodeQueued {
		return fmt.Errorf("node %d: %d leases and %d queued, want %d and %d", i, st.Leases, st.Queued, fenceNodeLimit, fenceNodeQueued)
	}
	return nil
}

// fence fences node i at its generation and returns how long the Fence
// took; the node is then filled again, untimed.
func (f *fenceFixture) fence(ctx context.Context, i int) (time.Duration, error) {
	start := time.Now()
	err := f.m.Fence(ctx, nodeName(i), f.gens[i])
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	st, err := f.m.Scope(ctx, nodeName(i))
	if err != nil {
		return 0, err
	}
	if st.Leases != 0 || st.Queued != 0 {
		return 0, fmt.Errorf("fenced node %d still has %d leases and %d queued", i, st.Leases, st.Queued)
	}
	return took, f.fill(ctx, i)
}

func BenchmarkFence(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("elsewhere=%d", n), func(b *testing.B) {
			base := fenceBaseline(b)
			f, err := newFenceFixture(n)
			if err != nil {
				b.Fatal(err)
			}
			defer f.m.Close()
			ctx := context.Background()
			var timed time.Duration
			i := 0
			for b.Loop() {
				took, err := f.fence(ctx, i%fenceNodes)
				if err != nil {
					b.Fatal(err)
				}
				timed += took
				i++
			}
			ns := float64(timed.Nanoseconds()) / float64(i)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ns, "fence-ns/op")
			b.ReportMetric(base, "1k-fence-ns/op")
			b.ReportMetric(ns/base, "x-1k")
		})
	}
}

var fence1k float64

// fenceBaseline measures, once, BenchmarkFence's Fence with 10^3 waiters
// elsewhere, on a fixture of its own.
func fenceBaseline(b *testing.B) float64 {
	if fence1k != 0 {
		return fence1k
	}
	f, err := newFenceFixture(1_000)
	if err != nil {
		b.Fatalf("baseline: %v", err)
	}
	defer f.m.Close()
	ctx := context.Background()
	var timed time.Duration
	const ops = 5_000
	for i := range ops {
		took, err := f.fence(ctx, i%fenceNodes)
		if err != nil {
			b.Fatalf("baseline: %v", err)
		}
		timed += took
	}
	fence1k = float64(timed.Nanoseconds()) / ops
	return fence1k
}
