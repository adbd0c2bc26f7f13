package task

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// hangingReceiver holds every request until the test ends, counting
// those in flight per path (/hook/<key>) and in all.
type hangingReceiver struct {
	*httptest.Server
	arrived chan struct{}
	mu      sync.Mutex
	now     map[string]int
	peak    map[string]int
	total   int
	peakAll int
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	h := &hangingReceiver{arrived: make(chan struct{}, 1024), now: map[string]int{}, peak: map[string]int{}}
	release := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/hook/")
		h.mu.Lock()
		h.now[key]++
		h.total++
		h.peak[key] = max(h.peak[key], h.now[key])
		h.peakAll = max(h.peakAll, h.total)
		h.mu.Unlock()
		h.arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
		h.mu.Lock()
		h.now[key]--
		h.total--
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	t.Cleanup(func() { close(release) }) // runs first: frees the handlers so Close can return
	return h
}

func (h *hangingReceiver) peaks() (map[string]int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.peak))
	for k, v := range h.peak {
		out[k] = v
	}
	return out, h.peakAll
}

// TestWebhookFairBetweenKeys runs River's webhook workers on a real
// database. Keys whose receivers hang have more deliveries than there
// are workers; key B's one delivery, queued behind them all, reaches its
// fast receiver at once. No hanging key has more than Webhooks.PerKey
// deliveries in flight, nor all of them more than webhookShared beyond
// one each.
func TestWebhookFairBetweenKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		keys, each int
	}{
		{"one key", 1, webhookWorkers + 16},
		{"five keys", 5, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fairRun(t, tc.keys, tc.each)
		})
	}
}

func fairRun(t *testing.T, keys, each int) {
	g := newEventRig(t)
	ctx := t.Context()
	hang := newHangingReceiver(t)
	fast := make(chan time.Time, 1)
	fastRcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fast <- time.Now()
	}))
	t.Cleanup(fastRcv.Close)

	running := []weir.TaskStatus{weir.TaskRunning}
	newTask := func(id, key, callback string) weir.Task {
		t.Helper()
		task := weir.Task{ID: id, KeyID: key, Kind: "task", Model: "sora-2", Input: []byte(`{}`),
			Status: weir.TaskRunning, CallbackURL: callback, CreatedAt: g.clock.Now()}
		if created, err := g.store.TaskCreate(ctx, &task); !created || err != nil {
			t.Fatalf("TaskCreate: %v, %v", created, err)
		}
		return task
	}
	succeed := func(task weir.Task) {
		t.Helper()
		if ok, err := g.s.finish(ctx, task, running, weir.TaskUpdate{Status: weir.TaskSucceeded, Progress: ptr(100)}); !ok || err != nil {
			t.Fatalf("finish %s = %v, %v", task.ID, ok, err)
		}
	}
	addKey := func(id string) {
		t.Helper()
		if err := g.store.KeyCreate(ctx, weir.APIKey{ID: id, Hash: "h_" + id, CreatedAt: g.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// Interleaved, as tasks of several keys ending together would be.
	for k := range keys {
		addKey("key_hang" + strconv.Itoa(k))
	}
	for i := range each {
		for k := range keys {
			key := "key_hang" + strconv.Itoa(k)
			succeed(newTask("task_"+key+"_"+strconv.Itoa(i), key, hang.URL+"/hook/"+key))
		}
	}
	addKey("key_b")
	taskB := newTask("task_b", "key_b", fastRcv.URL+"/hook")

	if err := g.s.river.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.s.river.Stop(t.Context()) })
	// The hanging keys take what the bounds allow.
	want := min(keys*g.s.hooks.PerKey, keys+webhookShared)
	for range want {
		select {
		case <-hang.arrived:
		case <-time.After(10 * time.Second):
			_, all := hang.peaks()
			t.Fatalf("the hanging keys' deliveries did not reach their receiver: %d in flight, want %d", all, want)
		}
	}

	queued := time.Now()
	succeed(taskB)
	select {
	case at := <-fast:
		// Behind the hanging keys' snoozed jobs, which come due first,
		// B's job may wait a few of River's fetch rounds, longer on a
		// loaded machine; without the bounds it waits for an attempt to
		// a hanging receiver to time out (15s).
		if d := at.Sub(queued); d > 7500*time.Millisecond {
			t.Errorf("key B's delivery took %s behind the hanging ones, want under half the 15s attempt timeout", d)
		} else {
			t.Logf("key B's delivery arrived %s after it was queued", d.Round(time.Millisecond))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("key B's delivery did not arrive within 20s")
	}
	peaks, all := hang.peaks()
	for key, p := range peaks {
		if p > g.s.hooks.PerKey {
			t.Errorf("%s had %d deliveries in flight, bound %d", key, p, g.s.hooks.PerKey)
		}
	}
	if all > keys+webhookShared {
		t.Errorf("the hanging keys had %d deliveries in flight, bound %d", all, keys+webhookShared)
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
