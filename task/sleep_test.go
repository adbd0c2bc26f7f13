package task

import (
	"database/sql"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestRiverSleepsWhileIdle: as the store's sole runner, River's client
// stops once it has had no job for IdleAfter, a task submitted meanwhile
// runs to its end (its job's insert starts the client), and the client
// sleeps again once the task has ended.
func TestRiverSleepsWhileIdle(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Second}},
		// The sleeper keeps the wall clock, as River does.
		Config: Config{SoleRunner: true, IdleAfter: 20 * time.Millisecond},
	})
	sl := s.river.(*riverStore[*sql.Tx]).sleeper
	if sl == nil {
		t.Fatal("no sleeper on the embedded store's sole runner")
	}
	waitFor(t, "River's client asleep with no job", sl.Asleep)
	tk := b.submit(t, s, nil)
	if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Fatalf("task %+v submitted while River slept, want succeeded", got)
	}
	waitFor(t, "River's client asleep again after the task", sl.Asleep)
	tk = b.submit(t, s, nil)
	if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
		t.Fatalf("second task %+v, want succeeded", got)
	}
	b.waitReleased(t)
}
