package admission_test

import (
	"context"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// BenchmarkBudgetAcquireRelease measures TryAcquire then Reconcile and
// Release in three scopes (a key, its group, a platform model), each with
// a budget and without, in the same run: what a budget adds to the path
// (a reservation, a settlement and a look at the window per scope).
func BenchmarkBudgetAcquireRelease(b *testing.B) {
	for _, budget := range []bool{false, true} {
		name := "budget=false"
		if budget {
			name = "budget=true"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			e := newBenchEngine()
			defer e.Close()
			now := time.Now()
			var needs []admission.Need
			for _, s := range []string{"key:k1", "group:g1", "model:m1"} {
				cfg := admission.ScopeConfig{Limit: roomy}
				if budget {
					cfg.Budget, cfg.BudgetFrom, cfg.BudgetUntil = 1<<62, now, now.Add(24*time.Hour)
				}
				if err := e.SetScope(ctx, s, cfg); err != nil {
					b.Fatal(err)
				}
				needs = append(needs, admission.Need{Scope: s, Amount: 1})
			}
			req := admission.Request{ID: "r", Owner: benchOwner, Candidates: []admission.Candidate{{Needs: needs, Cost: 100}}}
			used := admission.Settlement{Cost: 90}
			b.ResetTimer()
			for range b.N {
				l, err := e.TryAcquire(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Reconcile(ctx, l.ID, benchOwner, used); err != nil {
					b.Fatal(err)
				}
				if err := e.Release(ctx, l.ID, benchOwner); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
