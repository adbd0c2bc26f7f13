package admission_test

import (
	"testing"

	"github.com/weir-gateway/weir/admission"
)

func next(t *testing.T, ch <-chan admission.LeadEvent) admission.LeadEvent {
	t.Helper()
	e, ok := <-ch
	if !ok {
		t.Fatal("subscription closed early")
	}
	return e
}

// TestLeadFeedOrder: a subscriber sees every event in order, and nothing
// waits for it: the publisher goes on while it does not read.
func TestLeadFeedOrder(t *testing.T) {
	var f admission.LeadFeed
	ch, cancel := f.Subscribe()
	defer cancel()
	eng := admission.NewMemory(admission.Options{})
	defer eng.Close()
	f.Publish(admission.LeadEvent{Kind: admission.TermBegan, Engine: eng, Epoch: 3, Workers: 10})
	for i := 1; i <= 100; i++ {
		f.Publish(admission.LeadEvent{Kind: admission.WorkersChanged, Workers: i})
	}
	f.Publish(admission.LeadEvent{Kind: admission.ReplicaForgotten, Replica: "b"})
	f.Publish(admission.LeadEvent{Kind: admission.TermEnded})
	if e := next(t, ch); e.Kind != admission.TermBegan || e.Epoch != 3 || e.Engine != eng {
		t.Fatalf("first event %+v; want TermBegan of epoch 3", e)
	}
	for i := 1; i <= 100; i++ {
		if e := next(t, ch); e.Kind != admission.WorkersChanged || e.Workers != i {
			t.Fatalf("event %d: %+v; want WorkersChanged %d", i, e, i)
		}
	}
	if e := next(t, ch); e.Kind != admission.ReplicaForgotten || e.Replica != "b" {
		t.Fatalf("got %+v; want ReplicaForgotten b", e)
	}
	if e := next(t, ch); e.Kind != admission.TermEnded {
		t.Fatalf("got %+v; want TermEnded", e)
	}
}

// TestLeadFeedLateSubscriber: one who subscribes during a term hears of
// the term first, with the workers as they are now; after the term, of
// nothing past.
func TestLeadFeedLateSubscriber(t *testing.T) {
	var f admission.LeadFeed
	eng := admission.NewMemory(admission.Options{})
	defer eng.Close()
	f.Publish(admission.LeadEvent{Kind: admission.TermBegan, Engine: eng, Epoch: 7, Workers: 10})
	f.Publish(admission.LeadEvent{Kind: admission.WorkersChanged, Workers: 30})
	f.Publish(admission.LeadEvent{Kind: admission.ReplicaForgotten, Replica: "c"})
	ch, cancel := f.Subscribe()
	if e := next(t, ch); e.Kind != admission.TermBegan || e.Epoch != 7 || e.Workers != 30 || e.Engine != eng {
		t.Fatalf("late subscriber's first event %+v; want TermBegan of epoch 7 with 30 workers", e)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("an event after cancel; want the channel closed")
	}

	f.Publish(admission.LeadEvent{Kind: admission.TermEnded})
	ch, cancel = f.Subscribe()
	defer cancel()
	f.Publish(admission.LeadEvent{Kind: admission.WorkersChanged, Workers: 5})
	if e := next(t, ch); e.Kind != admission.WorkersChanged {
		t.Fatalf("subscriber after the term's end got %+v first; want only what came after", e)
	}
}

// TestLeadFeedCancelUnread: cancel returns with events still queued, and
// a second cancel is harmless.
func TestLeadFeedCancelUnread(t *testing.T) {
	var f admission.LeadFeed
	_, cancel := f.Subscribe()
	for i := range 10 {
		f.Publish(admission.LeadEvent{Kind: admission.WorkersChanged, Workers: i + 1})
	}
	cancel()
	cancel()
	f.Publish(admission.LeadEvent{Kind: admission.TermEnded})
}
