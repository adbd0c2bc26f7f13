package task

import (
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestFleetPositionOfAnUnheardTask: a replica that does not lead does
// not ask the leader where a task submitted to it stands while its
// notice has not gone out (the answer to the submission, written first,
// asks that), even once the leader's poll has queued it; once the notice
// is out, it asks.
func TestFleetPositionOfAnUnheardTask(t *testing.T) {
	t.Parallel()
	fb := setupFleet(t, fleetOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: 24 * time.Hour}}, Workers: 1}, "a", "b")
	fb.elect(t, "a")
	running := fb.submit(t, "a")
	waitFor(t, "one running", func() bool { return fb.get(t, running.ID).Status == weir.TaskRunning })
	b := fb.node("b")
	release := fb.holdNotices(t, "b")
	tk := fb.submit(t, "b")
	fb.poll()
	waitFor(t, "the leader's poll to queue the task", func() bool {
		_, ok := fb.node("a").service().Position(t.Context(), tk.ID)
		return ok
	})
	if p, ok := b.service().Position(t.Context(), tk.ID); ok {
		t.Fatalf("b's position of a task whose notice is held = %+v; want none, the leader not asked", p)
	}
	release()
	waitFor(t, "b to ask once the notice is out", func() bool {
		p, ok := b.service().Position(t.Context(), tk.ID)
		return ok && p.Scope == WorkersScope && p.Ahead == 0
	})
}
