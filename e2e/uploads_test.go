package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/weir-gateway/weir/provider/mock"
)

// uploadKinds is a catalog of an image model and a transcription model,
// each with two candidates: first on platform a, then on b.
func uploadKinds(a, b string) string {
	return fmt.Sprintf(`platforms:
  - name: a
    base_url: %s
  - name: b
    base_url: %s
platform_models:
  - name: a/img
    platform: a
    upstream: gpt-image-1
  - name: b/img
    platform: b
    upstream: gpt-image-1
  - name: a/stt
    platform: a
    upstream: whisper-1
    capabilities:
      response_formats: [json, text, verbose_json]
  - name: b/stt
    platform: b
    upstream: whisper-1
    capabilities:
      response_formats: [json, text, srt]
models:
  - name: img
    kind: images
    candidates:
      - platform_model: a/img
        priority: 2
      - platform_model: b/img
        priority: 1
  - name: stt
    kind: audio_transcription
    candidates:
      - platform_model: a/stt
        priority: 2
      - platform_model: b/stt
        priority: 1
`, a, b)
}

// mockTranscript is what the mock transcribes a file to: its name,
// length and FNV-1a hash, so a test sees that it arrived whole.
func mockTranscript(name string, data []byte) string {
	h := fnv.New64a()
	h.Write(data)
	return fmt.Sprintf("mock transcript of %s: %d bytes, fnv %016x", name, len(data), h.Sum64())
}

// TestOfficialSDKUploads drives the upload endpoints with the official
// OpenAI Go SDK: an image edit and a variation, a transcription (whole
// and streamed) of a file large enough to be spooled to disk, and a
// translation. The mock knows only the upstream names, so each answer
// shows the model was rewritten; the transcript names the bytes it got.
func TestOfficialSDKUploads(t *testing.T) {
	t.Parallel()
	cfg := mock.Config{Models: []string{"gpt-image-1", "whisper-1"}}
	a, b := startUpstream(t, cfg), startUpstream(t, cfg)
	g := startGateway(t, "", uploadKinds(a.URL, b.URL))
	_, secret := g.createKey(t)
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(secret),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	ctx := context.Background()
	png := bytes.Repeat([]byte("\x89PNG not really "), 64)

	edit, err := client.Images.Edit(ctx, openai.ImageEditParams{Model: "img", Prompt: "add a heron",
		Image: openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(bytes.NewReader(png), "weir.png", "image/png")}}})
	if err != nil {
		t.Fatalf("images.edit: %v", err)
	}
	if len(edit.Data) != 1 || edit.Data[0].B64JSON == "" {
		t.Fatalf("images.edit: %+v", edit)
	}
	variation, err := client.Images.NewVariation(ctx, openai.ImageNewVariationParams{Model: "img",
		Image: openai.File(bytes.NewReader(png), "weir.png", "image/png"), N: openai.Int(2)})
	if err != nil {
		t.Fatalf("images.createVariation: %v", err)
	}
	if len(variation.Data) != 2 {
		t.Fatalf("images.createVariation: %d images, want 2", len(variation.Data))
	}

	audio := make([]byte, 300<<10) // past what a request holds in memory
	for i := range audio {
		audio[i] = byte(i * 7)
	}
	want := mockTranscript("weir.mp3", audio)
	tr, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{Model: "stt",
		File: openai.File(bytes.NewReader(audio), "weir.mp3", "audio/mpeg")})
	if err != nil {
		t.Fatalf("audio.transcriptions.new: %v", err)
	}
	if tr.Text != want {
		t.Fatalf("transcription %q, want %q", tr.Text, want)
	}

	stream := client.Audio.Transcriptions.NewStreaming(ctx, openai.AudioTranscriptionNewParams{Model: "stt",
		File: openai.File(bytes.NewReader(audio), "weir.mp3", "audio/mpeg")})
	var deltas strings.Builder
	done := ""
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "transcript.text.delta":
			deltas.WriteString(ev.Delta)
		case "transcript.text.done":
			done = ev.Text
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("streamed transcription: %v", err)
	}
	if deltas.String() != want || done != want {
		t.Fatalf("streamed transcription: deltas %q, done %q; want %q", deltas.String(), done, want)
	}

	translation, err := client.Audio.Translations.New(ctx, openai.AudioTranslationNewParams{Model: "stt",
		File: openai.File(bytes.NewReader(audio[:1000]), "short.mp3", "audio/mpeg")})
	if err != nil {
		t.Fatalf("audio.translations.new: %v", err)
	}
	if translation.Text != mockTranscript("short.mp3", audio[:1000]) {
		t.Fatalf("translation %q", translation.Text)
	}
}

// TestUploadFallsBackWithItsFile: an upload whose first candidate fails
// (500) is sent again, whole, to the next: the form's files are kept
// until the request ends, not consumed by the first attempt.
func TestUploadFallsBackWithItsFile(t *testing.T) {
	t.Parallel()
	a, b := startUpstream(t, mock.Config{}), startUpstream(t, mock.Config{})
	a.force.Store(http.StatusInternalServerError)
	g := startGateway(t, "", uploadKinds(a.URL, b.URL))
	_, secret := g.createKey(t)
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(secret),
		option.WithMaxRetries(0), option.WithRequestTimeout(20*time.Second))
	audio := bytes.Repeat([]byte("weir "), 40<<10)
	tr, err := client.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{Model: "stt",
		File: openai.File(bytes.NewReader(audio), "a.wav", "audio/wav")})
	if err != nil {
		t.Fatalf("transcription: %v", err)
	}
	if want := mockTranscript("a.wav", audio); tr.Text != want {
		t.Fatalf("transcription %q, want %q", tr.Text, want)
	}
	if got := a.Mock.Stats().ByStatus[500]; got != 1 {
		t.Fatalf("platform a answered 500 %d times, want 1", got)
	}
}

// TestUploadRefusals: bad uploads are refused in OpenAI's error shape
// before anything is queued — one declared larger than
// server.max_upload_bytes (413), one without its file or its model, or
// asking for a response format no candidate gives (400) — and one that
// only one candidate can serve goes to it.
func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	g := startGateway(t, "  max_upload_bytes: 65536", uploadKinds(up.URL, up.URL))
	_, secret := g.createKey(t)
	post := func(path string, fields map[string]string, file []byte) (int, string, string) {
		var body bytes.Buffer
		mw := newForm(&body, fields, file)
		req, _ := http.NewRequest(http.MethodPost, g.URL+path, &body)
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", mw)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Error struct{ Type, Param, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e.Error.Type, e.Error.Param
	}
	for _, tc := range []struct {
		name, path string
		fields     map[string]string
		file       []byte
		status     int
		code       string
	}{
		{"too large", "/v1/audio/transcriptions", map[string]string{"model": "stt"}, make([]byte, 70000), 413, "invalid_request_error"},
		{"no file", "/v1/audio/transcriptions", map[string]string{"model": "stt"}, nil, 400, "invalid_request_error"},
		{"no model", "/v1/images/edits", map[string]string{"prompt": "x"}, []byte("png"), 400, "invalid_request_error"},
		{"srt, on b alone", "/v1/audio/transcriptions", map[string]string{"model": "stt", "response_format": "srt"}, []byte("mp3"), 200, ""},
		{"vtt, on none", "/v1/audio/transcriptions", map[string]string{"model": "stt", "response_format": "vtt"}, []byte("mp3"), 400, "invalid_request_error"},
		{"stream on translations", "/v1/audio/translations", map[string]string{"model": "stt", "stream": "true"}, []byte("mp3"), 400, "invalid_request_error"},
	} {
		status, code, _ := post(tc.path, tc.fields, tc.file)
		if status != tc.status || (tc.code != "" && code != tc.code) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, status, code, tc.status, tc.code)
		}
	}
	if n := up.Mock.Stats().Requests; n != 1 {
		t.Fatalf("the upstream answered %d requests, want only the one that was valid", n)
	}
}

// newForm writes a multipart form of fields and, if given, a file
// "file" (or "image" when the fields have a prompt) to w, and returns
// its Content-Type.
func newForm(w io.Writer, fields map[string]string, file []byte) string {
	mw := multipart.NewWriter(w)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	if file != nil {
		name := "file"
		if _, ok := fields["prompt"]; ok {
			name = "image"
		}
		fw, _ := mw.CreateFormFile(name, "upload.bin")
		_, _ = fw.Write(file)
	}
	_ = mw.Close()
	return mw.FormDataContentType()
}
