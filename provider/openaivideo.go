package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/internal/bodyread"
	"github.com/weir-gateway/weir/openaiwire"
)

// OpenAIVideo is the adapter for OpenAI's video API: POST /videos, GET
// /videos/{id}, GET /videos/{id}/content and DELETE /videos/{id}.
type OpenAIVideo struct {
	BaseURL string // e.g. https://api.openai.com/v1
	APIKey  string
	Client  *http.Client // nil: http.DefaultClient
	// Timeout bounds each request: the whole exchange for Submit, Poll and
	// Cancel, whose answers are small; the wait for response headers for
	// Content, whose body may take longer. 0: none beyond ctx.
	Timeout time.Duration
	// IdleTimeout bounds each wait for more of an answer's body once its
	// headers are in (0: none).
	IdleTimeout time.Duration
	// CallTimeout bounds a Content download whole, body included, and
	// every other request too where Timeout is longer or unset (0: none).
	CallTimeout time.Duration
	// AbortGrace is as OpenAI's.
	AbortGrace time.Duration
	// Clock runs the bounds; nil: clock.Real.
	Clock clock.Clock
}

var _ AsyncAdapter = (*OpenAIVideo)(nil)

// maxJobBody bounds a job object read from the upstream.
const maxJobBody = 1 << 20

// Submit posts c to /videos.
func (v *OpenAIVideo) Submit(ctx context.Context, c AsyncCall) (Job, error) {
	h := http.Header{}
	ct := c.ContentType
	if ct == "" {
		ct = "application/json"
	}
	h.Set("Content-Type", ct)
	if c.IdempotencyKey != "" {
		h.Set("Idempotency-Key", c.IdempotencyKey)
	}
	if ua := c.Header.Get("User-Agent"); ua != "" {
		h.Set("User-Agent", ua)
	}
	t, err := v.target("/videos")
	if err != nil {
		return Job{}, err
	}
	status, body, err := v.exchange(ctx, http.MethodPost, &t, c.Body, h)
	if err != nil {
		return Job{}, err
	}
	return decodeVideo(status, body)
}

// Poll gets /videos/{id}.
func (v *OpenAIVideo) Poll(ctx context.Context, upstreamID string) (Job, error) {
	t, err := v.jobTarget(upstreamID, "", "")
	if err != nil {
		return Job{}, err
	}
	status, body, err := v.exchange(ctx, http.MethodGet, &t, nil, nil)
	if err != nil {
		return Job{}, notFound(err)
	}
	return decodeVideo(status, body)
}

// Cancel deletes /videos/{id}.
func (v *OpenAIVideo) Cancel(ctx context.Context, upstreamID string) error {
	t, err := v.jobTarget(upstreamID, "", "")
	if err != nil {
		return err
	}
	_, _, err = v.exchange(ctx, http.MethodDelete, &t, nil, nil)
	return notFound(err)
}

// Content gets /videos/{id}/content: the MP4, or with a variant
// (?variant=thumbnail, spritesheet, video) that asset.
func (v *OpenAIVideo) Content(ctx context.Context, upstreamID, variant string) (*http.Response, error) {
	var query string
	if variant != "" {
		query = url.Values{"variant": {variant}}.Encode()
	}
	t, err := v.jobTarget(upstreamID, "/content", query)
	if err != nil {
		return nil, err
	}
	req, err := v.newRequest(ctx, http.MethodGet, &t, nil, http.Header{"Accept": {"application/binary"}})
	if err != nil {
		return nil, err
	}
	resp, err := send(ctx, httpClient(v.Client), req, v.opts(Bounds{Header: v.Timeout, Idle: v.IdleTimeout, Total: v.CallTimeout}))
	if err != nil {
		return nil, err
	}
	if _, err := checkStatus(resp, v.APIKey); err != nil {
		return nil, notFound(err)
	}
	return resp, nil
}

var errNoJobID = errors.New("openai video: empty upstream job id")

// target is the target of path under the video API.
func (v *OpenAIVideo) target(path string) (target, error) {
	t, err := targetOf(v.BaseURL, path)
	if err != nil {
		return target{}, &Error{Err: err}
	}
	return *t, nil
}

// jobTarget is the target of /videos/{id}, with suffix and query
// (itemTargetOf).
func (v *OpenAIVideo) jobTarget(id, suffix, query string) (target, error) {
	if id == "" {
		return target{}, errNoJobID
	}
	t, err := itemTargetOf(v.BaseURL, "/videos", id, suffix, query)
	if err != nil {
		return target{}, &Error{Err: err}
	}
	return t, nil
}

// newRequest is a request to t, asking for JSON unless h says otherwise
// (with a value shared by every call, as setPassedOn's are).
func (v *OpenAIVideo) newRequest(ctx context.Context, method string, t *target, body []byte, h http.Header) (*http.Request, error) {
	req, err := requestTo(ctx, method, t, v.APIKey, body, h)
	if err != nil {
		return nil, err
	}
	if req.Header.Get("Accept") == "" {
		req.Header["Accept"] = jsonAccept
	}
	return req, nil
}

var jsonAccept = []string{"application/json"}

// exchange makes one request whose answer is a small JSON object and
// returns the status and body of a 2xx answer, or an *Error.
func (v *OpenAIVideo) exchange(ctx context.Context, method string, t *target, body []byte, h http.Header) (int, []byte, error) {
	req, err := v.newRequest(ctx, method, t, body, h)
	if err != nil {
		return 0, nil, err
	}
	total := v.Timeout
	if v.CallTimeout > 0 && (total <= 0 || v.CallTimeout < total) {
		total = v.CallTimeout
	}
	resp, err := send(ctx, httpClient(v.Client), req, v.opts(Bounds{Idle: v.IdleTimeout, Total: total}))
	if err != nil {
		return 0, nil, err
	}
	if _, err := checkStatus(resp, v.APIKey); err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := bodyread.Read(resp.Body, resp.ContentLength, maxJobBody+1)
	if err != nil {
		return 0, nil, classify(ctx, err)
	}
	if len(b) > maxJobBody {
		return 0, nil, &Error{Status: resp.StatusCode, Body: b[:512],
			Err: fmt.Errorf("%w: a job object over %d bytes", ErrUnexpectedResponse, maxJobBody)}
	}
	return resp.StatusCode, b, nil
}

func (v *OpenAIVideo) opts(b Bounds) callOpts {
	return callOpts{clock: v.Clock, bounds: b, grace: v.AbortGrace}
}

// notFound marks a 404 to a request about one job as ErrJobNotFound.
func notFound(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Err == nil {
		e.Err = ErrJobNotFound
	}
	return err
}

var videoStatuses = map[string]JobStatus{
	openaiwire.VideoQueued:     JobQueued,
	openaiwire.VideoInProgress: JobRunning,
	openaiwire.VideoCompleted:  JobSucceeded,
	openaiwire.VideoFailed:     JobFailed,
}

// jobFields are the video object's fields a Job is made of.
var jobFields = map[string]bool{"id": true, "status": true, "progress": true, "error": true}

func decodeVideo(status int, body []byte) (Job, error) {
	unexpected := func(format string, args ...any) (Job, error) {
		return Job{}, &Error{Status: status, Body: body,
			Err: fmt.Errorf("%w: %s", ErrUnexpectedResponse, fmt.Sprintf(format, args...))}
	}
	var o openaiwire.Video
	if err := openaiwire.UnmarshalVideo(body, &o); err != nil {
		// A field a Job is not made of may come in another type from an
		// OpenAI-compatible upstream (seconds as a number): no reason to
		// fail the job. UnmarshalVideo, json.Unmarshal for such a body,
		// fills every other field and names the first such one.
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Field == "" {
			return unexpected("not a video object: %v", err)
		}
		if field, _, _ := strings.Cut(te.Field, "."); jobFields[field] {
			return unexpected("not a video object: %v", err)
		}
	}
	if o.ID == "" {
		return unexpected("a video object without an id")
	}
	js, ok := videoStatuses[o.Status]
	if !ok {
		return unexpected("video status %q", o.Status)
	}
	j := Job{ID: o.ID, Status: js, Raw: json.RawMessage(bytes.TrimSpace(body))}
	j.Progress = max(0, min(int(o.Progress), 100))
	switch js {
	case JobSucceeded:
		j.Progress = 100
	case JobFailed:
		j.Error = &JobError{Code: "upstream_job_failed", Message: "the upstream reported the job failed and gave no reason"}
		if o.Error != nil {
			if o.Error.Code != "" {
				j.Error.Code = o.Error.Code
			}
			if o.Error.Message != "" {
				j.Error.Message = o.Error.Message
			}
		}
	}
	return j, nil
}
