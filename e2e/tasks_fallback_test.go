package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// TestTaskMovesOffSaturatedPlatform: a model runs on two platforms, the
// first preferred. The first's account is full (its one job slot taken,
// 429 with a Retry-After of a minute for anything more), though the
// gateway's own limits let it admit more. A task admitted to it and
// refused goes back to the queue and runs on the second platform at once,
// rather than waiting out the first's Retry-After.
func TestTaskMovesOffSaturatedPlatform(t *testing.T) {
	t.Parallel()
	full := startVideoUpstream(t, mock.Config{JobDuration: time.Minute, MaxJobs: 1, RetryAfter: time.Minute})
	spare := startVideoUpstream(t, mock.Config{JobDuration: 300 * time.Millisecond})
	g := startGateway(t, "", fmt.Sprintf(`
tasks:
  workers: 8
  poll_min: 50ms
  poll_max: 250ms
platforms:
  - name: full
    base_url: %s
  - name: spare
    base_url: %s
platform_models:
  - name: full/sora
    platform: full
    upstream: sora-2
  - name: spare/sora
    platform: spare
    upstream: sora-2
models:
  - name: %s
    kind: video
    candidates:
      - platform_model: full/sora
        priority: 10
      - platform_model: spare/sora
        priority: 0
`, full.URL, spare.URL, videoModel))
	_, key := g.createKey(t)

	hog, _ := g.submitTask(t, key, taskBody("hog", ""), "")
	waitFor(t, 10*time.Second, "the first task to take the full platform's one slot", func() bool { return len(full.Mock.Jobs()) == 1 })

	o, _ := g.submitTask(t, key, taskBody("moved", ""), "")
	final := g.waitTerminal(t, key, []string{o.ID}, 15*time.Second)
	if got := final[o.ID]; got.Status != "succeeded" {
		t.Fatalf("task refused by the full platform ended %s (%+v), want succeeded on the spare one", got.Status, got.Error)
	}
	if st := full.Mock.Stats(); st.JobsRejected == 0 {
		t.Errorf("the full platform refused nothing: the task never tried it (%+v)", st)
	}
	if jobs := spare.Mock.Jobs(); len(jobs) != 1 || jobs[0].Prompt != "moved" {
		t.Errorf("spare platform's jobs %+v, want the moved task's alone", jobs)
	}
	if got := g.getTask(t, key, hog.ID); got.Status != "running" {
		t.Errorf("the first task is %s, want still running on the full platform", got.Status)
	}
}
