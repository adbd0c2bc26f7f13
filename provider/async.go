package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// Asynchronous upstreams (video generation and the like) take a job, answer
// with its id at once, and run it for minutes: the caller submits, records
// the id, then polls until the job is done and fetches its content.

// AsyncAdapter speaks one platform's asynchronous job API. Every method
// makes one upstream request: retrying, backoff and the decision to move to
// another candidate are the caller's. Failures are *Error (so Retryable
// tells a saturated or failing platform from a request the platform
// refuses), or the context's error when ctx ended first. A job that runs
// and fails is not an error: it is a Job with Status JobFailed.
type AsyncAdapter interface {
	// Submit starts a job. With an IdempotencyKey, submitting again with
	// the same key answers with the same job instead of starting another.
	Submit(ctx context.Context, c AsyncCall) (Job, error)
	// Poll reports a job's state.
	Poll(ctx context.Context, upstreamID string) (Job, error)
	// Content returns the finished job's output for a 2xx answer; the
	// caller closes the body. variant picks one of the job's assets
	// (for a video: "video", "thumbnail" or "spritesheet"); "" is the
	// upstream's default. The caller validates it.
	Content(ctx context.Context, upstreamID, variant string) (*http.Response, error)
	// Cancel stops a running job, or deletes a finished one, upstream.
	Cancel(ctx context.Context, upstreamID string) error
}

// AsyncCall is one job to submit.
type AsyncCall struct {
	// Body is the job's request, model already rewritten.
	Body []byte
	// ContentType is Body's type, boundary included for a multipart form.
	// Empty: application/json.
	ContentType string
	// IdempotencyKey is sent as the Idempotency-Key header (none when
	// empty). Give the same key every time the same task is submitted —
	// its task id — so a worker that crashed between submitting and
	// recording the upstream id can submit again and get the same job.
	IdempotencyKey string
	// Header carries client headers worth forwarding (User-Agent).
	Header http.Header
}

// JobStatus is where an upstream job is.
type JobStatus string

const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
)

// Done reports whether the job has ended: succeeded or failed.
func (s JobStatus) Done() bool { return s == JobSucceeded || s == JobFailed }

// Job is an upstream job as the upstream last reported it.
type Job struct {
	// ID is the upstream's id for the job.
	ID     string
	Status JobStatus
	// Progress is the upstream's estimate, 0 to 100; 100 once succeeded.
	Progress int
	// Error is why the job failed, when Status is JobFailed.
	Error *JobError
	// Raw is the upstream's object for the job, as it came.
	Raw json.RawMessage
	// Settled: the job ended in its submit's answer and nothing of it is
	// kept upstream (SyncJob), so there is nothing to poll, fetch or
	// cancel. A job of an upstream's job API is never settled, even one
	// done at once: its content is fetched from the upstream later.
	Settled bool
}

// JobError is the upstream's account of a failed job.
type JobError struct {
	Code    string
	Message string
}

func (e *JobError) Error() string { return e.Code + ": " + e.Message }

var (
	// ErrJobNotFound is wrapped by the *Error of a 404 to a poll, content
	// fetch or cancel: the upstream does not have the job (never had it,
	// deleted it, or let it expire).
	ErrJobNotFound = errors.New("upstream job not found")
	// ErrUnexpectedResponse is wrapped by the *Error of a 2xx answer that
	// is not what the API promises (no id, an unknown status, not JSON).
	// Its Status is the upstream's 2xx.
	ErrUnexpectedResponse = errors.New("unexpected upstream response")
)
