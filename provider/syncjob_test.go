package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
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

// TestSyncJobForm: a transcription task's JSON input goes out as the form
// its endpoint takes — the file decoded as the file part with its name
// and type, strings as they are, numbers as written, arrays as repeated
// "name[]" fields — and an input whose file is not base64 is refused
// before any call.
func TestSyncJobForm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stt := &formAnswering{}
	in := `{"model":"whisper-1","language":"en","temperature":0.2,"timestamp_granularities":["word","segment"],` +
		`"file":{"data":"` + base64.StdEncoding.EncodeToString([]byte("RIFF audio")) + `","filename":"a.wav","content_type":"audio/wav"}}`
	job, err := SyncJob{Adapter: stt, Path: "/audio/transcriptions", Form: true}.Submit(ctx, AsyncCall{Body: []byte(in)})
	if err != nil || job.Status != JobSucceeded || string(job.Raw) != `{"text":"ok"}` {
		t.Fatalf("transcription: %+v, %v", job, err)
	}
	f := stt.form
	if stt.path != "/audio/transcriptions" || stt.model != "whisper-1" || f.Value["model"][0] != "whisper-1" || f.Value["language"][0] != "en" ||
		f.Value["temperature"][0] != "0.2" || !slices.Equal(f.Value["timestamp_granularities[]"], []string{"word", "segment"}) {
		t.Fatalf("the form sent: %s %q %v", stt.path, stt.model, f.Value)
	}
	if fh := f.File["file"]; len(fh) != 1 || fh[0].Filename != "a.wav" || fh[0].Header.Get("Content-Type") != "audio/wav" || stt.file != "RIFF audio" {
		t.Fatalf("the file sent: %+v %q", f.File, stt.file)
	}
	stt.path = ""
	_, err = SyncJob{Adapter: stt, Path: "/audio/transcriptions", Form: true}.Submit(ctx, AsyncCall{Body: []byte(`{"model":"m","file":{"data":"%%%"}}`)})
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.Retryable() || stt.path != "" {
		t.Fatalf("bad base64: %v (sent %q)", err, stt.path)
	}
}

// formAnswering is an Adapter that reads each call's upload whole and
// answers {"text":"ok"}.
type formAnswering struct {
	path, model, file string
	form              *multipart.Form
}

func (a *formAnswering) Do(_ context.Context, c Call) (*http.Response, error) {
	a.path, a.model = c.Path, c.Upload.Model
	_, params, _ := mime.ParseMediaType(c.Upload.ContentType)
	form, err := multipart.NewReader(c.Upload.Body, params["boundary"]).ReadForm(1 << 20)
	if err != nil {
		return nil, err
	}
	a.form = form
	if fh := form.File["file"]; len(fh) == 1 {
		r, _ := fh[0].Open()
		b, _ := io.ReadAll(r)
		a.file = string(b)
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"text":"ok"}`))}, nil
}
