package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// mediaTaskCatalog serves an image model (one call at a time) and a
// speech model from up, with callbacks on.
func mediaTaskCatalog(upURL, secret string) string {
	return fmt.Sprintf(`tasks:
  workers: 8
  poll_min: 50ms
  poll_max: 250ms
  rescue_after: 1m
  lease_ttl: 5m
  webhook_secret: %q
  webhook_allow_loopback: true

platforms:
  - name: up
    base_url: %s
platform_models:
  - name: up/img
    platform: up
    upstream: gpt-image-1
    concurrency: 1
  - name: up/tts
    platform: up
    upstream: tts-1
  - name: up/stt
    platform: up
    upstream: whisper-1
models:
  - name: img
    kind: images
    candidates:
      - platform_model: up/img
  - name: tts
    kind: audio_speech
    candidates:
      - platform_model: up/tts
  - name: stt
    kind: audio_transcription
    candidates:
      - platform_model: up/stt
`, secret, upURL)
}

// TestImageTasksSurviveRestart: image generations submitted as durable
// tasks wait stored and in order behind a platform that takes one at a
// time; a kill -9 while the first is upstream loses none of them: after
// the restart the first runs again and the rest follow in submission
// order, each task's result is the generation's answer, and each calls
// back when done. A speech task keeps its audio as base64.
func TestImageTasksSurviveRestart(t *testing.T) {
	t.Parallel()
	up := &gatedUpstream{Mock: mock.New(mock.Config{Models: []string{"gpt-image-1", "tts-1"}}), gate: make(chan struct{})}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	t.Cleanup(up.open)
	secret, signer := newSecret(t)
	hooks := startReceiver(t, signer, nil)
	g := startGateway(t, "", mediaTaskCatalog(srv.URL+"/v1", secret))
	_, key := g.createKey(t)

	const n = 6
	ids := make([]string, n)
	for i := range n {
		body, _ := json.Marshal(map[string]any{"model": "img", "callback_url": hooks.URL,
			"input": map[string]any{"prompt": fmt.Sprintf("img-%02d", i), "response_format": "b64_json"}})
		o, status := g.submitTask(t, key, string(body), "")
		if status != http.StatusAccepted {
			t.Fatalf("submit %d: %d %+v", i, status, o)
		}
		ids[i] = o.ID
	}
	waitFor(t, 20*time.Second, "the first image task upstream", func() bool { return up.held.Load() == 1 })
	g.kill9(t)
	g, _ = g.restart(t)
	waitFor(t, 20*time.Second, "the first image task upstream again", func() bool { return up.held.Load() == 1 })
	up.open()

	final := g.waitTerminal(t, key, ids, 60*time.Second)
	for i, id := range ids {
		o := final[id]
		var res struct {
			Data []struct {
				B64JSON string `json:"b64_json"`
			} `json:"data"`
		}
		if o.Status != "succeeded" || json.Unmarshal(o.Result, &res) != nil || len(res.Data) != 1 || res.Data[0].B64JSON == "" {
			t.Fatalf("task %d (%s): %s, error %+v, result %.200s", i, id, o.Status, o.Error, o.Result)
		}
	}
	got := up.seen()
	want := []string{"img-00", "img-00", "img-01", "img-02", "img-03", "img-04", "img-05"}
	if !slices.Equal(got, want) {
		t.Fatalf("the upstream saw %v, want %v (the first again after the restart, then in order)", got, want)
	}
	if fetched := g.getTask(t, key, ids[n-1]); string(fetched.Result) != string(final[ids[n-1]].Result) {
		t.Fatalf("GET /v1/tasks/%s: result %.100s", ids[n-1], fetched.Result)
	}
	waitFor(t, 20*time.Second, "a task.succeeded callback for each task", func() bool {
		by := hooks.byTask()
		for _, id := range ids {
			if !slices.ContainsFunc(by[id], func(d delivery) bool { return d.Event.Type == "task.succeeded" && d.Verified == nil }) {
				return false
			}
		}
		return true
	})

	body := `{"model":"tts","input":{"input":"a weir at dawn","voice":"alloy"}}`
	speech, _ := g.submitTask(t, key, body, "")
	o := g.waitTerminal(t, key, []string{speech.ID}, 30*time.Second)[speech.ID]
	var audio struct {
		ContentType string `json:"content_type"`
		Data        string `json:"data"`
	}
	if o.Status != "succeeded" || json.Unmarshal(o.Result, &audio) != nil || audio.ContentType != "audio/mpeg" {
		t.Fatalf("speech task: %s %+v %.200s", o.Status, o.Error, o.Result)
	}
	if b, err := base64.StdEncoding.DecodeString(audio.Data); err != nil || len(b) == 0 {
		t.Fatalf("speech task's audio: %d bytes, %v", len(b), err)
	}
}

// TestTranscriptionTask: a transcription runs as a durable task, its
// audio base64 in the input: the upstream gets the form the endpoint
// takes (the file, the other fields, the model as the platform names
// it), and the task's result is the transcription's answer.
func TestTranscriptionTask(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	secret, _ := newSecret(t)
	g := startGateway(t, "", mediaTaskCatalog(up.URL, secret))
	_, key := g.createKey(t)
	audio := bytes.Repeat([]byte("RIFF-audio "), 1000)
	body, _ := json.Marshal(map[string]any{"model": "stt", "input": map[string]any{
		"file":     map[string]string{"data": base64.StdEncoding.EncodeToString(audio), "filename": "meeting.wav"},
		"language": "en", "response_format": "json", "temperature": 0.2}})
	o, status := g.submitTask(t, key, string(body), "")
	if status != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", status, o)
	}
	o = g.waitTerminal(t, key, []string{o.ID}, 30*time.Second)[o.ID]
	var res struct {
		Text string `json:"text"`
	}
	h := fnv.New64a()
	h.Write(audio)
	want := fmt.Sprintf("mock transcript of meeting.wav: %d bytes, fnv %016x", len(audio), h.Sum64())
	if o.Status != "succeeded" || json.Unmarshal(o.Result, &res) != nil || res.Text != want {
		t.Fatalf("transcription task: %s %+v %.300s; want the text %q", o.Status, o.Error, o.Result, want)
	}
}

// TestTaskInputRefusals: a task of a synchronous kind whose input lacks
// what its endpoint requires, or asks for a stream, is refused at once;
// so is an image model submitted through the video API.
func TestTaskInputRefusals(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	secret, _ := newSecret(t)
	g := startGateway(t, "", mediaTaskCatalog(up.URL, secret))
	_, key := g.createKey(t)
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/tasks", `{"model":"img","input":{"size":"1024x1024"}}`, "input.prompt"},
		{"/v1/tasks", `{"model":"tts","input":{"input":"hi"}}`, "input.voice"},
		{"/v1/tasks", `{"model":"img","input":{"prompt":"x","stream":true}}`, "input.stream"},
		{"/v1/tasks", `{"model":"stt","input":{"language":"en"}}`, "input.file"},
		{"/v1/tasks", `{"model":"stt","input":{"file":"YWJj"}}`, "input.file"},
		{"/v1/tasks", `{"model":"stt","input":{"file":{"data":"not base64!"}}}`, "input.file"},
		{"/v1/videos", `{"model":"img","prompt":"x"}`, "model"},
	} {
		rep := g.do(t, request{Path: tc.path, Key: key, Body: tc.body})
		var e struct{ Error struct{ Param string } }
		_ = json.Unmarshal(rep.Body, &e)
		if rep.Status != http.StatusBadRequest || e.Error.Param != tc.param {
			t.Errorf("%s %s: %d %s, want 400 naming %s", tc.path, tc.body, rep.Status, rep.Body, tc.param)
		}
	}
	if n := up.Mock.Stats().Requests; n != 0 {
		t.Fatalf("the upstream saw %d requests, want none", n)
	}
}

// gatedUpstream is the mock provider behind a gate: until open, each
// request waits (and is dropped if its caller goes away first). It
// records the prompt of each image generation that arrives, in order.
type gatedUpstream struct {
	Mock *mock.Server
	held atomic.Int32
	gate chan struct{}
	once sync.Once

	mu      sync.Mutex
	prompts []string
}

func (u *gatedUpstream) open() { u.once.Do(func() { close(u.gate) }) }

func (u *gatedUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.prompts)
}

func (u *gatedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var in struct{ Prompt string }
	if r.URL.Path == "/v1/images/generations" && json.Unmarshal(body, &in) == nil {
		u.mu.Lock()
		u.prompts = append(u.prompts, in.Prompt)
		u.mu.Unlock()
	}
	u.held.Add(1)
	select {
	case <-u.gate:
	case <-r.Context().Done():
	}
	u.held.Add(-1)
	if r.Context().Err() != nil {
		return
	}
	u.Mock.ServeHTTP(w, r)
}
