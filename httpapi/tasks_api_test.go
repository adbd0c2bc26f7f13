package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/task"
	"github.com/weir-gateway/weir/webhook"
)

// call sends body (if not "") to path with method and the secret key,
// and returns the answer with its body read.
func (b *testBundle) call(t testing.TB, method, path, key, body string, h http.Header) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.http.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// object decodes a JSON answer of status want.
func object[T any](t testing.TB, resp *http.Response, body []byte, want int) T {
	t.Helper()
	var v T
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return v
}

// callAs sends a request (as call) and decodes its answer, which must be
// of status want.
func callAs[T any](t testing.TB, b *testBundle, want int, method, path, key, body string, h http.Header) T {
	t.Helper()
	resp, out := b.call(t, method, path, key, body, h)
	return object[T](t, resp, out, want)
}

// wantError checks an error answer: its status, code and param.
func wantError(t testing.TB, resp *http.Response, body []byte, status int, code weir.Code, param string) errorDetail {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("answer %d is not in the error shape: %s", resp.StatusCode, body)
	}
	gotParam := ""
	if e.Error.Param != nil {
		gotParam = *e.Error.Param
	}
	if resp.StatusCode != status || e.Error.Code != string(code) || gotParam != param {
		t.Errorf("%s %s: %d %s (param %q), want %d %s (param %q): %s", resp.Request.Method, resp.Request.URL,
			resp.StatusCode, e.Error.Code, gotParam, status, code, param, body)
	}
	return e.Error
}

// waitTask waits until the task id is in status st.
func (b *testBundle) waitTask(t testing.TB, id string, st weir.TaskStatus) weir.Task {
	t.Helper()
	for {
		got, err := b.tasks.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == st {
			return got
		}
		if got.Status.Terminal() {
			t.Fatalf("task %s ended %s (%s), want %s", id, got.Status, got.ErrorMessage, st)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("task %s still %s, want %s", id, got.Status, st)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func taskSetup(t testing.TB, o setupOpts) *testBundle {
	t.Helper()
	if o.tasks == nil {
		o.tasks = &task.Config{}
	}
	return setup(t, o)
}

// TestTasksDisabled: without a task service the video and task APIs
// answer 404 saying tasks are off, after authenticating.
func TestTasksDisabled(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/videos", `{"model":"v","prompt":"p"}`},
		{http.MethodGet, "/v1/videos", ""},
		{http.MethodGet, "/v1/videos/video_1", ""},
		{http.MethodGet, "/v1/videos/video_1/content", ""},
		{http.MethodDelete, "/v1/videos/video_1", ""},
		{http.MethodPost, "/v1/tasks", `{"model":"v","input":{}}`},
		{http.MethodGet, "/v1/tasks", ""},
		{http.MethodGet, "/v1/tasks/task_1", ""},
		{http.MethodPost, "/v1/tasks/task_1/cancel", ""},
		{http.MethodDelete, "/v1/tasks/task_1", ""},
	} {
		resp, body := b.call(t, c.method, c.path, b.key, c.body, nil)
		if e := wantError(t, resp, body, http.StatusNotFound, weir.CodeNotFound, ""); !strings.Contains(e.Message, "tasks are not enabled") {
			t.Errorf("%s %s: %q", c.method, c.path, e.Message)
		}
		resp, body = b.call(t, c.method, c.path, "sk-wrong", c.body, nil)
		wantError(t, resp, body, http.StatusUnauthorized, weir.CodeUnauthorized, "")
	}
}

// TestVideoLifecycle: a video is created, runs on the mock's video API,
// completes; its content is served in each variant with the upstream's
// type; once deleted it is gone.
func TestVideoLifecycle(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{})
	v := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"a weir","seconds":"8","size":"1280x720"}`, nil)
	if !strings.HasPrefix(v.ID, "video_") || v.Object != "video" || v.Model != "v" || v.Seconds != "8" || v.Size != "1280x720" || *v.Prompt != "a weir" {
		t.Fatalf("created %+v", v)
	}
	b.waitTask(t, v.ID, weir.TaskSucceeded)
	got := callAs[videoObject](t, b, http.StatusOK, http.MethodGet, "/v1/videos/"+v.ID, b.key, "", nil)
	if got.Status != "completed" || got.Weir.Status != weir.TaskSucceeded || got.CompletedAt == nil || got.Progress != 100 {
		t.Errorf("completed video %+v", got)
	}
	for variant, ctype := range map[string]string{"": "video/mp4", "video": "video/mp4", "thumbnail": "image/webp", "spritesheet": "image/jpeg"} {
		resp, body := b.call(t, http.MethodGet, "/v1/videos/"+v.ID+"/content?variant="+variant, b.key, "", nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ctype || len(body) == 0 {
			t.Errorf("variant %q: %d %s, %d bytes", variant, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	resp, body := b.call(t, http.MethodGet, "/v1/videos/"+v.ID+"/content?variant=poster", b.key, "", nil)
	wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, "variant")

	del := callAs[deletedObject](t, b, http.StatusOK, http.MethodDelete, "/v1/videos/"+v.ID, b.key, "", nil)
	if del != (deletedObject{ID: v.ID, Object: "video.deleted", Deleted: true}) {
		t.Errorf("delete answered %+v", del)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/videos/" + v.ID}, {http.MethodDelete, "/v1/videos/" + v.ID}, {http.MethodGet, "/v1/videos/" + v.ID + "/content"},
	} {
		resp, body := b.call(t, c.method, c.path, b.key, "", nil)
		wantError(t, resp, body, http.StatusNotFound, weir.CodeNotFound, "id")
	}
}

// TestTaskQueuedCancel: with one slot on the platform model, a second
// task queues and says where it stands; it has no content; cancelled, it
// ends cancelled, and the task object says so; delete of the running one
// cancels it and it is gone.
func TestTaskQueuedCancel(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{mock: mock.Config{JobDuration: time.Hour}, vlimits: weir.Limits{Concurrency: 1, QueueLimit: 10}})
	first := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"one"}}`, nil)
	b.waitTask(t, first.ID, weir.TaskRunning)
	v := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"two"}`, nil)
	if v.Status != "queued" || v.Weir.QueuePosition == nil || *v.Weir.QueuePosition != 1 || v.Weir.EstimatedWait == nil {
		t.Fatalf("queued video %+v (weir %+v)", v, v.Weir)
	}
	resp, body := b.call(t, http.MethodGet, "/v1/videos/"+v.ID+"/content", b.key, "", nil)
	if e := wantError(t, resp, body, http.StatusNotFound, weir.CodeNotFound, "id"); !strings.Contains(e.Message, "queued") {
		t.Errorf("content of a queued video: %q", e.Message)
	}
	got := callAs[taskObject](t, b, http.StatusOK, http.MethodGet, "/v1/tasks/"+v.ID, b.key, "", nil)
	if got.Status != weir.TaskQueued || got.Queue == nil || got.Queue.Position != 1 || got.FinishedAt != nil || string(got.Result) != "null" {
		t.Errorf("queued task %+v", got)
	}
	c := callAs[taskObject](t, b, http.StatusOK, http.MethodPost, "/v1/tasks/"+v.ID+"/cancel", b.key, "", nil)
	if c.Status != weir.TaskCancelled || c.FinishedAt == nil || c.Queue != nil {
		t.Errorf("cancelled task %+v", c)
	}
	del := callAs[deletedObject](t, b, http.StatusOK, http.MethodDelete, "/v1/tasks/"+first.ID, b.key, "", nil)
	if del != (deletedObject{ID: first.ID, Object: "task.deleted", Deleted: true}) {
		t.Errorf("delete answered %+v", del)
	}
	resp, body = b.call(t, http.MethodPost, "/v1/tasks/"+first.ID+"/cancel", b.key, "", nil)
	wantError(t, resp, body, http.StatusNotFound, weir.CodeNotFound, "id")
}

// TestTaskOwnership: another key's tasks are not found, whatever the
// endpoint, and not listed.
func TestTaskOwnership(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{})
	other := b.newKey(t, weir.APIKey{})
	v := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"mine"}`, nil)
	tk := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"mine"}}`, nil)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/videos/" + v.ID}, {http.MethodGet, "/v1/videos/" + v.ID + "/content"}, {http.MethodDelete, "/v1/videos/" + v.ID},
		{http.MethodGet, "/v1/tasks/" + tk.ID}, {http.MethodPost, "/v1/tasks/" + tk.ID + "/cancel"}, {http.MethodDelete, "/v1/tasks/" + tk.ID},
		{http.MethodGet, "/v1/tasks/task_nonesuch"},
	} {
		resp, body := b.call(t, c.method, c.path, other, "", nil)
		wantError(t, resp, body, http.StatusNotFound, weir.CodeNotFound, "id")
	}
	if l := callAs[videoList](t, b, http.StatusOK, http.MethodGet, "/v1/videos", other, "", nil); len(l.Data) != 0 || l.FirstID != nil || l.HasMore {
		t.Errorf("another key's video list %+v", l)
	}
	resp, body := b.call(t, http.MethodGet, "/v1/videos?after="+v.ID, other, "", nil)
	wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, "after")
	var tl struct {
		Data []taskObject `json:"data"`
	}
	if tl = callAs[struct {
		Data []taskObject `json:"data"`
	}](t, b, http.StatusOK, http.MethodGet, "/v1/tasks", other, "", nil); len(tl.Data) != 0 {
		t.Errorf("another key's task list %+v", tl)
	}
	// The owner still has both.
	b.call(t, http.MethodGet, "/v1/videos/"+v.ID, b.key, "", nil)
	if _, err := b.tasks.Get(t.Context(), tk.ID); err != nil {
		t.Errorf("the owner's task: %v", err)
	}
}

// TestVideoList pages through the caller's videos: newest first unless
// order=asc, limit and has_more, after an id; tasks of the task API are
// not videos; bad parameters are 400s naming them.
func TestVideoList(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{mock: mock.Config{JobDuration: time.Hour}})
	var ids []string
	for i := range 3 {
		v := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"p`+string(rune('0'+i))+`"}`, nil)
		ids = append(ids, v.ID)
	}
	callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"not a video"}}`, nil)
	list := func(q string) (videoList, []string) {
		l := callAs[videoList](t, b, http.StatusOK, http.MethodGet, "/v1/videos"+q, b.key, "", nil)
		var got []string
		for _, v := range l.Data {
			got = append(got, v.ID)
		}
		return l, got
	}
	same := func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }
	l, got := list("")
	if want := []string{ids[2], ids[1], ids[0]}; !same(got, want) || l.HasMore || *l.FirstID != ids[2] || *l.LastID != ids[0] {
		t.Errorf("default list %v (has_more %v), want %v", got, l.HasMore, want)
	}
	l, got = list("?limit=2")
	if want := []string{ids[2], ids[1]}; !same(got, want) || !l.HasMore || *l.LastID != ids[1] {
		t.Errorf("limit=2: %v (has_more %v), want %v and more", got, l.HasMore, want)
	}
	l, got = list("?limit=2&after=" + *l.LastID)
	if want := []string{ids[0]}; !same(got, want) || l.HasMore {
		t.Errorf("second page %v (has_more %v), want %v", got, l.HasMore, want)
	}
	l, got = list("?order=asc&limit=2&after=" + ids[0])
	if want := []string{ids[1], ids[2]}; !same(got, want) || l.HasMore {
		t.Errorf("asc after the first %v (has_more %v), want %v", got, l.HasMore, want)
	}
	for q, param := range map[string]string{
		"?order=up": "order", "?limit=0": "limit", "?limit=101": "limit", "?limit=x": "limit", "?after=video_nonesuch": "after",
	} {
		resp, body := b.call(t, http.MethodGet, "/v1/videos"+q, b.key, "", nil)
		wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, param)
	}
}

// TestTaskList pages through the caller's tasks oldest first with the
// after cursor, filters by status, and refuses bad parameters.
func TestTaskList(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{mock: mock.Config{JobDuration: time.Hour}})
	var ids []string
	for range 3 {
		tk := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"p"}}`, nil)
		ids = append(ids, tk.ID)
	}
	callAs[taskObject](t, b, http.StatusOK, http.MethodPost, "/v1/tasks/"+ids[1]+"/cancel", b.key, "", nil)
	type page struct {
		Object  string       `json:"object"`
		Data    []taskObject `json:"data"`
		HasMore bool         `json:"has_more"`
		After   string       `json:"after"`
	}
	idsOf := func(p page) string {
		var s []string
		for _, d := range p.Data {
			s = append(s, d.ID)
		}
		return strings.Join(s, ",")
	}
	p := callAs[page](t, b, http.StatusOK, http.MethodGet, "/v1/tasks?limit=2", b.key, "", nil)
	if idsOf(p) != ids[0]+","+ids[1] || !p.HasMore || p.After == "" || p.Object != "list" {
		t.Errorf("first page %+v", p)
	}
	p = callAs[page](t, b, http.StatusOK, http.MethodGet, "/v1/tasks?limit=2&after="+p.After, b.key, "", nil)
	if idsOf(p) != ids[2] || p.HasMore || p.After != "" {
		t.Errorf("second page %+v", p)
	}
	p = callAs[page](t, b, http.StatusOK, http.MethodGet, "/v1/tasks?status=cancelled", b.key, "", nil)
	if idsOf(p) != ids[1] {
		t.Errorf("cancelled tasks %+v", p)
	}
	for q, param := range map[string]string{"?status=done": "status", "?after=-1": "after", "?after=x": "after", "?limit=1001": "limit"} {
		resp, body := b.call(t, http.MethodGet, "/v1/tasks"+q, b.key, "", nil)
		wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, param)
	}
}

// TestTaskIdempotency: the same Idempotency-Key with the same request
// returns the first task (200, not 202) and makes no other; with a
// different request it is refused with 422 and changes nothing.
func TestTaskIdempotency(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{mock: mock.Config{JobDuration: time.Hour}})
	h := http.Header{HeaderIdempotencyKey: {"idem-1"}}
	const req = `{"model":"v","input":{"prompt":"p"}}`
	first := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, req, h)
	again := callAs[taskObject](t, b, http.StatusOK, http.MethodPost, "/v1/tasks", b.key, req, h)
	if again.ID != first.ID {
		t.Errorf("repeat made %s, want %s", again.ID, first.ID)
	}
	resp, body := b.call(t, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"other"}}`, h)
	wantError(t, resp, body, http.StatusUnprocessableEntity, weir.CodeIdempotencyKeyReused, HeaderIdempotencyKey)

	vh := http.Header{HeaderIdempotencyKey: {"idem-v"}}
	v1 := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"p"}`, vh)
	v2 := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"p"}`, vh)
	if v1.ID != v2.ID {
		t.Errorf("repeated video made %s, want %s", v2.ID, v1.ID)
	}
	resp, body = b.call(t, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"q"}`, vh)
	wantError(t, resp, body, http.StatusUnprocessableEntity, weir.CodeIdempotencyKeyReused, HeaderIdempotencyKey)

	ts, err := b.tasks.List(t.Context(), weir.TaskFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 {
		t.Errorf("%d tasks stored, want 2", len(ts))
	}
	// Deleted, the task its key made is not found.
	callAs[deletedObject](t, b, http.StatusOK, http.MethodDelete, "/v1/tasks/"+first.ID, b.key, "", nil)
	resp, body = b.call(t, http.MethodPost, "/v1/tasks", b.key, req, h)
	wantError(t, resp, body, http.StatusNotFound, weir.CodeNotFound, HeaderIdempotencyKey)
}

// TestTaskBadInput: each refused submission names what is wrong and
// stores nothing.
func TestTaskBadInput(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{})
	limited := b.newKey(t, weir.APIKey{Models: []string{"m"}})
	for _, tc := range []struct {
		name, path, key, body string
		h                     http.Header
		status                int
		code                  weir.Code
		param                 string
	}{
		{"not JSON", "/v1/tasks", b.key, `[1]`, nil, 400, weir.CodeInvalidRequest, ""},
		{"no input", "/v1/tasks", b.key, `{"model":"v"}`, nil, 400, weir.CodeInvalidRequest, "input"},
		{"input not an object", "/v1/tasks", b.key, `{"model":"v","input":"p"}`, nil, 400, weir.CodeInvalidRequest, "input"},
		{"no model", "/v1/tasks", b.key, `{"input":{}}`, nil, 400, weir.CodeInvalidRequest, "model"},
		{"model too long", "/v1/tasks", b.key, `{"model":"` + strings.Repeat("m", 300) + `","input":{}}`, nil, 400, weir.CodeInvalidRequest, "model"},
		{"unknown model", "/v1/tasks", b.key, `{"model":"nonesuch","input":{}}`, nil, 404, weir.CodeNotFound, "model"},
		{"a chat task without messages", "/v1/tasks", b.key, `{"model":"m","input":{}}`, nil, 400, weir.CodeInvalidRequest, "input.messages"},
		{"a chat model by the video API", "/v1/videos", b.key, `{"model":"m","prompt":"p"}`, nil, 400, weir.CodeInvalidRequest, "model"},
		{"a model the key may not use", "/v1/tasks", limited, `{"model":"v","input":{}}`, nil, 403, weir.CodeForbidden, "model"},
		{"callbacks off", "/v1/tasks", b.key, `{"model":"v","input":{},"callback_url":"https://hooks.example.com/"}`, nil, 400, weir.CodeInvalidRequest, "callback_url"},
		{"bad callback events", "/v1/tasks", b.key, `{"model":"v","input":{},"callback_events":"x"}`, nil, 400, weir.CodeInvalidRequest, "callback_events"},
		{"bad priority", "/v1/tasks", b.key, `{"model":"v","input":{}}`, http.Header{HeaderPriority: {"urgent"}}, 400, weir.CodeInvalidRequest, HeaderPriority},
		{"bad max wait", "/v1/tasks", b.key, `{"model":"v","input":{}}`, http.Header{HeaderMaxWait: {"soon"}}, 400, weir.CodeInvalidRequest, HeaderMaxWait},
		{"video without a prompt", "/v1/videos", b.key, `{"model":"v"}`, nil, 400, weir.CodeInvalidRequest, "prompt"},
		{"video not JSON", "/v1/videos", b.key, `{`, nil, 400, weir.CodeInvalidRequest, ""},
		{"video callbacks off", "/v1/videos", b.key, `{"model":"v","prompt":"p"}`, http.Header{HeaderCallbackURL: {"https://hooks.example.com/"}}, 400, weir.CodeInvalidRequest, HeaderCallbackURL},
		{"video bad callback header", "/v1/videos", b.key, `{"model":"v","prompt":"p"}`, http.Header{HeaderCallbackEvents: {"nope"}}, 400, weir.CodeInvalidRequest, HeaderCallbackEvents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.call(t, http.MethodPost, tc.path, tc.key, tc.body, tc.h)
			wantError(t, resp, body, tc.status, tc.code, tc.param)
		})
	}
	ts, err := b.tasks.List(t.Context(), weir.TaskFilter{Limit: 10})
	if err != nil || len(ts) != 0 {
		t.Errorf("refused submissions stored %d tasks (%v)", len(ts), err)
	}
}

// TestVideoForms: a video request may come as a form, as OpenAI's SDKs
// send it; its fields are the request; a file input is refused.
func TestVideoForms(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{mock: mock.Config{JobDuration: time.Hour}})
	send := func(ctype string, body []byte) (*http.Response, []byte) {
		return b.call(t, http.MethodPost, "/v1/videos", b.key, string(body), http.Header{"Content-Type": {ctype}})
	}
	form := url.Values{"model": {"v"}, "prompt": {"by form"}, "seconds": {"12"}}
	v := callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, form.Encode(), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if *v.Prompt != "by form" || v.Seconds != "12" {
		t.Errorf("urlencoded video %+v", v)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("model", "v")
	_ = mw.WriteField("prompt", "multipart")
	_ = mw.Close()
	v = callAs[videoObject](t, b, http.StatusOK, http.MethodPost, "/v1/videos", b.key, buf.String(), http.Header{"Content-Type": {mw.FormDataContentType()}})
	if *v.Prompt != "multipart" {
		t.Errorf("multipart video %+v", v)
	}
	buf.Reset()
	mw = multipart.NewWriter(&buf)
	_ = mw.WriteField("model", "v")
	_ = mw.WriteField("prompt", "with a file")
	fw, _ := mw.CreateFormFile("input_reference", "ref.png")
	_, _ = fw.Write([]byte("png"))
	_ = mw.Close()
	resp, body := send(mw.FormDataContentType(), buf.Bytes())
	wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, "input_reference")
	resp, body = send("multipart/form-data; boundary=x", []byte("not multipart"))
	wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, "")
}

// TestTaskCallbacks: with callbacks enabled, a callback URL the sender
// would refuse is a 400 naming where it came from; an accepted one is in
// the task object with its events.
func TestTaskCallbacks(t *testing.T) {
	t.Parallel()
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	b := taskSetup(t, setupOpts{mock: mock.Config{JobDuration: time.Hour},
		hooks: task.Webhooks{Sender: webhook.NewSender(webhook.Config{}), Signer: signer}})
	for _, u := range []string{"ftp://hooks.example.com/", "http://127.0.0.1:9/hook", "https://user:pw@hooks.example.com/"} {
		resp, body := b.call(t, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{},"callback_url":"`+u+`"}`, nil)
		wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, "callback_url")
		resp, body = b.call(t, http.MethodPost, "/v1/videos", b.key, `{"model":"v","prompt":"p"}`, http.Header{HeaderCallbackURL: {u}})
		wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, HeaderCallbackURL)
	}
	const hook = "https://hooks.example.com/weir"
	tk := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key,
		`{"model":"v","input":{},"callback_url":"`+hook+`","callback_events":["progress"]}`, nil)
	if tk.CallbackURL != hook || len(tk.CallbackEvents) != 1 || tk.CallbackEvents[0] != weir.TaskEventProgress {
		t.Errorf("task with a callback %+v", tk)
	}
}

// TestTaskBodyTooLarge: a task or video request over MaxBodyBytes, as
// JSON or as a form, is a 413 and stores nothing.
func TestTaskBodyTooLarge(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{cfg: Config{MaxBodyBytes: 512}})
	big := strings.Repeat("x", 1024)
	for _, c := range []struct {
		path, body string
		h          http.Header
	}{
		{"/v1/tasks", `{"model":"v","input":{"prompt":"` + big + `"}}`, nil},
		{"/v1/videos", `{"model":"v","prompt":"` + big + `"}`, nil},
		{"/v1/videos", url.Values{"model": {"v"}, "prompt": {big}}.Encode(), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}},
	} {
		resp, body := b.call(t, http.MethodPost, c.path, b.key, c.body, c.h)
		wantError(t, resp, body, http.StatusRequestEntityTooLarge, weir.CodePayloadTooLarge, "")
	}
	if ts, err := b.tasks.List(t.Context(), weir.TaskFilter{Limit: 10}); err != nil || len(ts) != 0 {
		t.Errorf("refused submissions stored %d tasks (%v)", len(ts), err)
	}
}

// TestTaskIdempotencyPastTheBacklog: with the backlog full
// (tasks.queue_limit), a new submission is 429 queue_full, but a
// resubmission of an accepted Idempotency-Key gets its task (200), and
// the key reused with another request is still 422.
func TestTaskIdempotencyPastTheBacklog(t *testing.T) {
	t.Parallel()
	b := taskSetup(t, setupOpts{tasks: &task.Config{QueueLimit: 1}, mock: mock.Config{JobDuration: time.Hour},
		vlimits: weir.Limits{Concurrency: 1, QueueLimit: 10}})
	first := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"one"}}`, nil)
	b.waitTask(t, first.ID, weir.TaskRunning)
	h := http.Header{HeaderIdempotencyKey: {"idem-full"}}
	const req = `{"model":"v","input":{"prompt":"two"}}`
	queued := callAs[taskObject](t, b, http.StatusAccepted, http.MethodPost, "/v1/tasks", b.key, req, h)

	resp, body := b.call(t, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"three"}}`, nil)
	wantError(t, resp, body, http.StatusTooManyRequests, weir.CodeQueueFull, "")
	again := callAs[taskObject](t, b, http.StatusOK, http.MethodPost, "/v1/tasks", b.key, req, h)
	if again.ID != queued.ID || again.Status != weir.TaskQueued {
		t.Errorf("the resubmission past the backlog got %s (%s); want %s, queued", again.ID, again.Status, queued.ID)
	}
	resp, body = b.call(t, http.MethodPost, "/v1/tasks", b.key, `{"model":"v","input":{"prompt":"other"}}`, h)
	wantError(t, resp, body, http.StatusUnprocessableEntity, weir.CodeIdempotencyKeyReused, HeaderIdempotencyKey)
	if ts, err := b.tasks.List(t.Context(), weir.TaskFilter{Limit: 100}); err != nil || len(ts) != 2 {
		t.Errorf("%d tasks stored (%v); want 2", len(ts), err)
	}
}
