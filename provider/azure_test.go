package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/provider/mock"
)

type azureBundle struct {
	ad  *Azure
	rec *recorder
}

func setupAzure(t *testing.T, cfg mock.Config) azureBundle {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(rec.wrap(mock.New(cfg)))
	t.Cleanup(srv.Close)
	return azureBundle{ad: &Azure{BaseURL: srv.URL + "/", APIKey: "azure-platform-key", AbortGrace: -1}, rec: rec}
}

func TestAzureDeploymentURLs(t *testing.T) {
	t.Parallel()
	b := setupAzure(t, mock.Config{Models: []string{"chat-dep", "embed-dep", "image-dep", "tts-dep"}})
	for _, tc := range []struct {
		path, body, want string
	}{
		{"/chat/completions", `{"model":"chat-dep","messages":[{"role":"user","content":"hi"}]}`, "chat.completion"},
		{"/embeddings", `{"model":"embed-dep","input":"hi"}`, "list"},
		{"/images/generations", `{"model":"image-dep","prompt":"a cat"}`, ""},
		{"/audio/speech", `{"model":"tts-dep","input":"hi","voice":"alloy"}`, ""},
	} {
		resp, err := b.ad.Do(t.Context(), Call{Path: tc.path, Body: []byte(tc.body), Header: http.Header{"User-Agent": {"sdk/1"}}})
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		got := readBody(t, resp)
		req := b.rec.last(t)
		var dep struct{ Model string }
		_ = json.Unmarshal([]byte(tc.body), &dep)
		if req.Path != "/openai/deployments/"+dep.Model+tc.path || req.Query != "api-version="+DefaultAzureAPIVersion {
			t.Fatalf("%s: sent %s?%s", tc.path, req.Path, req.Query)
		}
		if req.Header.Get("Api-Key") != "azure-platform-key" || req.Header.Get("Authorization") != "" || req.Header.Get("User-Agent") != "sdk/1" {
			t.Fatalf("%s: headers %v", tc.path, req.Header)
		}
		if string(req.Body) != tc.body {
			t.Fatalf("%s: body changed: %s", tc.path, req.Body)
		}
		if tc.want != "" {
			var m struct{ Object string }
			if err := json.Unmarshal(got, &m); err != nil || m.Object != tc.want {
				t.Fatalf("%s: answer %.200s", tc.path, got)
			}
		}
	}

	// The platform's api-version, a deployment name escaped, a stream
	// passed through as it comes.
	ad := *b.ad
	ad.APIVersion = "2025-04-01-preview"
	resp, err := ad.Do(t.Context(), Call{Path: "/chat/completions", Stream: true,
		Body: []byte(`{"model":"chat-dep","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	got := string(readBody(t, resp))
	if req := b.rec.last(t); req.Query != "api-version=2025-04-01-preview" || req.Header.Get("Accept") != "text/event-stream" {
		t.Fatalf("sent ?%s, Accept %q", req.Query, req.Header.Get("Accept"))
	}
	if !strings.HasSuffix(got, "data: [DONE]\n\n") || !strings.Contains(got, `"usage":{"prompt_tokens"`) {
		t.Fatalf("stream %s", got)
	}
	pe := upstreamErr(t, b.ad, Call{Path: "/chat/completions", Body: []byte(`{"model":"a/b?c","messages":[]}`)})
	if req := b.rec.last(t); req.Path != "/openai/deployments/a/b?c/chat/completions" || pe.Status != http.StatusNotFound {
		t.Fatalf("sent %s (%d)", req.Path, pe.Status)
	}
}

func TestAzureErrors(t *testing.T) {
	t.Parallel()
	b := setupAzure(t, mock.Config{Models: []string{"dep"}})
	chat := Call{Path: "/chat/completions", Body: []byte(`{"model":"dep","messages":[{"role":"user","content":"hi"}]}`)}

	// The content filter: a clear client error, in OpenAI's shape.
	b.rec.set("X-Mock-Content-Filter", "1")
	pe := upstreamErr(t, b.ad, chat)
	msg, param, code := openAIError(t, pe.Body)
	if pe.Status != http.StatusBadRequest || pe.Retryable() || code != "content_filter" || param != "messages" ||
		msg != "Azure OpenAI's content filter refused the prompt (violence: medium); change the prompt and try again." {
		t.Fatalf("content filter: %+v %s", pe, pe.Body)
	}
	// A refused key is the platform's.
	b.rec.set()
	ad := *b.ad
	ad.APIKey = ""
	if pe := upstreamErr(t, &ad, chat); pe.Status != http.StatusUnauthorized || !pe.Credential || pe.Body != nil {
		t.Fatalf("no key: %+v", pe)
	}
	// 429 carries its wait; 503 passes.
	b.rec.set("X-Mock-Status", "429")
	if pe := upstreamErr(t, b.ad, chat); pe.Status != http.StatusTooManyRequests || pe.RetryAfter <= 0 {
		t.Fatalf("429: %+v", pe)
	}
	b.rec.set("X-Mock-Status", "503")
	if pe := upstreamErr(t, b.ad, chat); !pe.Retryable() {
		t.Fatalf("503: %+v", pe)
	}
	// Other 400s pass as they came.
	b.rec.set("X-Mock-Status", "400")
	if pe := upstreamErr(t, b.ad, chat); !strings.Contains(string(pe.Body), "forced by the mock provider") {
		t.Fatalf("400: %s", pe.Body)
	}
	b.rec.set()
	// What Azure does not serve here.
	for _, c := range []Call{{Path: "/videos", Body: []byte(`{"model":"dep"}`)}, {Path: "/chat/completions", Body: []byte(`{"messages":[]}`)}} {
		if pe := upstreamErr(t, b.ad, c); pe.Status != http.StatusBadRequest || pe.Retryable() {
			t.Fatalf("%s: %+v", c.Path, pe)
		}
	}
}

// The Responses API goes to Azure's v1 API, the deployment in the body's
// model, no api-version.
func TestAzureResponses(t *testing.T) {
	t.Parallel()
	b := setupAzure(t, mock.Config{Models: []string{"chat-dep"}})
	body := `{"model":"chat-dep","input":"hi"}`
	resp, err := b.ad.Do(t.Context(), Call{Path: "/responses", Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	got := readBody(t, resp)
	req := b.rec.last(t)
	if req.Path != "/openai/v1/responses" || req.Query != "" || string(req.Body) != body || req.Header.Get("Api-Key") != "azure-platform-key" {
		t.Fatalf("sent %s?%s %v %s", req.Path, req.Query, req.Header, req.Body)
	}
	var m struct{ ID, Object, Model string }
	if err := json.Unmarshal(got, &m); err != nil || m.Object != "response" || m.Model != "chat-dep" {
		t.Fatalf("answer %.200s", got)
	}
	// What follows a response goes there too, with no body.
	resp, err = b.ad.Do(t.Context(), Call{Method: http.MethodGet, Path: "/responses/" + m.ID + "/input_items?limit=5"})
	if err != nil {
		t.Fatal(err)
	}
	got = readBody(t, resp)
	req = b.rec.last(t)
	if req.Method != http.MethodGet || req.Path != "/openai/v1/responses/"+m.ID+"/input_items" || req.Query != "limit=5" ||
		len(req.Body) != 0 || req.Header.Get("Content-Type") != "" || !strings.Contains(string(got), `"object":"list"`) {
		t.Fatalf("sent %s %s?%s %v; answer %s", req.Method, req.Path, req.Query, req.Header, got)
	}
}

// Uploads go to the deployment their form names (Upload.Model), with
// the form sent as it is read; Azure has no image variations.
func TestAzureUploads(t *testing.T) {
	t.Parallel()
	b := setupAzure(t, mock.Config{Models: []string{"stt-dep", "image-dep"}})
	for _, tc := range []struct{ path, model, file, want string }{
		{"/audio/transcriptions", "stt-dep", "file", `"text"`},
		{"/audio/translations", "stt-dep", "file", `"text"`},
		{"/images/edits", "image-dep", "image", `"data"`},
	} {
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		_ = mw.WriteField("model", tc.model)
		_ = mw.WriteField("prompt", "a cat")
		fw, _ := mw.CreateFormFile(tc.file, "in.bin")
		_, _ = fw.Write([]byte("some bytes of audio or an image"))
		_ = mw.Close()
		sent := form.String()
		up := &Upload{Body: io.NopCloser(&form), ContentType: mw.FormDataContentType(), Length: int64(form.Len()), Model: tc.model}
		resp, err := b.ad.Do(t.Context(), Call{Path: tc.path, Upload: up})
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		got := readBody(t, resp)
		req := b.rec.last(t)
		if req.Path != "/openai/deployments/"+tc.model+tc.path || req.Query != "api-version="+DefaultAzureAPIVersion {
			t.Fatalf("%s: sent %s?%s", tc.path, req.Path, req.Query)
		}
		if req.Header.Get("Api-Key") != "azure-platform-key" || req.Header.Get("Content-Type") != mw.FormDataContentType() || string(req.Body) != sent {
			t.Fatalf("%s: headers %v, body %q", tc.path, req.Header, req.Body)
		}
		if !strings.Contains(string(got), tc.want) {
			t.Fatalf("%s: answer %.200s", tc.path, got)
		}
	}
	// An upload that names no deployment, and variations, are refused
	// before anything is sent.
	n := b.rec.count()
	for _, c := range []Call{
		{Path: "/audio/transcriptions", Upload: &Upload{Body: io.NopCloser(strings.NewReader("")), ContentType: "multipart/form-data; boundary=x"}},
		{Path: "/images/variations", Upload: &Upload{Body: io.NopCloser(strings.NewReader("")), ContentType: "multipart/form-data; boundary=x", Model: "image-dep"}},
	} {
		if pe := upstreamErr(t, b.ad, c); pe.Status != http.StatusBadRequest || pe.Retryable() {
			t.Fatalf("%s: %+v", c.Path, pe)
		}
	}
	if b.rec.count() != n {
		t.Fatal("a refused upload was sent")
	}
}
