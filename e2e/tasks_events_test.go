package e2e

// Callback events beyond the terminal one (callback_events: ["progress"],
// or the X-Weir-Callback-Events header) and callbacks asked for by header
// on the video API, against the real binary and a receiver in the test
// process.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// progressTaskBody is a POST /v1/tasks body asking for progress events.
func progressTaskBody(prompt, callback string, events any) string {
	b, _ := json.Marshal(map[string]any{
		"model":           videoModel,
		"input":           map[string]any{"prompt": prompt, "seconds": "4"},
		"callback_url":    callback,
		"callback_events": events,
	})
	return string(b)
}

// checkProgressEvents checks the deliveries about one task that asked for
// progress events: task.running first, then task.progress events at least
// 10 points and 5s (by their timestamps) apart, each with its own
// webhook-id naming its percentage, then the terminal event last; every
// one verifies, and each was delivered once (the receiver accepts all).
func checkProgressEvents(t *testing.T, id string, ds []delivery, terminal string) (progress []int) {
	t.Helper()
	if len(ds) < 2 {
		t.Fatalf("task %s: %d deliveries, want task.running, progress events and %s", id, len(ds), terminal)
	}
	seen := map[string]bool{}
	for _, d := range ds {
		if d.Verified != nil {
			t.Errorf("task %s: delivery %s does not verify: %v", id, d.ID, d.Verified)
		}
		if seen[d.ID] {
			t.Errorf("task %s: webhook-id %s delivered twice", id, d.ID)
		}
		seen[d.ID] = true
	}
	first, last := ds[0], ds[len(ds)-1]
	if first.Event.Type != "task.running" || first.ID != "evt_"+id+"_running" || first.Event.Data.Status != "running" {
		t.Errorf("task %s: first delivery %s %s (%s), want task.running", id, first.ID, first.Event.Type, first.Event.Data.Status)
	}
	if last.Event.Type != "task."+terminal || last.Event.Data.Status != terminal {
		t.Errorf("task %s: last delivery %s (%s), want task.%s", id, last.Event.Type, last.Event.Data.Status, terminal)
	}
	prevP, prevAt := first.Event.Data.Progress, first.Event.Timestamp
	for _, d := range ds[1 : len(ds)-1] {
		p := d.Event.Data.Progress
		if d.Event.Type != "task.progress" || d.Event.Data.Status != "running" || d.ID != fmt.Sprintf("evt_%s_progress_%d", id, p) ||
			string(d.Event.Data.Result) != "null" {
			t.Errorf("task %s: delivery %s: %s (%s, %d%%, result %s), want task.progress while running", id, d.ID, d.Event.Type, d.Event.Data.Status, p, d.Event.Data.Result)
		}
		if p-prevP < 10 || p >= 100 {
			t.Errorf("task %s: progress event at %d%% after one at %d%%: want at least 10 points more, below 100", id, p, prevP)
		}
		if gap := d.Event.Timestamp.Sub(prevAt); gap < 5*time.Second {
			t.Errorf("task %s: progress event %s after the one before, want at least 5s", id, gap)
		}
		prevP, prevAt = p, d.Event.Timestamp
		progress = append(progress, p)
	}
	return progress
}

// TestTaskProgressWebhooks: an 11s upstream job. A task asking for
// progress events in its body, and a video asking by header, each get
// task.running, a progress event every 10 points at most once each 5s,
// and their terminal event, every one signed with its own webhook-id; a
// task with a callback but no events, and a video with only the URL
// header, get their terminal event alone.
func TestTaskProgressWebhooks(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: 11 * time.Second}, taskOptions{Workers: 8}, nil)
	withEvents, st := c.g.submitTask(t, c.key, progressTaskBody("progress", c.hooks.URL, []string{"progress"}), "")
	if st != http.StatusAccepted || len(withEvents.CallbackEvents) != 1 || withEvents.CallbackEvents[0] != "progress" {
		t.Errorf("POST /v1/tasks with callback_events: %d, callback_events %v", st, withEvents.CallbackEvents)
	}
	plain, _ := c.g.submitTask(t, c.key, taskBody("terminal only", c.hooks.URL), "")
	if plain.CallbackEvents != nil {
		t.Errorf("a task without callback_events answers %v", plain.CallbackEvents)
	}
	videoRep := c.g.do(t, request{Path: "/v1/videos", Key: c.key, Body: `{"model":"` + videoModel + `","prompt":"a video with events"}`,
		Header: map[string]string{"X-Weir-Callback-URL": c.hooks.URL, "X-Weir-Callback-Events": "progress"}})
	videoPlainRep := c.g.do(t, request{Path: "/v1/videos", Key: c.key, Body: `{"model":"` + videoModel + `","prompt":"a video, terminal only"}`,
		Header: map[string]string{"X-Weir-Callback-URL": c.hooks.URL}})
	var video, videoPlain struct{ ID string }
	if videoRep.Status != http.StatusOK || json.Unmarshal(videoRep.Body, &video) != nil ||
		videoPlainRep.Status != http.StatusOK || json.Unmarshal(videoPlainRep.Body, &videoPlain) != nil {
		t.Fatalf("POST /v1/videos with callback headers: %d %s; %d %s", videoRep.Status, videoRep.Body, videoPlainRep.Status, videoPlainRep.Body)
	}
	if o := c.g.getTask(t, c.key, video.ID); o.CallbackURL != c.hooks.URL || len(o.CallbackEvents) != 1 {
		t.Errorf("the video's task: callback %q, events %v; want the headers'", o.CallbackURL, o.CallbackEvents)
	}

	ids := []string{withEvents.ID, plain.ID, video.ID, videoPlain.ID}
	final := c.g.waitTerminal(t, c.key, ids, 40*time.Second)
	waitFor(t, 10*time.Second, "every terminal event to be delivered", func() bool {
		by := c.hooks.byTask()
		for _, id := range ids {
			ds := by[id]
			if len(ds) == 0 || ds[len(ds)-1].Event.Type != "task."+final[id].Status {
				return false
			}
		}
		return true
	})
	by := c.hooks.byTask()
	for _, id := range []string{withEvents.ID, video.ID} {
		if final[id].Status != "succeeded" {
			t.Fatalf("task %s: %s %+v", id, final[id].Status, final[id].Error)
		}
		// An 11s job, polled at least every 250ms: events near 45% (5s)
		// and 90% (10s).
		p := checkProgressEvents(t, id, by[id], "succeeded")
		if len(p) < 1 || len(p) > 2 {
			t.Errorf("task %s: progress events at %v, want one or two over an 11s job", id, p)
		}
		t.Logf("task %s: running, progress %v, succeeded", id, p)
	}
	checkOneTerminalEach(t, c.hooks, map[string]taskObject{plain.ID: final[plain.ID], videoPlain.ID: final[videoPlain.ID]})

	// One River job per event, each completed on its one delivery.
	db := openDB(t, c.g.DB)
	var jobs []riverJob
	waitFor(t, 10*time.Second, "the webhook jobs to complete", func() bool {
		jobs = jobs[:0]
		done := true
		for _, j := range riverJobs(t, db, "weir_task_webhook") {
			if j.TaskID == withEvents.ID {
				jobs = append(jobs, j)
				done = done && j.State == "completed"
			}
		}
		return done
	})
	for _, j := range jobs {
		if j.Attempt != 1 {
			t.Errorf("webhook job %+v, want completed on its first attempt", j)
		}
	}
	if n := len(by[withEvents.ID]); len(jobs) != n {
		t.Errorf("%d webhook jobs for task %s, %d deliveries", len(jobs), withEvents.ID, n)
	}
}

// TestTaskCallbackRequests: what a submission may ask of callbacks, and
// what is refused with 400 and stores nothing: unknown events, events
// without a URL, a body and headers that disagree, an internal address
// by header on the video API; and headers on a gateway without
// callbacks. The events count in the Idempotency-Key comparison.
func TestTaskCallbackRequests(t *testing.T) {
	t.Parallel()
	c := startCrashRig(t, mock.Config{JobDuration: time.Minute}, taskOptions{Workers: 2}, nil)
	video := func(h map[string]string) *reply {
		return c.g.do(t, request{Path: "/v1/videos", Key: c.key, Body: `{"model":"` + videoModel + `","prompt":"p"}`, Header: h})
	}
	task := func(body string, h map[string]string) *reply {
		return c.g.do(t, request{Path: "/v1/tasks", Key: c.key, Body: body, Header: h})
	}
	for _, tc := range []struct {
		name  string
		rep   func() *reply
		param string
	}{
		{"an unknown event", func() *reply { return task(progressTaskBody("p", c.hooks.URL, []string{"progress", "done"}), nil) }, "callback_events"},
		{"events not an array", func() *reply { return task(progressTaskBody("p", c.hooks.URL, "progress"), nil) }, "callback_events"},
		{"events without a url", func() *reply { return task(progressTaskBody("p", "", []string{"progress"}), nil) }, "callback_events"},
		{"an unknown event by header", func() *reply {
			return task(taskBody("p", c.hooks.URL), map[string]string{"X-Weir-Callback-Events": "progress, finished"})
		}, "X-Weir-Callback-Events"},
		{"body and header urls differ", func() *reply {
			return task(taskBody("p", c.hooks.URL), map[string]string{"X-Weir-Callback-URL": c.hooks.URL + "/other"})
		}, "callback_url"},
		{"body and header events differ", func() *reply {
			return task(progressTaskBody("p", c.hooks.URL, []string{}), map[string]string{"X-Weir-Callback-Events": "progress"})
		}, "callback_events"},
		{"video: an internal address", func() *reply {
			return video(map[string]string{"X-Weir-Callback-URL": "http://169.254.169.254/latest/meta-data/"})
		}, "X-Weir-Callback-URL"},
		{"video: events without a url", func() *reply { return video(map[string]string{"X-Weir-Callback-Events": "progress"}) }, "X-Weir-Callback-Events"},
		{"video: an unknown event", func() *reply {
			return video(map[string]string{"X-Weir-Callback-URL": c.hooks.URL, "X-Weir-Callback-Events": "all"})
		}, "X-Weir-Callback-Events"},
	} {
		e := checkError(t, tc.rep(), http.StatusBadRequest, "invalid_request")
		if e.Type != "invalid_request_error" || e.Param == nil || *e.Param != tc.param {
			t.Errorf("%s: error %s param %v (%s), want invalid_request_error on %s", tc.name, e.Type, e.Param, e.Message, tc.param)
		}
	}
	if n := len(c.g.listTasks(t, c.key)); n != 0 {
		t.Errorf("%d tasks stored from refused submissions", n)
	}

	// Body and headers that agree are one request; the events count for
	// Idempotency-Key.
	first, st := c.g.submitTask(t, c.key, progressTaskBody("idem", c.hooks.URL, []string{"progress"}), "k-events")
	if st != http.StatusAccepted {
		t.Fatalf("first submission: %d", st)
	}
	rep := task(taskBody("idem", ""), map[string]string{"Idempotency-Key": "k-events",
		"X-Weir-Callback-URL": c.hooks.URL, "X-Weir-Callback-Events": "progress"})
	var again taskObject
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &again) != nil || again.ID != first.ID {
		t.Errorf("the same request by headers: %d %s, want 200 with %s", rep.Status, rep.Body, first.ID)
	}
	rep = task(taskBody("idem", c.hooks.URL), map[string]string{"Idempotency-Key": "k-events"})
	checkError(t, rep, http.StatusUnprocessableEntity, "idempotency_key_reused")

	// A gateway without callbacks refuses the headers.
	up := startVideoUpstream(t, mock.Config{})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{Workers: 2}))
	_, key := g.createKey(t)
	rep = g.do(t, request{Path: "/v1/videos", Key: key, Body: `{"model":"` + videoModel + `","prompt":"p"}`,
		Header: map[string]string{"X-Weir-Callback-URL": "https://hooks.example.com/weir"}})
	if e := checkError(t, rep, http.StatusBadRequest, "invalid_request"); e.Param == nil || *e.Param != "X-Weir-Callback-URL" {
		t.Errorf("a callback header without callbacks enabled: param %v (%s)", e.Param, e.Message)
	}
	if n := len(g.listTasks(t, key)); n != 0 {
		t.Errorf("%d tasks stored on a gateway without callbacks", n)
	}
	for _, o := range c.g.listTasks(t, c.key) {
		c.g.cancelTask(t, c.key, o.ID)
	}
}
