package task

import (
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// retireLocked takes platform model pm out of the catalog as a gateway
// does while tasks hold leases on it: no model plans it, and its target
// is kept, marked Retired. The caller holds p.mu.
func (p *testPlanner) retireLocked(pm string) {
	if tg, ok := p.targets[pm]; ok {
		tg.Retired = true
		p.targets[pm] = tg
	}
	for m, pms := range p.models {
		p.models[m] = slices.DeleteFunc(slices.Clone(pms), func(x string) bool { return x == pm })
	}
}

// retire is retireLocked, now.
func (p *testPlanner) retire(pm string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retireLocked(pm)
}

// retireAtStep retires platform model pm as a step first asks for its
// target: a reload between a task's admission there and its submit.
func (p *testPlanner) retireAtStep(pm string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retireAt == nil {
		p.retireAt = map[string]bool{}
	}
	p.retireAt[pm] = true
}

// TestRetiredTargetNotSubmittedQueuesAgain: a task admitted to a
// platform model that leaves the catalog before its job submits it there
// is not submitted there: it queues again and runs on its model's other
// candidate; with none left it fails no_candidate, before any upstream
// call. Its capacity on the retired platform model goes back either way.
func TestRetiredTargetNotSubmittedQueuesAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		models []string
		want   weir.TaskStatus
	}{
		{"another candidate", []string{"vid/a", "vid/b"}, weir.TaskSucceeded},
		{"no other candidate", []string{"vid/a"}, weir.TaskFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t, setupOpts{
				Platforms: map[string]mock.Config{"vid/a": {}, "vid/b": {}},
				Models:    map[string][]string{"sora-2": tc.models},
			})
			b.planner.retireAtStep("vid/a")
			tk := b.submit(t, s, nil)
			got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
			if got.Status != tc.want || tc.want == weir.TaskSucceeded && got.PlatformModel != "vid/b" ||
				tc.want == weir.TaskFailed && got.ErrorCode != "no_candidate" {
				t.Errorf("task %s on %s (%s: %s); want %s, not on vid/a", got.Status, got.PlatformModel, got.ErrorCode, got.ErrorMessage, tc.want)
			}
			if keys := b.up["vid/a"].jobKeys(); len(keys) != 0 {
				t.Errorf("vid/a, retired before the submit, got jobs %v; want none", keys)
			}
			b.waitReleased(t)
		})
	}
}

// TestRetiredTargetFollowedToTheEnd: a task running upstream on a
// platform model that then leaves the catalog follows its job there to
// its end, and holds its capacity there until then.
func TestRetiredTargetFollowedToTheEnd(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Minute}, "vid/b": {}},
		Models: map[string][]string{"sora-2": {"vid/a", "vid/b"}}})
	tk := b.submit(t, s, nil)
	running := b.driveTo(t, tk.ID, weir.TaskRunning)
	b.planner.retire("vid/a")
	if used := b.used(t, weir.PlatformModelScope("vid/a")); used != 1 {
		t.Errorf("vid/a once retired, the task running there: %d used; want its lease", used)
	}
	got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
	if got.Status != weir.TaskSucceeded || got.PlatformModel != "vid/a" || got.UpstreamID != running.UpstreamID {
		t.Errorf("task %s on %s, job %s (%s: %s); want succeeded on vid/a's job %s", got.Status, got.PlatformModel, got.UpstreamID,
			got.ErrorCode, got.ErrorMessage, running.UpstreamID)
	}
	b.waitReleased(t)
}
