package gateway

import (
	"maps"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// TestPlanCountsSkippedCandidates: a task planned without some of its
// model's candidates counts each by why: cooling down after failures,
// unable to serve its input; and a candidate it keeps but whose upstream
// asked for a pause counts as paused.
func TestPlanCountsSkippedCandidates(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		videoCatalog(c)
		for _, name := range []string{"up/cool", "up/short", "up/paused"} {
			pm := weir.PlatformModel{Name: name, Platform: "up", Upstream: "sora-2"}
			if name == "up/short" {
				pm.Supports.Seconds = []int{4}
			}
			c.PlatformModels = append(c.PlatformModels, pm)
			c.Models[len(c.Models)-1].Candidates = append(c.Models[len(c.Models)-1].Candidates, weir.Candidate{PlatformModel: name, Weight: 1})
		}
	}})
	ctx := t.Context()
	if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_v", Hash: "hash_v", Group: "gold", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	for !b.svc.deps.Router.Failure("up/cool") {
	}
	b.svc.PauseUpstream("up/paused", time.Minute)
	cands, err := b.svc.Plan(ctx, weir.Task{ID: "task_1", Model: "v", KeyID: "key_v", Input: []byte(`{"seconds":"8"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 2 {
		t.Errorf("%d candidates, want up/v and up/paused", len(cands))
	}
	b.metrics.mu.Lock()
	got := maps.Clone(b.metrics.skipped)
	b.metrics.mu.Unlock()
	if want := map[string]int{"cooldown": 1, "capability": 1, "paused": 1}; !maps.Equal(got, want) {
		t.Errorf("skipped %v, want %v", got, want)
	}
}
