package task

import (
	"errors"
	"testing"
	"testing/synctest"
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

// TestBacklogCountReused: a count younger than backlogFresh lets
// submissions through, each counted, without another; one that finds no
// room, or a count grown old, counts again; only a fresh count refuses.
func TestBacklogCountReused(t *testing.T) {
	t.Parallel()
	var b backlog
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	counts, queued := 0, 0
	count := func() (int, error) { counts++; return queued, nil }
	full := func() bool { return b.full(t.Context(), clock, 3, count) }

	for i := range 3 {
		if full() {
			t.Fatalf("submission %d refused with %d queued of 3", i+1, i)
		}
	}
	if counts != 1 {
		t.Fatalf("three submissions within backlogFresh counted %d times, want once", counts)
	}
	queued = 1 // two of the three were admitted meanwhile
	if full() || counts != 2 {
		t.Fatalf("the 4th submission, no room in the count: refused or counted %d times; want counted again and let through", counts)
	}
	queued = 3
	now = now.Add(backlogFresh)
	if !full() || counts != 3 {
		t.Fatalf("a submission with the count old and 3 queued: counted %d times, let through; want counted again and refused", counts)
	}
	if !full() || counts != 4 {
		t.Fatalf("a submission after a refusal: counted %d times, let through; want counted again and refused", counts)
	}

	// Within a tenth of the limit, each submission counts.
	queued, counts, now = 89, 0, now.Add(backlogFresh)
	for i := range 3 {
		if b.full(t.Context(), clock, 100, count) || counts != i+1 {
			t.Fatalf("submission %d with 89 queued of 100: counted %d times in all, or refused; want a count each, let through", i+1, counts)
		}
	}
}

// TestBacklogOneCountAtATime: submissions that need a count while one is
// under way wait for it rather than asking the engine each, and those it
// lets through are counted in it, so that a burst stays under the limit.
func TestBacklogOneCountAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backlog
		counts := 0
		release := make(chan struct{})
		count := func() (int, error) { counts++; <-release; return 1, nil }
		refused := make(chan bool, 3)
		for range 3 {
			go func() { refused <- b.full(t.Context(), time.Now, 3, count) }()
		}
		synctest.Wait()
		if counts != 1 {
			t.Fatalf("three submissions waiting for a count asked %d times, want once", counts)
		}
		close(release)
		n := 0
		for range 3 {
			if <-refused {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d of 3 submissions refused with 1 queued of 3, want 1", n)
		}
	})
}
