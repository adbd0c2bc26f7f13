package task

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// hangingReceiver holds every request until the test ends, counting
// those in flight.
type hangingReceiver struct {
	*httptest.Server
	arrived chan struct{}
	mu      sync.Mutex
	now     int
	peak    int
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	h := &hangingReceiver{arrived: make(chan struct{}, 1024)}
	release := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.now++
		h.peak = max(h.peak, h.now)
		h.mu.Unlock()
		h.arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
		h.mu.Lock()
		h.now--
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	t.Cleanup(func() { close(release) }) // runs first: frees the handlers so Close can return
	return h
}

func (h *hangingReceiver) peakInFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}

// TestWebhookFairBetweenKeys runs River's webhook workers on a real
// database. Key A has more deliveries than there are workers, to a
// receiver that hangs; key B's one delivery, queued behind them, reaches
// its receiver at once, and A never has more than its bound in flight.
func TestWebhookFairBetweenKeys(t *testing.T) {
	t.Parallel()
	g := newEventRig(t)
	ctx := t.Context()
	keyB := weir.APIKey{ID: "key_2", Hash: "h2", CreatedAt: g.clock.Now()}
	if err := g.store.KeyCreate(ctx, keyB); err != nil {
		t.Fatal(err)
	}
	hang := newHangingReceiver(t)
	fast := make(chan time.Time, 1)
	fastRcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fast <- time.Now()
	}))
	t.Cleanup(fastRcv.Close)

	running := []weir.TaskStatus{weir.TaskRunning}
	succeed := func(task weir.Task) {
		t.Helper()
		if ok, err := g.s.finish(ctx, task, running, weir.TaskUpdate{Status: weir.TaskSucceeded, Progress: ptr(100)}); !ok || err != nil {
			t.Fatalf("finish %s = %v, %v", task.ID, ok, err)
		}
	}
	const aDeliveries = webhookWorkers + 16
	for i := range aDeliveries {
		succeed(g.runningTask(t, "task_a"+strconv.Itoa(i), hang.URL+"/hook"))
	}
	taskB := weir.Task{ID: "task_b", KeyID: keyB.ID, Kind: "task", Model: "sora-2", Input: []byte(`{}`),
		Status: weir.TaskRunning, CallbackURL: fastRcv.URL + "/hook", CreatedAt: g.clock.Now()}
	if created, err := g.store.TaskCreate(ctx, &taskB); !created || err != nil {
		t.Fatalf("TaskCreate: %v, %v", created, err)
	}

	if err := g.s.river.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.s.river.Stop(t.Context()) })
	for range g.s.hooks.PerKey {
		select {
		case <-hang.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("key A's deliveries did not reach its receiver: %d in flight", hang.peakInFlight())
		}
	}

	queued := time.Now()
	succeed(taskB)
	select {
	case at := <-fast:
		if d := at.Sub(queued); d > 2*time.Second {
			t.Errorf("key B's delivery took %s behind key A's hanging ones, want well under the 15s attempt timeout", d)
		} else {
			t.Logf("key B's delivery arrived %s after it was queued", d.Round(time.Millisecond))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("key B's delivery did not arrive within 20s")
	}
	if p := hang.peakInFlight(); p > g.s.hooks.PerKey {
		t.Errorf("key A had %d deliveries in flight, bound %d", p, g.s.hooks.PerKey)
	}
	if n := g.s.hookSlots.InFlight(g.key.ID); n > g.s.hooks.PerKey {
		t.Errorf("key A holds %d slots, bound %d", n, g.s.hooks.PerKey)
	}
}

func TestDeferDelay(t *testing.T) {
	t.Parallel()
	for n, want := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second,
		4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		for range 20 {
			if d := deferDelay(n); d < want*8/10 || d > want*12/10 {
				t.Fatalf("deferDelay(%d) = %s, want %s ±20%%", n, d, want)
			}
		}
	}
	if d := deferDelay(1 << 20); d > deferMax*12/10 || d < deferMax*8/10 {
		t.Errorf("deferDelay of many snoozes = %s, want about %s", d, deferMax)
	}
}
