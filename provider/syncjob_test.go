package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// answering is an Adapter that answers every call with one response.
type answering struct {
	status int
	ctype  string
	body   string
	got    Call
}

func (a *answering) Do(_ context.Context, c Call) (*http.Response, error) {
	a.got = c
	if a.status >= 300 {
		return nil, &Error{Status: a.status, Body: []byte(a.body)}
	}
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {a.ctype}},
		Body: io.NopCloser(strings.NewReader(a.body))}, nil
}

// TestSyncJob: a synchronous call run as a job ends as it is submitted:
// a JSON answer is its result as it came, another (audio) is kept as
// base64 with its type, one past the bound fails it, and an upstream
// error is the submit's.
func TestSyncJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	img := &answering{status: 200, ctype: "application/json", body: `{"data":[{"b64_json":"AAAA"}]}`}
	job, err := SyncJob{Adapter: img, Path: "/images/generations"}.Submit(ctx, AsyncCall{Body: []byte(`{"model":"m","prompt":"p"}`)})
	if err != nil || job.Status != JobSucceeded || !job.Settled || string(job.Raw) != img.body {
		t.Fatalf("image: %+v, %v", job, err)
	}
	if img.got.Path != "/images/generations" || string(img.got.Body) != `{"model":"m","prompt":"p"}` {
		t.Fatalf("the call: %+v", img.got)
	}

	audio := &answering{status: 200, ctype: "audio/mpeg", body: "\xff\xfb\x18\xc4 not json"}
	job, err = SyncJob{Adapter: audio, Path: "/audio/speech"}.Submit(ctx, AsyncCall{})
	var res binaryResult
	if err != nil || job.Status != JobSucceeded || json.Unmarshal(job.Raw, &res) != nil || res.ContentType != "audio/mpeg" {
		t.Fatalf("speech: %+v, %v", job, err)
	}
	if b, _ := base64.StdEncoding.DecodeString(res.Data); string(b) != audio.body {
		t.Fatalf("speech's audio %q, want %q", b, audio.body)
	}

	job, err = SyncJob{Adapter: img, Path: "/images/generations", MaxResult: 8}.Submit(ctx, AsyncCall{})
	if err != nil || job.Status != JobFailed || job.Error == nil || job.Error.Code != "result_too_large" {
		t.Fatalf("too large: %+v, %v", job, err)
	}

	refused := &answering{status: 429, body: "slow down"}
	_, err = SyncJob{Adapter: refused, Path: "/images/generations"}.Submit(ctx, AsyncCall{})
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 429 {
		t.Fatalf("refused: %v", err)
	}
	if _, err := (SyncJob{}).Poll(ctx, "sync"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("poll: %v", err)
	}
}
