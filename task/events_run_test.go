package task

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// TestRunDeliversItsEvents: a task that asked for progress events gets,
// through River's webhook workers, task.running when it starts upstream,
// task.progress as it advances, and task.succeeded at its end, each
// signed and with its own webhook-id.
func TestRunDeliversItsEvents(t *testing.T) {
	t.Parallel()
	type delivery struct {
		id, sig string
		ev      Event
	}
	got := make(chan delivery, 32)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev Event
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("event body %s: %v", body, err)
		}
		got <- delivery{r.Header.Get("webhook-id"), r.Header.Get("webhook-signature"), ev}
	}))
	t.Cleanup(rcv.Close)
	s, b := setup(t, setupOpts{Callbacks: true, Platforms: map[string]mock.Config{"vid/a": {JobDuration: 12 * time.Second}}, Config: Config{PollMax: time.Second}})
	if !s.CallbacksEnabled() {
		t.Fatal("callbacks not enabled with a sender and a signer")
	}
	tk := b.submit(t, s, func(tk *weir.Task) {
		tk.CallbackURL = rcv.URL + "/hook"
		tk.CallbackEvents = []weir.TaskEvent{weir.TaskEventProgress}
	})
	b.driveTo(t, tk.ID, weir.TaskSucceeded)

	var types, ids []string
	for {
		select {
		case d := <-got:
			if !strings.HasPrefix(d.sig, "v1,") || d.ev.Data.ID != tk.ID {
				t.Errorf("delivery %+v: want signed, about the task", d)
			}
			types = append(types, d.ev.Type)
			ids = append(ids, d.id)
			if d.ev.Type != "task.succeeded" {
				continue
			}
			if d.ev.Data.Status != weir.TaskSucceeded || d.ev.Data.Progress != 100 {
				t.Errorf("terminal event %+v, want the task succeeded at 100%%", d.ev)
			}
		case <-time.After(waitBound):
			t.Fatalf("events received: %v; want task.succeeded among them", types)
		}
		if slices.Contains(types, "task.succeeded") {
			break
		}
	}
	// Deliveries run in parallel: the order they arrive in is not fixed.
	if !slices.Contains(types, "task.running") || !slices.Contains(types, "task.progress") {
		t.Errorf("events %v: want task.running and task.progress too", types)
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != len(types) {
		t.Errorf("webhook-ids %v: want one of its own per event", ids)
	}
}
