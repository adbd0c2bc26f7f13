package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// TestVideoObject checks the video object against OpenAI's: every field
// present, nullable ones null until known, the upstream's object deciding
// what it reports once the video is finished.
func TestVideoObject(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	finished := created.Add(time.Minute)
	running := weir.Task{ID: "video_1", Model: "sora-2", Status: weir.TaskRunning, Progress: 40, CreatedAt: created,
		Input: []byte(`{"model":"sora-2","prompt":"a weir at dawn","seconds":8}`)}
	succeeded := running
	succeeded.Status, succeeded.Progress, succeeded.FinishedAt = weir.TaskSucceeded, 100, finished
	succeeded.Result = []byte(`{"id":"video_up","object":"video","status":"completed","prompt":"upstream's copy",
		"seconds":"8","size":"720x1280","completed_at":1767323105,"expires_at":1767326705,"remixed_from_video_id":null}`)
	failed := running
	failed.Status, failed.FinishedAt, failed.ErrorCode, failed.ErrorMessage = weir.TaskFailed, finished, "video_generation_failed", "it failed"
	failed.Input = []byte(`{"prompt":"p","seconds":"12","size":"1280x720"}`)
	admitted := weir.Task{ID: "video_2", Model: "sora-2", Status: weir.TaskAdmitted, CreatedAt: created,
		Input: []byte(`{"model":"sora-2","prompt":"nothing else asked"}`)}

	for _, tc := range []struct {
		name string
		task weir.Task
		want map[string]string // field → its JSON
	}{
		{"running", running, map[string]string{
			"id": `"video_1"`, "object": `"video"`, "model": `"sora-2"`, "status": `"in_progress"`, "progress": `40`,
			"created_at": `1767323045`, "completed_at": `null`, "expires_at": `null`, "prompt": `"a weir at dawn"`,
			"seconds": `"8"`, "size": `"720x1280"`, "remixed_from_video_id": `null`, "error": `null`,
		}},
		{"admitted, with OpenAI's defaults", admitted, map[string]string{
			"status": `"in_progress"`, "prompt": `"nothing else asked"`, "seconds": `"4"`, "size": `"720x1280"`,
		}},
		{"succeeded", succeeded, map[string]string{
			"status": `"completed"`, "progress": `100`, "completed_at": `1767323105`, "expires_at": `1767326705`,
			"prompt": `"a weir at dawn"`, "seconds": `"8"`, "size": `"720x1280"`, "remixed_from_video_id": `null`, "error": `null`,
		}},
		{"failed", failed, map[string]string{
			"status": `"failed"`, "expires_at": `null`, "prompt": `"p"`, "seconds": `"12"`, "size": `"1280x720"`,
			"error": `{"code":"video_generation_failed","message":"it failed"}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{}
			b, err := json.Marshal(s.videoOf(t.Context(), tc.task))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"id", "object", "model", "status", "progress", "created_at", "completed_at",
				"expires_at", "prompt", "seconds", "size", "remixed_from_video_id", "error"} {
				if _, ok := got[f]; !ok {
					t.Errorf("no %q field in %s", f, b)
				}
			}
			for f, want := range tc.want {
				if string(got[f]) != want {
					t.Errorf("%s = %s, want %s", f, got[f], want)
				}
			}
		})
	}
}

// TestCallbackOf: what a task request asks for its callbacks, from the
// body, the X-Weir-Callback-* headers or both, and what is refused.
func TestCallbackOf(t *testing.T) {
	t.Parallel()
	const a, b = "https://hooks.example.com/a", "https://hooks.example.com/b"
	progress := []weir.TaskEvent{weir.TaskEventProgress}
	long := a + "/" + strings.Repeat("x", 2048-len(a)-1)
	for _, tc := range []struct {
		name      string
		body      string // JSON, "" for the video API (no body fields)
		header    map[string][]string
		url       string
		events    []weir.TaskEvent
		param     string // where the URL came from, or the refused field
		refused   bool
		errSubstr string
	}{
		{name: "nothing", body: `{}`},
		{name: "body url", body: `{"callback_url":"` + a + `"}`, url: a, param: "callback_url"},
		{name: "body url and events", body: `{"callback_url":"` + a + `","callback_events":["progress"]}`, url: a, events: progress, param: "callback_url"},
		{name: "repeated events", body: `{"callback_url":"` + a + `","callback_events":["progress","progress"]}`, url: a, events: progress, param: "callback_url"},
		{name: "no events", body: `{"callback_url":"` + a + `","callback_events":[]}`, url: a, param: "callback_url"},
		{name: "null fields", body: `{"callback_url":null,"callback_events":null}`},
		{name: "header url", body: `{}`, header: map[string][]string{HeaderCallbackURL: {a}}, url: a, param: HeaderCallbackURL},
		{name: "video: header url and events", header: map[string][]string{HeaderCallbackURL: {a}, HeaderCallbackEvents: {" progress , "}},
			url: a, events: progress, param: HeaderCallbackURL},
		{name: "both, agreeing", body: `{"callback_url":"` + a + `","callback_events":["progress"]}`,
			header: map[string][]string{HeaderCallbackURL: {a}, HeaderCallbackEvents: {"progress"}}, url: a, events: progress, param: "callback_url"},
		{name: "body events, header url", body: `{"callback_events":["progress"]}`, header: map[string][]string{HeaderCallbackURL: {a}},
			url: a, events: progress, param: HeaderCallbackURL},
		{name: "urls differ", body: `{"callback_url":"` + a + `"}`, header: map[string][]string{HeaderCallbackURL: {b}},
			refused: true, param: "callback_url", errSubstr: "differ"},
		{name: "events differ", body: `{"callback_url":"` + a + `","callback_events":[]}`, header: map[string][]string{HeaderCallbackEvents: {"progress"}},
			refused: true, param: "callback_events", errSubstr: "differ"},
		{name: "an unknown event", body: `{"callback_url":"` + a + `","callback_events":["progress","done"]}`,
			refused: true, param: "callback_events", errSubstr: `"done"`},
		{name: "an unknown event in the header", header: map[string][]string{HeaderCallbackURL: {a}, HeaderCallbackEvents: {"progress,everything"}},
			refused: true, param: HeaderCallbackEvents, errSubstr: `"everything"`},
		{name: "events not an array", body: `{"callback_url":"` + a + `","callback_events":"progress"}`, refused: true, param: "callback_events"},
		{name: "a url not a string", body: `{"callback_url":42}`, refused: true, param: "callback_url"},
		{name: "events without a url", body: `{"callback_events":["progress"]}`, refused: true, param: "callback_events", errSubstr: "need a callback URL"},
		{name: "header events without a url", header: map[string][]string{HeaderCallbackEvents: {"progress"}}, refused: true, param: HeaderCallbackEvents},
		{name: "the longest url", body: `{"callback_url":"` + long + `"}`, url: long, param: "callback_url"},
		{name: "a url too long", body: `{"callback_url":"` + long + `x"}`, refused: true, param: "callback_url", errSubstr: "at most 2048"},
		{name: "a header url too long", header: map[string][]string{HeaderCallbackURL: {long + "x"}}, refused: true, param: HeaderCallbackURL, errSubstr: "at most 2048"},
		{name: "two header urls", header: map[string][]string{HeaderCallbackURL: {a, b}}, refused: true, param: HeaderCallbackURL, errSubstr: "once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/tasks", nil)
			for k, vs := range tc.header {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			var body map[string]json.RawMessage
			if tc.body != "" {
				if err := json.Unmarshal([]byte(tc.body), &body); err != nil {
					t.Fatal(err)
				}
			}
			cb, aerr := callbackOf(r, body)
			if tc.refused {
				if aerr == nil || aerr.Code != weir.CodeInvalidRequest || aerr.Param != tc.param || !strings.Contains(aerr.Message, tc.errSubstr) {
					t.Fatalf("callbackOf = %+v, %+v; want invalid_request on %s saying %q", cb, aerr, tc.param, tc.errSubstr)
				}
				return
			}
			if aerr != nil {
				t.Fatalf("callbackOf: %v", aerr)
			}
			if cb.URL != tc.url || !slices.Equal(cb.Events, tc.events) || (tc.url != "" && cb.param != tc.param) {
				t.Errorf("callbackOf = %+v, want url %q events %v from %s", cb, tc.url, tc.events, tc.param)
			}
		})
	}
}
