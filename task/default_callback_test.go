package task

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/weir-gateway/weir"
)

// hookReceiver records the events posted to it, by path.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []string // "path type task"
	signed bool
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{signed: true}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev Event
		_ = json.Unmarshal(body, &ev)
		h.mu.Lock()
		h.got = append(h.got, r.URL.Path+" "+ev.Type+" "+ev.Data.ID)
		h.signed = h.signed && r.Header.Get("webhook-signature") != ""
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) events() ([]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(slices.Values(h.got)), h.signed
}

// TestDefaultCallbackGetsTerminalEvents: a task submitted without a
// callback URL has its terminal event sent, signed, to the default
// callback URL (Webhooks.DefaultURL); a task with its own gets it there
// only.
func TestDefaultCallbackGetsTerminalEvents(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t)
	_, b := setup(t, setupOpts{Callbacks: true, NoStart: true})
	b.hooks.DefaultURL = rcv.URL + "/default"
	s := b.newService(t)
	b.start(t, s)
	plain := b.submit(t, s, nil)
	own := b.submit(t, s, func(tk *weir.Task) { tk.CallbackURL = rcv.URL + "/own" })
	for _, tk := range []weir.Task{plain, own} {
		if got := b.driveTo(t, tk.ID, weir.TaskSucceeded, weir.TaskFailed); got.Status != weir.TaskSucceeded {
			t.Fatalf("task %s %s (%s)", got.ID, got.Status, got.ErrorMessage)
		}
	}
	want := slices.Sorted(slices.Values([]string{"/default task.succeeded " + plain.ID, "/own task.succeeded " + own.ID}))
	waitFor(t, "both terminal events delivered", func() bool {
		got, _ := rcv.events()
		return len(got) >= len(want)
	})
	got, signed := rcv.events()
	if !slices.Equal(got, want) || !signed {
		t.Errorf("events %q (signed %v), want %q, signed", got, signed, want)
	}
}
