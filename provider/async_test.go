package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/provider/mock"
)

// upstream is the mock provider on a real listener, its jobs on a fake
// clock, and an adapter pointed at it.
type upstream struct {
	srv   *mock.Server
	clk   *clock.Fake
	ts    *httptest.Server
	video *provider.OpenAIVideo
}

func newUpstream(t *testing.T, cfg mock.Config) *upstream {
	t.Helper()
	u := &upstream{clk: clock.NewFake(time.Unix(1_760_000_000, 0))}
	u.srv = mock.NewWithClock(cfg, u.clk.Now)
	u.ts = httptest.NewServer(u.srv)
	t.Cleanup(u.ts.Close)
	u.video = &provider.OpenAIVideo{BaseURL: u.ts.URL + "/v1/", APIKey: "sk-test", Client: u.ts.Client()}
	return u
}

func videoCall(prompt, key string) provider.AsyncCall {
	body, _ := json.Marshal(map[string]any{"model": "sora-2", "prompt": prompt, "seconds": "8", "size": "1280x720"})
	return provider.AsyncCall{Body: body, IdempotencyKey: key}
}

// upstreamError asserts err is an *Error and returns it.
func upstreamError(t *testing.T, err error, status int) *provider.Error {
	t.Helper()
	var e *provider.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *provider.Error", err, err)
	}
	if e.Status != status {
		t.Fatalf("status %d, want %d: %v", e.Status, status, e)
	}
	return e
}

func TestOpenAIVideoLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUpstream(t, mock.Config{JobDuration: time.Minute})
	job, err := u.video.Submit(ctx, videoCall("a weir at dawn", "task-1"))
	if err != nil {
		t.Fatal(err)
	}
	if job.ID == "" || job.Status != provider.JobQueued || job.Progress != 0 || job.Error != nil {
		t.Errorf("submitted %+v", job)
	}
	var raw map[string]any
	if err := json.Unmarshal(job.Raw, &raw); err != nil || raw["object"] != "video" || raw["id"] != job.ID {
		t.Errorf("raw %s (%v)", job.Raw, err)
	}

	u.clk.Advance(30 * time.Second)
	if job, err = u.video.Poll(ctx, job.ID); err != nil || job.Status != provider.JobRunning || job.Progress != 50 || job.Status.Done() {
		t.Errorf("halfway: %+v, %v", job, err)
	}
	_, err = u.video.Content(ctx, job.ID, "")
	if e := upstreamError(t, err, http.StatusConflict); e.Retryable() {
		t.Errorf("content before the end is retryable: %v", e)
	}

	u.clk.Advance(30 * time.Second)
	if job, err = u.video.Poll(ctx, job.ID); err != nil || job.Status != provider.JobSucceeded || job.Progress != 100 || !job.Status.Done() {
		t.Errorf("at the end: %+v, %v", job, err)
	}
	resp, err := u.video.Content(ctx, job.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	mp4, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Header.Get("Content-Type") != "video/mp4" || len(mp4) < 8 || string(mp4[4:8]) != "ftyp" {
		t.Errorf("content %q, %d bytes, %v", resp.Header.Get("Content-Type"), len(mp4), err)
	}
	// The variant goes upstream as ?variant=, and each asset comes back
	// with its own type.
	for variant, ctype := range map[string]string{"video": "video/mp4", "thumbnail": "image/webp", "spritesheet": "image/jpeg"} {
		resp, err := u.video.Content(ctx, job.ID, variant)
		if err != nil {
			t.Fatalf("content variant %s: %v", variant, err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Type"); got != ctype {
			t.Errorf("content variant %s: %s, want %s", variant, got, ctype)
		}
	}

	if err := u.video.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	_, err = u.video.Poll(ctx, job.ID)
	if e := upstreamError(t, err, http.StatusNotFound); !errors.Is(err, provider.ErrJobNotFound) || e.Retryable() {
		t.Errorf("poll of a deleted job: %v", err)
	}
	if err := u.video.Cancel(ctx, job.ID); !errors.Is(err, provider.ErrJobNotFound) {
		t.Errorf("second cancel: %v", err)
	}
	if _, err := u.video.Content(ctx, job.ID, ""); !errors.Is(err, provider.ErrJobNotFound) {
		t.Errorf("content of a deleted job: %v", err)
	}
	if st := u.srv.Stats(); st.JobsSubmitted != 1 || st.JobsCompleted != 1 || st.JobPolls != 2 {
		t.Errorf("stats %+v", st)
	}
}

// A worker that crashed after submitting resubmits with the same key and
// gets the same job: the upstream starts nothing twice. Keys belong to an
// account (the API key), as they do upstream.
func TestOpenAIVideoResubmitIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUpstream(t, mock.Config{JobDuration: time.Minute})
	first, err := u.video.Submit(ctx, videoCall("once", "task-7"))
	if err != nil {
		t.Fatal(err)
	}
	u.clk.Advance(15 * time.Second)
	again, err := u.video.Submit(ctx, videoCall("once", "task-7"))
	if err != nil || again.ID != first.ID || again.Status != provider.JobRunning || again.Progress != 25 {
		t.Errorf("resubmit: %+v, %v; first %s", again, err, first.ID)
	}
	st := u.srv.Stats()
	if st.JobsSubmitted != 1 || st.JobsDeduplicated != 1 || st.JobSubmits[first.ID] != 2 {
		t.Errorf("stats %+v", st)
	}

	other := *u.video
	other.APIKey = "sk-other-account"
	if j, err := other.Submit(ctx, videoCall("once", "task-7")); err != nil || j.ID == first.ID {
		t.Errorf("another account's submit: %+v, %v", j, err)
	}
	a, _ := u.video.Submit(ctx, videoCall("no key", ""))
	b, _ := u.video.Submit(ctx, videoCall("no key", ""))
	if a.ID == "" || a.ID == b.ID {
		t.Errorf("keyless submits %q %q", a.ID, b.ID)
	}
	if st := u.srv.Stats(); st.JobsSubmitted != 4 {
		t.Errorf("jobs submitted %d", st.JobsSubmitted)
	}
}

// A saturated platform answers 429 with Retry-After: a retryable *Error,
// unlike a job that ran and failed, which is a Job with its error.
func TestOpenAIVideoSaturatedVersusFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUpstream(t, mock.Config{MaxJobs: 1, JobDuration: time.Minute, JobFailureRate: 1, RetryAfter: 1500 * time.Millisecond})
	job, err := u.video.Submit(ctx, videoCall("first", "a"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.video.Submit(ctx, videoCall("second", "b"))
	e := upstreamError(t, err, http.StatusTooManyRequests)
	if !e.Retryable() || e.RetryAfter != 1500*time.Millisecond || !bytes.Contains(e.Body, []byte("rate_limit_exceeded")) {
		t.Errorf("saturated: retryable %v, retry after %s, body %s", e.Retryable(), e.RetryAfter, e.Body)
	}
	// The running job's own resubmit is not turned away.
	if again, err := u.video.Submit(ctx, videoCall("first", "a")); err != nil || again.ID != job.ID {
		t.Errorf("resubmit while saturated: %+v, %v", again, err)
	}

	u.clk.Advance(time.Minute)
	job, err = u.video.Poll(ctx, job.ID)
	if err != nil || job.Status != provider.JobFailed || job.Error == nil || job.Error.Code != "video_generation_failed" || job.Error.Message == "" {
		t.Errorf("failed job: %+v, %v", job, err)
	}
	if _, err := u.video.Submit(ctx, videoCall("second", "b")); err != nil {
		t.Errorf("after the slot freed: %v", err)
	}
	if st := u.srv.Stats(); st.JobsRejected != 1 || st.JobsFailed != 1 || st.PeakJobsRunning != 1 {
		t.Errorf("stats %+v", st)
	}
}

// Cancel stops a running job upstream and frees its slot.
func TestOpenAIVideoCancelRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUpstream(t, mock.Config{MaxJobs: 1, JobDuration: time.Hour})
	job, err := u.video.Submit(ctx, videoCall("long", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.video.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := u.video.Submit(ctx, videoCall("next", "y")); err != nil {
		t.Errorf("slot not freed: %v", err)
	}
	if st := u.srv.Stats(); st.JobsCancelled != 1 || st.JobsRunning != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestOpenAIVideoMultipart(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, mock.Config{JobDuration: time.Minute})
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("model", "sora-2-pro")
	mw.WriteField("prompt", "from a reference")
	mw.WriteField("size", "1792x1024")
	fw, _ := mw.CreateFormFile("input_reference", "ref.png")
	fw.Write([]byte("\x89PNG"))
	mw.Close()
	job, err := u.video.Submit(context.Background(), provider.AsyncCall{Body: buf.Bytes(), ContentType: mw.FormDataContentType(), IdempotencyKey: "m"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := u.srv.Jobs()
	if len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].Model != "sora-2-pro" || jobs[0].Size != "1792x1024" || jobs[0].IdempotencyKey != "m" {
		t.Errorf("jobs %+v", jobs)
	}
}

// forceStatus makes every request ask the mock for an error status.
type forceStatus struct {
	status string
	next   http.RoundTripper
}

func (f forceStatus) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Mock-Status", f.status)
	return f.next.RoundTrip(r)
}

func TestOpenAIVideoErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := newUpstream(t, mock.Config{JobDuration: time.Minute})

	// A request the platform refuses goes back as it is, not retryable.
	_, err := u.video.Submit(ctx, provider.AsyncCall{Body: []byte(`{"model":"sora-2"}`)})
	if e := upstreamError(t, err, http.StatusBadRequest); e.Retryable() || !bytes.Contains(e.Body, []byte(`"prompt"`)) {
		t.Errorf("bad request: %v", e)
	}

	job, err := u.video.Submit(ctx, videoCall("p", "k"))
	if err != nil {
		t.Fatal(err)
	}
	failing := *u.video
	failing.Client = &http.Client{Transport: forceStatus{"503", u.ts.Client().Transport}}
	_, err = failing.Poll(ctx, job.ID)
	if e := upstreamError(t, err, http.StatusServiceUnavailable); !e.Retryable() || e.RetryAfter != time.Second || errors.Is(err, provider.ErrJobNotFound) {
		t.Errorf("503 poll: retryable %v, retry after %s", e.Retryable(), e.RetryAfter)
	}
	if err := failing.Cancel(ctx, job.ID); !upstreamError(t, err, http.StatusServiceUnavailable).Retryable() {
		t.Errorf("503 cancel: %v", err)
	}

	if _, err := u.video.Poll(ctx, "video_unknown"); !errors.Is(err, provider.ErrJobNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, err := u.video.Poll(ctx, ""); err == nil {
		t.Error("polled an empty id")
	}

	// The caller's context ending is its own error, not the upstream's.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := u.video.Poll(cctx, job.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	var pe *provider.Error
	if _, err := u.video.Content(cctx, job.ID, ""); errors.As(err, &pe) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context, content: %v", err)
	}

	// An upstream that cannot be reached is retryable.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	unreachable := provider.OpenAIVideo{BaseURL: gone.URL + "/v1"}
	_, err = unreachable.Poll(ctx, job.ID)
	if e := upstreamError(t, err, 0); !e.Retryable() || e.Timeout {
		t.Errorf("unreachable: %v", e)
	}
}

// Timeout bounds the exchange; a submit that times out during the
// upstream's latency starts no job there.
func TestOpenAIVideoTimeout(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, mock.Config{Latency: time.Hour})
	slow := *u.video
	slow.Timeout = 20 * time.Millisecond
	_, err := slow.Submit(context.Background(), videoCall("p", "k"))
	if e := upstreamError(t, err, 0); !e.Timeout || !e.Retryable() {
		t.Errorf("timeout: %v", e)
	}
	if st := u.srv.Stats(); st.JobsSubmitted != 0 {
		t.Errorf("a timed-out submit started a job: %+v", st)
	}
}

// A 2xx that is not a video object is an *Error wrapping
// ErrUnexpectedResponse. (The mock never answers so; a stub does.)
func TestOpenAIVideoUnexpectedResponse(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`not json`, `["video_1"]`, `{"status":"queued"}`, `{"id":"video_1","status":"exploded"}`,
		`{"id":"video_1","status":"in_progress","progress":"half"}`, `{"id":"video_1","status":"failed","error":{"code":7}}`} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		v := provider.OpenAIVideo{BaseURL: ts.URL, Client: ts.Client()}
		_, err := v.Poll(context.Background(), "video_1")
		ts.Close()
		if e := upstreamError(t, err, http.StatusOK); !errors.Is(err, provider.ErrUnexpectedResponse) || !strings.Contains(string(e.Body), body) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// A video object whose fields a Job is not made of come in other types
// than OpenAI's (seconds as a number, a fractional timestamp) is still a
// video object; a fractional progress is read.
func TestOpenAIVideoTolerantObject(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"video_1","status":"in_progress","progress":42.5,"seconds":8,"created_at":1764547200.5}`)
	}))
	defer ts.Close()
	v := provider.OpenAIVideo{BaseURL: ts.URL, Client: ts.Client()}
	j, err := v.Poll(context.Background(), "video_1")
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "video_1" || j.Status != provider.JobRunning || j.Progress != 42 {
		t.Errorf("job = %+v; want video_1 running at 42%%", j)
	}
}

// Each of the adapter's calls goes to its job's URL with the API key,
// asking for JSON but for a video's content; a submit says its body's
// type and its idempotency key.
func TestOpenAIVideoRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, strings.Join([]string{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), strings.Join(r.Header.Values("Accept"), ","),
			r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key")}, " | "))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"video_1","status":"queued"}`)
	}))
	defer ts.Close()
	v := provider.OpenAIVideo{BaseURL: ts.URL + "/v1/", APIKey: "sk-test", Client: ts.Client()}
	ctx := context.Background()
	if _, err := v.Submit(ctx, provider.AsyncCall{Body: []byte(`{}`), IdempotencyKey: "k1"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"video_1", "a/b c"} {
		if _, err := v.Poll(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Cancel(ctx, "video_1"); err != nil {
		t.Fatal(err)
	}
	resp, err := v.Content(ctx, "video_1", "thumbnail")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"POST | /v1/videos | Bearer sk-test | application/json | application/json | k1",
		"GET | /v1/videos/video_1 | Bearer sk-test | application/json |  | ",
		"GET | /v1/videos/a%2Fb%20c | Bearer sk-test | application/json |  | ",
		"DELETE | /v1/videos/video_1 | Bearer sk-test | application/json |  | ",
		"GET | /v1/videos/video_1/content?variant=thumbnail | Bearer sk-test | application/binary |  | ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
