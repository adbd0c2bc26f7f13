package gateway

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// eachRetireLater runs test in parallel subtests, with
// Config.RetireLater false and true, each on a bundle of its own whose
// service has started.
func eachRetireLater(t *testing.T, test func(t *testing.T, b *testBundle, later bool)) {
	t.Parallel()
	for _, later := range []bool{false, true} {
		t.Run(fmt.Sprintf("RetireLater=%v", later), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{cfg: Config{RetireLater: later}})
			ctx := t.Context()
			if err := b.svc.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.svc.Stop(ctx) })
			test(t, b, later)
		})
	}
}

// TestLeftPlatformModelHeldForItsLeases: a platform model a catalog
// removes while a lease is held on its scope (a task running there) is
// held once its removal is complete — at the apply in one process, at
// RetireLeft with Config.RetireLater — rather than retired: its scope
// stays, with the lease counted, and its target is the one it had,
// marked Retired, so that the task follows its upstream job to the end.
// A catalog that has it again takes it back, lease and all. Once its
// scope holds no lease, the next poll of the overrides retires it.
func TestLeftPlatformModelHeldForItsLeases(t *testing.T) {
	eachRetireLater(t, func(t *testing.T, b *testBundle, later bool) {
		ctx := t.Context()
		scope := weir.PlatformModelScope("up2/m")
		lease := b.fill(t, "up2/m", 1)
		without := b.catalog()
		onlyUp(&without)
		remove := func() {
			t.Helper()
			if err := b.svc.Apply(ctx, without, ""); err != nil {
				t.Fatal(err)
			}
			if later {
				if n := b.svc.RetireLeft(ctx); n != 0 {
					t.Errorf("RetireLeft retired %d; want none: up2/m holds a lease", n)
				}
			}
		}
		remove()
		tg, ok := b.svc.Target("up2/m", "")
		if !ok || !tg.Retired || tg.PlatformModel != "up2/m" || tg.Upstream != "gpt-4o-mini" || tg.Adapter == nil {
			t.Errorf("up2/m's target once removed, a lease held: %+v, %v; want its last one, retired", tg, ok)
		}
		if st := b.scope(t, scope); st.Leases != 1 || st.Config.Limit != 1 {
			t.Errorf("up2/m's scope once removed: %d leases, limit %d; want it kept, the lease counted", st.Leases, st.Config.Limit)
		}
		if !b.svc.Leaving() {
			t.Error("nothing left to retire while up2/m is held")
		}
		// Taken back by a catalog that has it: the scope is the
		// catalog's again, with its lease.
		again := b.catalog()
		again.PlatformModels[1].Concurrency = 1
		if err := b.svc.Apply(ctx, again, ""); err != nil {
			t.Fatal(err)
		}
		if tg, ok := b.svc.Target("up2/m", ""); !ok || tg.Retired {
			t.Errorf("up2/m's target in a catalog that has it again: %+v, %v; want the catalog's", tg, ok)
		}
		if st := b.scope(t, scope); st.Leases != 1 {
			t.Errorf("up2/m's scope in a catalog that has it again: %d leases; want the lease still counted", st.Leases)
		}
		remove()
		if err := b.engine.Release(ctx, lease.ID, lease.Owner); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(b.svc.cfg.OverridePoll)
		if _, err := b.engine.Scope(ctx, scope); !errors.Is(err, admission.ErrUnknownScope) {
			t.Errorf("up2/m's scope once its lease ended: %v; want it retired", err)
		}
		if tg, ok := b.svc.Target("up2/m", ""); ok {
			t.Errorf("up2/m's target once retired: %+v; want none", tg)
		}
		if b.svc.Leaving() {
			t.Error("still leaving once up2/m retired")
		}
	})
}

// TestTaskOnAHeldPlatformModelPlannedThere: a task running on a platform
// model kept for the leases on it once a catalog removed it (a fleet's
// next leader restoring the task's lease asks for its candidates) is
// planned there alone, with its tenant's scopes; a task queued for the
// same model is planned on the catalog's platform models only.
func TestTaskOnAHeldPlatformModelPlannedThere(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_m", Hash: "hash_m", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	b.fill(t, "up2/m", 1)
	without := b.catalog()
	onlyUp(&without)
	if err := b.svc.Apply(ctx, without, ""); err != nil {
		t.Fatal(err)
	}
	running := weir.Task{ID: "task_1", Model: "m", KeyID: "key_m", Status: weir.TaskRunning, PlatformModel: "up2/m", UpstreamID: "job_1"}
	cands, err := b.svc.Plan(ctx, running)
	want := weir.PlatformModelScope("up2/m")
	if err != nil || len(cands) != 1 || len(cands[0].Needs) != 3 || cands[0].Needs[2].Scope != want ||
		cands[0].Needs[0].Scope != weir.KeyScope("key_m") {
		t.Errorf("a task running on up2/m, held: %+v, %v; want one candidate needing its key's, group's and %s", cands, err, want)
	}
	queued := weir.Task{ID: "task_2", Model: "m", KeyID: "key_m", Status: weir.TaskQueued}
	cands, err = b.svc.Plan(ctx, queued)
	if err != nil || len(cands) != 1 || cands[0].Needs[2].Scope != weir.PlatformModelScope("up/m") {
		t.Errorf("a queued task: %+v, %v; want it planned on up/m alone", cands, err)
	}
}
