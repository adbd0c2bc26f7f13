package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// SyncJob runs a call that its upstream answers at once (an image
// generation, speech, a chat completion, embeddings) as an asynchronous
// job, for a durable task of such a model: Submit makes the call and
// returns the job already ended, its answer as the job's Raw. Nothing of
// it is left upstream to poll, fetch or cancel. The call has no
// idempotency upstream: a task whose worker died during it makes it
// again (at least once).
type SyncJob struct {
	Adapter Adapter
	// Path is the call's endpoint under the platform's base URL
	// ("/images/generations").
	Path string
	// Form sends the task's input as the multipart form an upload
	// endpoint takes ("/audio/transcriptions"): its file field
	// (TaskFile) the file, its other fields text fields.
	Form bool
	// MaxResult bounds the answer kept as the job's result, in bytes; a
	// longer one ends the job failed (result_too_large). 0:
	// DefaultMaxResult.
	MaxResult int64
}

// DefaultMaxResult is SyncJob's bound on an answer kept: a few
// base64-encoded images, or minutes of speech.
const DefaultMaxResult = 16 << 20

var _ AsyncAdapter = SyncJob{}

// Submit implements AsyncAdapter: it makes the call. A 2xx answer of
// JSON is the job's result as it came; any other (speech's audio) is
// {"content_type": ..., "data": base64 of the answer}.
func (j SyncJob) Submit(ctx context.Context, c AsyncCall) (Job, error) {
	call := Call{Path: j.Path, Body: c.Body, Header: c.Header}
	if j.Form {
		up, err := taskForm(c.Body)
		if err != nil {
			return Job{}, err
		}
		call.Body, call.Upload = nil, up
	}
	resp, err := j.Adapter.Do(ctx, call)
	if err != nil {
		return Job{}, err
	}
	defer resp.Body.Close()
	limit := j.MaxResult
	if limit <= 0 {
		limit = DefaultMaxResult
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return Job{}, classify(ctx, err)
	}
	if int64(len(body)) > limit {
		return Job{ID: syncJobID, Status: JobFailed, Settled: true, Error: &JobError{Code: "result_too_large",
			Message: fmt.Sprintf("the upstream's answer is longer than %d bytes, the most a task keeps", limit)}}, nil
	}
	ct := resp.Header.Get("Content-Type")
	raw := json.RawMessage(body)
	if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" || !json.Valid(body) {
		raw, err = json.Marshal(binaryResult{ContentType: ct, Data: base64.StdEncoding.EncodeToString(body)})
		if err != nil {
			return Job{}, err
		}
	}
	return Job{ID: syncJobID, Status: JobSucceeded, Progress: 100, Raw: raw, Settled: true}, nil
}

// binaryResult is a task's result when its answer is not JSON.
type binaryResult struct {
	ContentType string `json:"content_type"`
	// Data is the answer, base64-encoded.
	Data string `json:"data"`
}

// syncJobID is the upstream id of every SyncJob: there is none.
const syncJobID = "sync"

// Poll implements AsyncAdapter: a SyncJob ended as it was submitted, and
// nothing of it is upstream.
func (SyncJob) Poll(context.Context, string) (Job, error) { return Job{}, ErrJobNotFound }

// Content implements AsyncAdapter: the answer is the task's result.
func (SyncJob) Content(context.Context, string, string) (*http.Response, error) {
	return nil, ErrJobNotFound
}

// Cancel implements AsyncAdapter: there is nothing upstream to stop.
func (SyncJob) Cancel(context.Context, string) error { return nil }
