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

// TestResubmissionPastTheBacklog: with the backlog full, a resubmission
// of an Idempotency-Key whose task was accepted gets that task (not
// created, nothing stored) and is not refused; a new key is refused.
func TestResubmissionPastTheBacklog(t *testing.T) {
	t.Parallel()
	s, b := setup(t, setupOpts{
		Platforms: map[string]mock.Config{"vid/a": {JobDuration: time.Hour}},
		Limits:    map[string]int64{"vid/a": 1},
		Config:    Config{QueueLimit: 1},
	})
	running := b.submit(t, s, nil)
	b.driveTo(t, running.ID, weir.TaskRunning)
	accepted := b.submit(t, s, func(tk *weir.Task) { tk.IdempotencyKey = "order-1" })

	again := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"a heron at dawn","seconds":"4"}`),
		IdempotencyKey: "order-1"}
	created, err := s.Submit(t.Context(), &again)
	if err != nil || created || again.ID != accepted.ID || again.Status != weir.TaskQueued {
		t.Fatalf("a resubmission past the backlog = %v, %v, task %s (%s); want %s returned, not created", created, err, again.ID, again.Status, accepted.ID)
	}
	fresh := weir.Task{KeyID: b.key.ID, Kind: "video", Model: "sora-2", Input: []byte(`{"prompt":"another"}`), IdempotencyKey: "order-2"}
	var qe *admission.QueueFullError
	if created, err := s.Submit(t.Context(), &fresh); created || !errors.As(err, &qe) {
		t.Fatalf("a new key past the backlog = %v, %v; want refused, queue full", created, err)
	}
	if all, err := s.List(t.Context(), weir.TaskFilter{}); err != nil || len(all) != 2 {
		t.Fatalf("the store has %d tasks (%v), want the 2 taken", len(all), err)
	}
}
