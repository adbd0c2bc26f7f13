package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// answerWithin bounds how long a test waits for an answer that should
// come at once; it fails rather than hangs when none comes.
const answerWithin = 10 * time.Second

// apiErrorOf decodes an answer in the API's error shape.
func apiErrorOf(t testing.TB, resp *http.Response) errorDetail {
	t.Helper()
	var body errorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("answer %d is not in the error shape: %v", resp.StatusCode, err)
	}
	return body.Error
}

// unsentBody is a request body that sends nothing until ctx ends (then
// it fails, so that the client gives up too).
func unsentBody(ctx context.Context) io.Reader {
	pr, pw := io.Pipe()
	context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })
	return pr
}

// TestKeylessBodyIsNotRead: a request without a key gets 401 from its
// headers alone, on every endpoint that takes a body, while its body has
// not even begun to arrive (a pipe nobody writes to), whether it is
// chunked or declares a length.
func TestKeylessBodyIsNotRead(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// One bound for all: the subtests may run two at a time.
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	t.Cleanup(cancel)
	for _, tc := range []struct{ method, path, contentType string }{
		{"POST", "/v1/chat/completions", "application/json"},
		{"POST", "/v1/embeddings", "application/json"},
		{"POST", "/v1/images/generations", "application/json"},
		{"POST", "/v1/audio/speech", "application/json"},
		{"POST", "/v1/videos", "multipart/form-data; boundary=x"},
		{"POST", "/v1/videos", "application/json"},
		{"POST", "/v1/tasks", "application/json"},
		{"POST", "/v1/tasks", "application/x-www-form-urlencoded"},
		{"POST", "/v1/tasks/task_1/cancel", "application/json"},
		{"DELETE", "/v1/tasks/task_1", "application/json"},
		{"DELETE", "/v1/videos/video_1", "application/json"},
	} {
		for _, length := range []int64{-1, 1000} {
			t.Run(fmt.Sprintf("%s %s %s length %d", tc.method, tc.path, tc.contentType, length), func(t *testing.T) {
				t.Parallel()
				pr := unsentBody(ctx)
				req, err := http.NewRequestWithContext(ctx, tc.method, b.http.URL+tc.path, pr)
				if err != nil {
					t.Fatal(err)
				}
				req.ContentLength = length
				req.Header.Set("Content-Type", tc.contentType)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("no answer while the body is unsent (length %d): %v", length, err)
				}
				defer resp.Body.Close()
				if e := apiErrorOf(t, resp); resp.StatusCode != http.StatusUnauthorized || e.Code != string(CodeUnauthorized) {
					t.Fatalf("status %d, error %+v; want 401 unauthorized", resp.StatusCode, e)
				}
			})
		}
	}
}

// TestReadBodyKeepsConnection: a request whose body was read to its end
// leaves its connection open for the next one, refused or not.
func TestReadBodyKeepsConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	for i, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	} {
		reused := false
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.http.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close || resp.Header.Get("Connection") == "close" {
			t.Errorf("request %d: answer %d closes the connection", i, resp.StatusCode)
		}
		if i > 0 && !reused {
			t.Errorf("request %d did not reuse the connection", i)
		}
	}
}
