package task

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestSubmitPastTheBacklogRefused: with Config.QueueLimit tasks waiting,
// a submission is refused as a full queue of the workers scope, and
// nothing is stored; once one has left the queue, a submission is taken.
func TestSubmitPastTheBacklogRefused(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}},
		Limits:    map[string]int64{"vid/a": 1},
		Config:    Config{QueueLimit: 2},
	})
	running := b.submit(t, s, nil)
	b.driveTo(t, running.ID, weir.TaskRunning)
	b.submit(t, s, nil)
	waiting := b.submit(t, s, nil)

	tk := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"one too many"}`)}
	created, err := s.Submit(t.Context(), &tk)
	var qe *admission.QueueFullError
	if created || !errors.As(err, &qe) || qe.Scope != WorkersScope || qe.Limit != 2 {
		t.Fatalf("Submit past the backlog = %v, %v; want refused, the workers scope's queue full at 2", created, err)
	}
	if all, err := s.List(t.Context(), weir.TaskFilter{}); err != nil || len(all) != 3 {
		t.Fatalf("the store has %d tasks (%v), want the 3 taken", len(all), err)
	}
	if _, err := s.Cancel(t.Context(), waiting.ID); err != nil {
		t.Fatal(err)
	}
	b.submit(t, s, nil)
}
