package mock

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image/jpeg"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is the time the video jobs read; it moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newVideoFixture is a fixture whose jobs run on a fake clock.
func newVideoFixture(t *testing.T, cfg Config) (*fixture, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_760_000_000, 0)}
	f := newFixtureWith(t, cfg, func(s *Server) { s.now = clk.Now })
	return f, clk
}

var videoBody = map[string]any{"model": "sora-2", "prompt": "A weir at dawn, water sliding over it.", "seconds": "8", "size": "1280x720"}

func videoWith(extra map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range videoBody {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

var videoKeys = []string{"id", "object", "model", "status", "progress", "created_at", "completed_at",
	"expires_at", "prompt", "seconds", "size", "remixed_from_video_id", "error"}

// submit posts a video job and returns its object.
func (f *fixture) submit(body any, header map[string]string) map[string]any {
	f.t.Helper()
	m := obj(f.t, expectStatus(f.t, f.post("/v1/videos", body, header), http.StatusOK))
	hasKeys(f.t, "video", m, videoKeys...)
	if m["object"] != "video" {
		f.t.Errorf("object %v", m["object"])
	}
	return m
}

func (f *fixture) video(id string) map[string]any {
	f.t.Helper()
	m := obj(f.t, expectStatus(f.t, f.request(context.Background(), http.MethodGet, "/v1/videos/"+id, nil, nil), http.StatusOK))
	hasKeys(f.t, "video", m, videoKeys...)
	return m
}

func (f *fixture) get(path string, header map[string]string) *http.Response {
	f.t.Helper()
	return f.request(context.Background(), http.MethodGet, path, nil, header)
}

func expectState(t *testing.T, m map[string]any, status string, progress int) {
	t.Helper()
	if m["status"] != status || m["progress"] != float64(progress) {
		t.Errorf("status %v progress %v, want %s %d", m["status"], m["progress"], status, progress)
	}
}

// A job is queued at its submit, in progress with its progress rising as
// the clock moves, then completed with its content, and gone once its
// retention has passed.
func TestVideoLifecycle(t *testing.T) {
	t.Parallel()
	f, clk := newVideoFixture(t, Config{JobDuration: 100 * time.Second})
	v := f.submit(videoBody, nil)
	id, _ := v["id"].(string)
	if !strings.HasPrefix(id, "video_") || v["model"] != "sora-2" || v["seconds"] != "8" || v["size"] != "1280x720" ||
		v["prompt"] != videoBody["prompt"] || v["created_at"] != float64(clk.Now().Unix()) {
		t.Errorf("submitted %v", v)
	}
	expectState(t, v, "queued", 0)
	if v["completed_at"] != nil || v["expires_at"] != nil || v["error"] != nil {
		t.Errorf("a queued job has %v %v %v", v["completed_at"], v["expires_at"], v["error"])
	}
	expectState(t, f.video(id), "queued", 0)

	clk.Advance(25 * time.Second)
	expectState(t, f.video(id), "in_progress", 25)
	clk.Advance(50 * time.Second)
	expectState(t, f.video(id), "in_progress", 75)
	e := expectError(t, f.get("/v1/videos/"+id+"/content", nil), http.StatusConflict, "invalid_request_error")
	if e["code"] != "video_not_ready" {
		t.Errorf("content of a running job: %v", e)
	}
	if st := f.s.Stats(); st.JobsRunning != 1 || st.PeakJobsRunning != 1 || st.JobsCompleted != 0 {
		t.Errorf("while running: %+v", st)
	}

	clk.Advance(25 * time.Second)
	v = f.video(id)
	expectState(t, v, "completed", 100)
	created := v["created_at"].(float64)
	if v["completed_at"] != created+100 || v["expires_at"] != created+100+3600 || v["error"] != nil {
		t.Errorf("completed %v", v)
	}

	resp := f.get("/v1/videos/"+id+"/content", nil)
	mp4 := expectStatus(t, resp, http.StatusOK)
	if resp.Header.Get("Content-Type") != "video/mp4" || !bytes.Equal(mp4, mockMP4) || string(mp4[4:8]) != "ftyp" {
		t.Errorf("content %q, %d bytes starting %q", resp.Header.Get("Content-Type"), len(mp4), mp4[:min(12, len(mp4))])
	}
	resp = f.get("/v1/videos/"+id+"/content", map[string]string{"Range": "bytes=0-7"})
	if part := expectStatus(t, resp, http.StatusPartialContent); !bytes.Equal(part, mockMP4[:8]) {
		t.Errorf("range %q", part)
	}
	resp = f.get("/v1/videos/"+id+"/content?variant=thumbnail", nil)
	if b := expectStatus(t, resp, http.StatusOK); resp.Header.Get("Content-Type") != "image/webp" || !bytes.Equal(b, mockWebP) ||
		string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" || int(binary.LittleEndian.Uint32(b[4:8])) != len(b)-8 {
		t.Errorf("thumbnail %q, %q", resp.Header.Get("Content-Type"), b)
	}
	resp = f.get("/v1/videos/"+id+"/content?variant=spritesheet", nil)
	if b := expectStatus(t, resp, http.StatusOK); resp.Header.Get("Content-Type") != "image/jpeg" || !bytes.Equal(b, mockJPEG) {
		t.Errorf("spritesheet %q", resp.Header.Get("Content-Type"))
	} else if img, err := jpeg.Decode(bytes.NewReader(b)); err != nil || img.Bounds().Dx() != 128 {
		t.Errorf("spritesheet does not decode as a 128-pixel-wide JPEG: %v", err)
	}
	resp = f.get("/v1/videos/"+id+"/content?variant=video", nil)
	if b := expectStatus(t, resp, http.StatusOK); resp.Header.Get("Content-Type") != "video/mp4" || !bytes.Equal(b, mockMP4) {
		t.Errorf("variant video %q", resp.Header.Get("Content-Type"))
	}
	expectError(t, f.get("/v1/videos/"+id+"/content?variant=gif", nil), http.StatusBadRequest, "invalid_request_error")

	st := f.s.Stats()
	if st.JobsSubmitted != 1 || st.JobsCompleted != 1 || st.JobsRunning != 0 || st.JobPolls != 4 || st.JobSubmits[id] != 1 {
		t.Errorf("after completion: %+v", st)
	}

	// Retention: the job stays until its expires_at, then is gone.
	clk.Advance(time.Hour - time.Second)
	f.video(id)
	clk.Advance(time.Second)
	e = expectError(t, f.get("/v1/videos/"+id, nil), http.StatusNotFound, "invalid_request_error")
	if e["code"] != "video_not_found" {
		t.Errorf("expired job: %v", e)
	}
	if st := f.s.Stats(); len(st.JobSubmits) != 0 || st.JobsCompleted != 1 || len(f.s.Jobs()) != 0 {
		t.Errorf("after retention: %+v", st)
	}
}

// Jobs of different lengths end in the order of their ends, each exactly
// at its end.
func TestVideoJobsEndInOrder(t *testing.T) {
	t.Parallel()
	f, clk := newVideoFixture(t, Config{JobRetention: 3 * time.Second})
	ends := []int{5, 1, 3, 2, 4}
	ids := make([]string, len(ends))
	for i, sec := range ends {
		v := f.submit(videoBody, map[string]string{"X-Mock-Job-Duration": fmt.Sprintf("%ds", sec)})
		ids[i] = v["id"].(string)
	}
	for step := 1; step <= 5; step++ {
		clk.Advance(time.Second)
		st := f.s.Stats()
		held := 0
		for _, sec := range ends {
			if sec+3 > step { // finished jobs are held 3s past their end
				held++
			}
		}
		if st.JobsCompleted != int64(step) || st.JobsRunning != int64(5-step) || len(st.JobSubmits) != held {
			t.Fatalf("at %ds: completed %d, running %d, held %d (want %d)", step, st.JobsCompleted, st.JobsRunning, len(st.JobSubmits), held)
		}
		for i, sec := range ends {
			want := "in_progress"
			switch {
			case sec+3 <= step:
				continue
			case sec <= step:
				want = "completed"
			}
			if got := f.video(ids[i])["status"]; got != want {
				t.Errorf("at %ds: job of %ds is %v", step, sec, got)
			}
		}
	}
	if st := f.s.Stats(); st.PeakJobsRunning != 5 {
		t.Errorf("peak %d", st.PeakJobsRunning)
	}
}

func TestVideoFailure(t *testing.T) {
	t.Parallel()
	f, clk := newVideoFixture(t, Config{JobFailureRate: 1, JobDuration: 10 * time.Second})
	id := f.submit(videoBody, nil)["id"].(string)
	spared := f.submit(videoBody, map[string]string{"X-Mock-Job-Fail": "0"})["id"].(string)
	clk.Advance(10 * time.Second)
	v := f.video(id)
	if v["status"] != "failed" || v["completed_at"] == nil {
		t.Errorf("failed job %v", v)
	}
	e, _ := v["error"].(map[string]any)
	if e["code"] != "video_generation_failed" || e["message"] == "" {
		t.Errorf("error object %v", v["error"])
	}
	expectError(t, f.get("/v1/videos/"+id+"/content", nil), http.StatusConflict, "invalid_request_error")
	expectState(t, f.video(spared), "completed", 100)

	// A job of no duration is done in its submit's answer; X-Mock-Job-Fail
	// fails one whatever the rate.
	g, _ := newVideoFixture(t, Config{})
	expectState(t, g.submit(videoBody, nil), "completed", 100)
	v = g.submit(videoBody, map[string]string{"X-Mock-Job-Fail": "1"})
	if v["status"] != "failed" || v["error"] == nil {
		t.Errorf("forced failure %v", v)
	}
	if st := f.s.Stats(); st.JobsFailed != 1 || st.JobsCompleted != 1 {
		t.Errorf("stats %+v", st)
	}

	// At rate 0.5 about half fail, and the seed fixes which.
	outcomes := func() []string {
		s := New(Config{JobFailureRate: 0.5, Seed: 3})
		var out []string
		for range 200 {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/videos", strings.NewReader(`{"prompt":"p"}`)))
			out = append(out, obj(t, w.Body.Bytes())["status"].(string))
		}
		return out
	}
	first, second := outcomes(), outcomes()
	failed := 0
	for i, o := range first {
		if o == "failed" {
			failed++
		}
		if o != second[i] {
			t.Fatalf("job %d: %s, then %s with the same seed", i, o, second[i])
		}
	}
	if failed < 70 || failed > 130 {
		t.Errorf("%d of 200 failed at rate 0.5", failed)
	}
}

// Under a burst the job cap is exact: MaxJobs start, the rest get 429 with
// Retry-After and start nothing; a job's end or its cancel frees its slot.
func TestVideoJobCap(t *testing.T) {
	t.Parallel()
	const limit, burst = 3, 20
	f, clk := newVideoFixture(t, Config{MaxJobs: limit, JobDuration: time.Minute, RetryAfter: 2 * time.Second})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range burst {
		wg.Go(func() {
			resp := f.post("/v1/videos", videoBody, nil)
			b := readAll(t, resp)
			mu.Lock()
			defer mu.Unlock()
			codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusTooManyRequests {
				if resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(b), "rate_limit_exceeded") {
					t.Errorf("429 Retry-After %q: %s", resp.Header.Get("Retry-After"), b)
				}
			}
		})
	}
	wg.Wait()
	st := f.s.Stats()
	if codes[200] != limit || codes[429] != burst-limit || st.JobsSubmitted != limit || st.JobsRejected != burst-limit ||
		st.JobsRunning != limit || st.PeakJobsRunning != limit || st.MaxJobs != limit || len(f.s.Jobs()) != limit {
		t.Errorf("codes %v, stats %+v", codes, st)
	}

	clk.Advance(time.Minute)
	if st := f.s.Stats(); st.JobsRunning != 0 || st.JobsCompleted != limit {
		t.Errorf("after the jobs' end: %+v", st)
	}
	first := f.submit(videoBody, nil)["id"].(string)
	f.submit(videoBody, nil)
	f.submit(videoBody, nil)
	expectError(t, f.post("/v1/videos", videoBody, nil), http.StatusTooManyRequests, "requests")

	// Cancelling a running job frees its slot at once.
	resp := f.request(context.Background(), http.MethodDelete, "/v1/videos/"+first, nil, nil)
	m := obj(t, expectStatus(t, resp, http.StatusOK))
	if m["id"] != first || m["object"] != "video.deleted" || m["deleted"] != true {
		t.Errorf("delete answered %v", m)
	}
	expectError(t, f.get("/v1/videos/"+first, nil), http.StatusNotFound, "invalid_request_error")
	expectError(t, f.request(context.Background(), http.MethodDelete, "/v1/videos/"+first, nil, nil), http.StatusNotFound, "invalid_request_error")
	f.submit(videoBody, nil)
	if st := f.s.Stats(); st.JobsCancelled != 1 || st.JobsRunning != limit || st.PeakJobsRunning != limit {
		t.Errorf("after cancel: %+v", st)
	}

	// A lowered cap revokes nothing; it turns submits away until the
	// running jobs are below it.
	if err := f.s.Update(func(c *Config) { c.MaxJobs = 1 }); err != nil {
		t.Fatal(err)
	}
	expectError(t, f.post("/v1/videos", videoBody, nil), http.StatusTooManyRequests, "requests")
	if st := f.s.Stats(); st.JobsRunning != limit {
		t.Errorf("a lowered cap changed the running jobs: %d", st.JobsRunning)
	}
	clk.Advance(time.Minute)
	f.submit(videoBody, nil)
}

// The same Idempotency-Key names the same job, however many submits race
// with it; it is scoped to the caller's credentials and lasts as long as
// the job is held.
func TestVideoIdempotency(t *testing.T) {
	t.Parallel()
	f, clk := newVideoFixture(t, Config{JobDuration: time.Minute, JobRetention: time.Minute, MaxJobs: 1})
	const n = 10
	key := map[string]string{"Idempotency-Key": "task-1", "Authorization": "Bearer a"}
	var wg sync.WaitGroup
	ids := make([]string, n)
	replayed := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			resp := f.post("/v1/videos", videoBody, key)
			b := readAll(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("submit %d: %d %s", i, resp.StatusCode, b)
				return
			}
			ids[i], _ = obj(t, b)["id"].(string)
			replayed[i] = resp.Header.Get("Idempotent-Replayed") == "true"
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if ids[i] != ids[0] {
			t.Fatalf("submit %d got %s, submit 0 %s", i, ids[i], ids[0])
		}
		if !replayed[i] {
			fresh++
		}
	}
	id := ids[0]
	st := f.s.Stats()
	if fresh != 1 || st.JobsSubmitted != 1 || st.JobsDeduplicated != n-1 || st.JobSubmits[id] != n || st.JobsRejected != 0 {
		t.Errorf("fresh answers %d, stats %+v", fresh, st)
	}
	if jobs := f.s.Jobs(); len(jobs) != 1 || jobs[0].IdempotencyKey != "task-1" || jobs[0].Submits != n {
		t.Errorf("jobs %+v", jobs)
	}

	// The same key with other parameters is a mistake, not a new job.
	e := expectError(t, f.post("/v1/videos", videoWith(map[string]any{"prompt": "another"}), key), http.StatusConflict, "invalid_request_error")
	if e["code"] != "idempotency_key_reused" {
		t.Errorf("reused key: %v", e)
	}
	// Another account's key space is its own (and the cap is full).
	expectError(t, f.post("/v1/videos", videoBody, map[string]string{"Idempotency-Key": "task-1", "Authorization": "Bearer b"}),
		http.StatusTooManyRequests, "requests")

	// Still the same job once it has ended, until its retention passes.
	clk.Advance(time.Minute)
	if v := f.submit(videoBody, key); v["id"] != id || v["status"] != "completed" {
		t.Errorf("resubmit after the end: %v", v)
	}
	clk.Advance(time.Minute)
	if v := f.submit(videoBody, key); v["id"] == id {
		t.Errorf("the key outlived its job's retention")
	}
	st = f.s.Stats()
	if st.JobsSubmitted != 2 || st.JobsDeduplicated != n || len(st.JobSubmits) != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(key["Idempotency-Key"]) > maxIdempotencyKey {
		t.Fatal("test key too long")
	}
	expectError(t, f.post("/v1/videos", videoBody, map[string]string{"Idempotency-Key": strings.Repeat("k", maxIdempotencyKey+1)}),
		http.StatusBadRequest, "invalid_request_error")
}

// A submit may come as JSON (seconds a string or a number; read as JSON
// whatever Content-Type says, as curl -d sends a form type) or a multipart
// form (as the SDKs send with an input_reference file); missing fields
// take OpenAI's defaults.
func TestVideoSubmitForms(t *testing.T) {
	t.Parallel()
	f, _ := newVideoFixture(t, Config{JobDuration: time.Minute})

	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range map[string]string{"model": "sora-2-pro", "prompt": "from a form", "seconds": "12", "size": "1792x1024"} {
		mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("input_reference", "ref.png")
	fw.Write(mockPNG)
	mw.Close()
	multi := f.submit(buf.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()})
	curl := f.submit(`{"prompt":"curl -d","seconds":"4"}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	number := f.submit(map[string]any{"prompt": "seconds as a number", "seconds": 12}, nil)
	bare := f.submit(map[string]any{"prompt": "defaults"}, nil)

	for _, tc := range []struct {
		v                            map[string]any
		model, prompt, seconds, size string
	}{
		{multi, "sora-2-pro", "from a form", "12", "1792x1024"},
		{curl, "sora-2", "curl -d", "4", "720x1280"},
		{number, "sora-2", "seconds as a number", "12", "720x1280"},
		{bare, "sora-2", "defaults", "4", "720x1280"},
	} {
		if tc.v["model"] != tc.model || tc.v["prompt"] != tc.prompt || tc.v["seconds"] != tc.seconds || tc.v["size"] != tc.size {
			t.Errorf("got %v, want %s %q %s %s", tc.v, tc.model, tc.prompt, tc.seconds, tc.size)
		}
	}
	m := obj(t, expectStatus(t, f.get("/mock/jobs", nil), http.StatusOK))
	data, _ := m["data"].([]any)
	if m["object"] != "list" || len(data) != 4 {
		t.Fatalf("jobs %v", m)
	}
	first := data[0].(map[string]any)
	hasKeys(t, "job", first, "id", "idempotency_key", "model", "prompt", "seconds", "size", "status", "progress", "submits", "created_at", "ends_at")
	if first["id"] != multi["id"] || first["status"] != "queued" || first["submits"] != 1.0 {
		t.Errorf("first job %v", first)
	}
}

func TestVideoBadRequests(t *testing.T) {
	t.Parallel()
	f, _ := newVideoFixture(t, Config{Models: []string{"sora-2"}})
	id := f.submit(videoBody, nil)["id"].(string)
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		header map[string]string
		status int
		param  any
		code   any
	}{
		{"no prompt", "POST", "/v1/videos", map[string]any{"model": "sora-2"}, nil, 400, "prompt", nil},
		{"seconds 0", "POST", "/v1/videos", videoWith(map[string]any{"seconds": "0"}), nil, 400, "seconds", nil},
		{"seconds words", "POST", "/v1/videos", videoWith(map[string]any{"seconds": "eight"}), nil, 400, "seconds", nil},
		{"seconds fraction", "POST", "/v1/videos", videoWith(map[string]any{"seconds": 2.5}), nil, 400, "seconds", nil},
		{"bad size", "POST", "/v1/videos", videoWith(map[string]any{"size": "large"}), nil, 400, "size", nil},
		{"not JSON", "POST", "/v1/videos", "{", nil, 400, nil, nil},
		{"multipart without boundary", "POST", "/v1/videos", "x", map[string]string{"Content-Type": "multipart/form-data"}, 400, nil, nil},
		{"unknown model", "POST", "/v1/videos", videoWith(map[string]any{"model": "sora-9"}), nil, 404, nil, "model_not_found"},
		{"bad job fail header", "POST", "/v1/videos", videoBody, map[string]string{"X-Mock-Job-Fail": "maybe"}, 400, nil, nil},
		{"bad job duration header", "POST", "/v1/videos", videoBody, map[string]string{"X-Mock-Job-Duration": "-1s"}, 400, nil, nil},
		{"list", "GET", "/v1/videos", nil, nil, 405, nil, nil},
		{"PUT a video", "PUT", "/v1/videos/" + id, nil, nil, 405, nil, nil},
		{"POST content", "POST", "/v1/videos/" + id + "/content", nil, nil, 405, nil, nil},
		{"unknown video", "GET", "/v1/videos/video_nope", nil, nil, 404, nil, "video_not_found"},
		{"unknown content", "GET", "/v1/videos/video_nope/content", nil, nil, 404, nil, "video_not_found"},
		{"delete unknown", "DELETE", "/v1/videos/video_nope", nil, nil, 404, nil, "video_not_found"},
		{"remix", "POST", "/v1/videos/" + id + "/remix", nil, nil, 404, nil, nil},
		{"no id", "GET", "/v1/videos/", nil, nil, 404, nil, nil},
	} {
		resp := f.request(context.Background(), tc.method, tc.path, tc.body, tc.header)
		e := expectError(t, resp, tc.status, "invalid_request_error")
		if e["param"] != tc.param || e["code"] != tc.code {
			t.Errorf("%s: param %v code %v, want %v %v", tc.name, e["param"], e["code"], tc.param, tc.code)
		}
		if tc.name == "PUT a video" && resp.Header.Get("Allow") != "GET, DELETE" {
			t.Errorf("Allow %q", resp.Header.Get("Allow"))
		}
	}
	if st := f.s.Stats(); st.JobsSubmitted != 1 {
		t.Errorf("bad requests started jobs: %+v", st)
	}
}

// X-Mock-Status forces an error on a poll, content or delete as on a
// submit; a forced or drawn error on a submit starts no job.
func TestVideoForcedStatus(t *testing.T) {
	t.Parallel()
	f, _ := newVideoFixture(t, Config{JobDuration: time.Minute})
	id := f.submit(videoBody, nil)["id"].(string)
	resp := f.get("/v1/videos/"+id, map[string]string{"X-Mock-Status": "503"})
	expectError(t, resp, http.StatusServiceUnavailable, "server_error")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	expectError(t, f.request(context.Background(), http.MethodDelete, "/v1/videos/"+id, nil, map[string]string{"X-Mock-Status": "500"}),
		http.StatusInternalServerError, "server_error")
	expectError(t, f.post("/v1/videos", videoBody, map[string]string{"X-Mock-Status": "500"}), http.StatusInternalServerError, "server_error")
	if st := f.s.Stats(); st.JobsSubmitted != 1 || st.JobsRunning != 1 || st.JobsCancelled != 0 || st.JobPolls != 0 {
		t.Errorf("forced errors changed the jobs: %+v", st)
	}
}

func TestVideoConfigAndStats(t *testing.T) {
	t.Parallel()
	f, clk := newVideoFixture(t, Config{})
	m := obj(t, expectStatus(t, f.post("/mock/config", `{"job_duration": "30s", "max_jobs": 2, "job_failure_rate": 0.25}`, nil), http.StatusOK))
	if m["job_duration"] != "30s" || m["max_jobs"] != 2.0 || m["job_failure_rate"] != 0.25 || m["job_retention"] != "1h0m0s" {
		t.Errorf("config %v", m)
	}
	for _, bad := range []string{`{"max_jobs": -1}`, `{"job_failure_rate": 2}`, `{"job_duration": "-1s"}`, `{"job_retention": 5}`} {
		expectError(t, f.post("/mock/config", bad, nil), 400, "invalid_request_error")
	}
	c := f.s.Config()
	if c.JobDuration != 30*time.Second || c.MaxJobs != 2 || c.JobRetention != DefaultJobRetention {
		t.Errorf("Config() %+v", c)
	}

	id := f.submit(videoBody, map[string]string{"X-Mock-Job-Fail": "0"})["id"].(string)
	clk.Advance(30 * time.Second)
	f.video(id)
	m = obj(t, expectStatus(t, f.get("/mock/stats", nil), http.StatusOK))
	hasKeys(t, "stats", m, "max_jobs", "jobs_submitted", "jobs_deduplicated", "jobs_rejected", "jobs_running",
		"peak_jobs_running", "jobs_completed", "jobs_failed", "jobs_cancelled", "job_polls", "job_submits")
	if m["jobs_submitted"] != 1.0 || m["jobs_completed"] != 1.0 || m["job_polls"] != 1.0 || m["max_jobs"] != 2.0 ||
		m["job_submits"].(map[string]any)[id] != 1.0 {
		t.Errorf("stats %v", m)
	}
	if resp := f.post("/mock/stats/reset", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("reset answered %d", resp.StatusCode)
	}
	st := f.s.Stats()
	if st.JobsSubmitted != 0 || st.JobsCompleted != 0 || st.JobPolls != 0 || st.PeakJobsRunning != 0 || st.JobSubmits[id] != 1 {
		t.Errorf("after reset: %+v", st)
	}
}

// A submit whose client leaves during its latency starts no job.
func TestVideoSubmitAbandoned(t *testing.T) {
	t.Parallel()
	f, _ := newVideoFixture(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.ts.URL+"/v1/videos", strings.NewReader(`{"prompt":"p"}`))
		req.Header.Set("X-Mock-Latency", "1h")
		if resp, err := f.ts.Client().Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			t.Errorf("abandoned submit answered %d", resp.StatusCode)
		}
	}()
	f.await(f.waiting, "submit in its latency")
	cancel()
	<-done
	if st := f.awaitDone(); st != statusClientClosed {
		t.Errorf("counted %d", st)
	}
	if st := f.s.Stats(); st.JobsSubmitted != 0 || len(f.s.Jobs()) != 0 {
		t.Errorf("an abandoned submit started a job: %+v", st)
	}
}

// Job ids are unique across servers with the same seed (two platforms on
// two mocks), while the seeded decisions repeat.
func TestVideoIDsUniqueAcrossServers(t *testing.T) {
	t.Parallel()
	first := func() string {
		w := httptest.NewRecorder()
		New(Config{Seed: 1}).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/videos", strings.NewReader(`{"prompt":"p"}`)))
		id, _ := obj(t, w.Body.Bytes())["id"].(string)
		return id
	}
	if a, b := first(), first(); a == b || !strings.HasPrefix(a, "video_") || len(a) != len("video_")+32 {
		t.Errorf("ids %q and %q", a, b)
	}
}
