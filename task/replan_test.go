package task

import (
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestReplanFollowsTheCatalog: tasks queued for one platform move, in
// their order, to a platform that a reload put first; a replan that
// changes nothing moves nothing.
func TestReplanFollowsTheCatalog(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second}, "vid/b": {JobDuration: time.Second}},
		Models:    map[string][]string{"sora-2": {"vid/a"}},
		Limits:    map[string]int64{"vid/a": 1, "vid/b": 1},
	})
	release := b.hold(t, "vid/a", 1)
	defer release()
	var ids []string
	for range 6 {
		ids = append(ids, b.submit(t, s, nil).ID)
	}
	if n := s.Replan(t.Context()); n != 0 {
		t.Errorf("a replan with the catalog unchanged moved %d tasks", n)
	}
	b.planner.mu.Lock()
	b.planner.models["sora-2"] = []string{"vid/b", "vid/a"}
	b.planner.mu.Unlock()
	if n := s.Replan(t.Context()); n != len(ids) {
		t.Fatalf("Replan moved %d tasks, want the %d queued", n, len(ids))
	}
	for _, id := range ids {
		if got := b.driveTo(t, id, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded || got.PlatformModel != "vid/b" {
			t.Fatalf("task %+v; want succeeded on vid/b", got)
		}
	}
	keys := b.up["vid/b"].jobKeys()
	if !slices.Equal(keys, ids) {
		t.Errorf("jobs on vid/b in the order %v, want the submission order %v", keys, ids)
	}
	if n := len(b.up["vid/a"].srv.Jobs()); n != 0 {
		t.Errorf("%d jobs on vid/a, which stayed full", n)
	}
}
