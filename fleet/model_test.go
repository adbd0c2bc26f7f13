package fleet

// TestModel runs the admission engine's reference model (package
// admissiontest, Model) against a fleet of two replicas, each call on the
// other replica than the last (spread), as TestConformance does. The
// model observes the leader's engine (its events carry the fleet's lease
// ids) and checks what each replica answers. Two things differ from the
// memory engine's run, by design: requests with a Resolve go to the
// leader's replica (spread), as a func reaches the leader only in process;
// and Position has no scan to be compared with, which only the memory
// engine can make.
//
//	go test -race -run TestModel ./fleet/                      # 10^4 operations over 4 seeds
//	go test -race -run TestModel ./fleet/ -fleet.ops=100000    # 10^5
//	go test -race -run TestModel ./fleet/ -fleet.seed=3        # one seed
//
// (The -fleet flags go after the package.)

import (
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/admission/admissiontest"
)

var (
	flagOps     = flag.Int("fleet.ops", 10_000, "operations TestModel runs in all, split over its seeds")
	flagSeeds   = flag.Int("fleet.seeds", 4, "seeds TestModel splits its operations over")
	flagSeed    = flag.Uint64("fleet.seed", 0, "run TestModel with this seed only (its share of -fleet.ops)")
	flagLenient = flag.Bool("fleet.lenient", false, "follow the engine where it deviates from the contract in known ways (see model.lenient in admissiontest)")
)

func TestModel(t *testing.T) {
	t.Parallel()
	admissiontest.Model(t, func(t *testing.T, opts admission.Options) admission.Engine {
		return &spread{es: replicas(t, 2, opts), holders: make(map[admission.LeaseID]*Engine), waiters: make(map[string]*Engine)}
	}, admissiontest.ModelConfig{
		Ops: *flagOps, Seeds: max(*flagSeeds, 1), Seed: *flagSeed, Lenient: *flagLenient,
		Rerun: "go test -race -run TestModel ./fleet/", FlagPrefix: "fleet",
	})
}

// TestStaleOwnerOfEndedLease: Release, Renew and Reconcile of a lease
// that has ended, by an owner fenced since, answer ErrStaleOwner, as the
// memory engine does (admission.Engine: "a fenced or foreign owner gets
// ErrStaleOwner") — though the replica no longer holds the lease, the
// leader knows the fence. TestModel found it (seed 1, operation 32:
// Release of a lease of n2@1, Fence(n2, 1), Renew of that lease as n2@1).
func TestStaleOwnerOfEndedLease(t *testing.T) {
	t.Parallel()
	n2 := admission.Owner{ID: "n2", Gen: 1}
	homes := map[string]func(t *testing.T) admission.Engine{
		"memory": func(t *testing.T) admission.Engine {
			m := admission.NewMemory(admission.Options{})
			t.Cleanup(m.Close)
			return m
		},
		"leader's replica": func(t *testing.T) admission.Engine { return replicas(t, 2, admission.Options{})[0] },
		"other replica":    func(t *testing.T) admission.Engine { return replicas(t, 2, admission.Options{})[1] },
	}
	for name, home := range homes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, ctx := home(t), t.Context()
			if err := e.SetScope(ctx, "s", admission.ScopeConfig{Limit: 1, LeaseTTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			l, err := e.TryAcquire(ctx, admission.Request{ID: "w", Owner: n2,
				Candidates: []admission.Candidate{{Needs: []admission.Need{{Scope: "s", Amount: 1}}}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Release(ctx, l.ID, n2); err != nil {
				t.Fatal(err)
			}
			if err := e.Fence(ctx, "n2", 1); err != nil {
				t.Fatal(err)
			}
			if err := e.Release(ctx, l.ID, n2); !errors.Is(err, admission.ErrStaleOwner) {
				t.Errorf("Release of the released lease by fenced n2@1: %v, want ErrStaleOwner", err)
			}
			if _, err := e.Renew(ctx, l.ID, n2); !errors.Is(err, admission.ErrStaleOwner) {
				t.Errorf("Renew of the released lease by fenced n2@1: %v, want ErrStaleOwner", err)
			}
			if err := e.Reconcile(ctx, l.ID, n2, admission.Settlement{Tokens: 1}); !errors.Is(err, admission.ErrStaleOwner) {
				t.Errorf("Reconcile of the released lease by fenced n2@1: %v, want ErrStaleOwner", err)
			}
		})
	}
}
