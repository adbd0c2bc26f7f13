package task

import (
	"fmt"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestAcceptanceTasksKeepToTheirShare: tasks of acceptance runs hold at
// most their share of the workers, a quarter: with eight workers and
// eight such tasks submitted first, two run and six wait, and production
// tasks submitted after them take the six other workers at once. After a
// restart the running ones get their leases back, in the share.
func TestAcceptanceTasksKeepToTheirShare(t *testing.T) {
	t.Parallel()
	const workers, share = 8, 2
	s, b := setup(t, setupOpts{Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}}, Config: Config{Workers: workers}})
	for i := range workers {
		b.submit(t, s, func(tk *weir.Task) { tk.RunMode, tk.RunID = weir.RunAcceptance, fmt.Sprintf("run-%d", i) })
	}
	// The engine admits as a task is submitted.
	if used := b.used(t, WorkersScope); used != share {
		t.Errorf("%d tasks of acceptance runs admitted of %d workers; want their share, %d", used, workers, share)
	}
	var prod []weir.Task
	for range workers - share {
		prod = append(prod, b.submit(t, s, nil))
	}
	for _, tk := range prod {
		waitFor(t, "production's task "+tk.ID+" admitted", func() bool { return b.get(t, tk.ID).Status != weir.TaskQueued })
	}
	if used, ofRuns := b.used(t, WorkersScope), b.used(t, AcceptanceWorkersScope); used != workers || ofRuns != share {
		t.Errorf("workers held: %d, %d of them by acceptance runs; want %d and %d", used, ofRuns, workers, share)
	}
	if st, err := b.engine.Scope(t.Context(), AcceptanceWorkersScope); err != nil || st.Config.Limit != share || st.Queued != workers-share {
		t.Errorf("the runs' share: %+v, %v; want limit %d, %d queued", st, err, share, workers-share)
	}

	t.Logf("before restart: %d %d", b.used(t, WorkersScope), b.used(t, AcceptanceWorkersScope))
	// Start recovers: the running tasks' leases are restored by then,
	// and the runs' other tasks queue again behind them. A running task
	// whose lease was not restored would run uncounted, and one more of
	// the queued would be admitted in its place.
	b.restart(t, s)
	st, err := b.engine.Scope(t.Context(), AcceptanceWorkersScope)
	if used := b.used(t, WorkersScope); err != nil || used != workers || st.Used != share || st.Queued != workers-share {
		t.Errorf("after a restart, workers held: %d; the runs' share %+v, %v; want %d held, %d of them by the runs, %d of theirs queued",
			used, st, err, workers, share, workers-share)
	}
}
