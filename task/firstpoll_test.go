package task

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestRunFirstPollLearnt: once a platform model has run a few jobs, the
// worker polls its next job first near the end they had, and so in fewer
// polls, and sees its end as soon.
func TestRunFirstPollLearnt(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 3 * time.Second}}})
	run := func() (polls int64, took time.Duration) {
		before := b.up["vid/a"].srv.Stats().JobPolls
		tk := b.submit(t, s, nil)
		got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed)
		if got.Status != weir.TaskSucceeded {
			t.Fatalf("task %s; want succeeded", got.Status)
		}
		return b.up["vid/a"].srv.Stats().JobPolls - before, got.FinishedAt.Sub(got.AdmittedAt)
	}
	first, _ := run()
	for range learnFrom - 1 {
		run()
	}
	polls, took := run()
	if polls >= first || polls > 3 {
		t.Errorf("a 3s job after %d of them: %d polls, the first had %d; want fewer, at most 3", learnFrom, polls, first)
	}
	if took < 3*time.Second || took > 3*time.Second+pollFloor*10 {
		t.Errorf("a 3s job after %d of them ran %s from its admission; want its end seen soon after 3s", learnFrom, took)
	}
}
