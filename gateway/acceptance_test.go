package gateway

import (
	"context"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestAcceptanceRunScopes: a run's copies follow a reload (a raised
// limit, a platform model that left), and once it has been idle past
// runIdle the next run's first request retires them.
func TestAcceptanceRunScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) { c.PlatformModels[0].Limits.Concurrency = 2 }})
	ctx := context.Background()
	pm, pm2 := weir.PlatformModelScope("up/m"), weir.PlatformModelScope("up2/m")
	if err := b.svc.ensureRun(ctx, "r1", []string{pm, pm2}); err != nil {
		t.Fatal(err)
	}
	copy1, copy2 := weir.AcceptanceScope("r1", pm), weir.AcceptanceScope("r1", pm2)
	if st := b.scope(t, copy1); st.Config.Limit != 2 || st.Config.QueueLimit != weir.AcceptanceQueueLimit {
		t.Fatalf("the run's copy of %s: %+v", pm, st.Config)
	}

	cat := b.catalog()
	onlyUp(&cat)
	cat.PlatformModels[0].Limits.Concurrency = 5
	if err := b.svc.Apply(ctx, cat, ""); err != nil {
		t.Fatal(err)
	}
	if st := b.scope(t, copy1); st.Config.Limit != 5 {
		t.Errorf("after a reload raising %s to 5, the copy's limit is %d", pm, st.Config.Limit)
	}
	if _, err := b.engine.Scope(ctx, copy2); err == nil {
		t.Errorf("the copy of %s outlived it", pm2)
	}

	b.clock.Advance(runIdle + 1)
	if err := b.svc.ensureRun(ctx, "r2", []string{pm}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.Scope(ctx, copy1); err == nil {
		t.Error("an idle run's scope was not retired")
	}
	b.scope(t, weir.AcceptanceScope("r2", pm))
}
