package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/task"
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
	for _, tc := range []struct{ method, path, contentType string }{
		{"POST", "/v1/chat/completions", "application/json"},
		{"POST", "/v1/embeddings", "application/json"},
		{"POST", "/v1/images/generations", "application/json"},
		{"POST", "/v1/audio/speech", "application/json"},
		{"POST", "/v1/responses", "application/json"},
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
				// Each subtest's own bound, from when it runs: a parallel
				// subtest may wait long for its turn behind other tests.
				ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
				defer cancel()
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
				if e := apiErrorOf(t, resp); resp.StatusCode != http.StatusUnauthorized || e.Code != string(weir.CodeUnauthorized) {
					t.Fatalf("status %d, error %+v; want 401 unauthorized", resp.StatusCode, e)
				}
			})
		}
	}
}

// TestReadBodyKeepsConnection: a request whose body was read to its end
// leaves its connection open for the next one, refused or not. The
// requests go one after another on one raw connection, so that only the
// server's side is under test (a client transport may drop a connection
// for reasons of its own, such as an answer that beats its write).
func TestReadBodyKeepsConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	conn, r := dialRaw(t, strings.TrimPrefix(b.http.URL, "http://"))
	for i, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	} {
		req, err := http.NewRequest(http.MethodPost, b.http.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.key)
		if err := req.Write(conn); err != nil {
			t.Fatalf("request %d: the connection is gone: %v", i, err)
		}
		resp, err := http.ReadResponse(r, req)
		if err != nil {
			t.Fatalf("request %d: no answer on the connection: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close || resp.Header.Get("Connection") == "close" {
			t.Errorf("request %d: answer %d closes the connection", i, resp.StatusCode)
		}
	}
}

// serveReal serves the bundle's API with the http.Server that HTTPServer
// builds (its timeouts), on a real listener; it returns the address.
func serveReal(t testing.TB, b *testBundle) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := b.srv.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// dialRaw opens a connection to addr whose reads fail after answerWithin.
func dialRaw(t testing.TB, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.SetReadDeadline(time.Now().Add(answerWithin)); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

// TestSlowBodyIsCutOff: a body that stops coming is cut off after
// BodyTimeout with 408 in the error shape, and the connection closed.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{BodyTimeout: 200 * time.Millisecond}})
	conn, br := dialRaw(t, serveReal(t, b))
	_, err := fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: weir\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":", b.key)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	if e := apiErrorOf(t, resp); resp.StatusCode != http.StatusRequestTimeout || e.Code != string(weir.CodeRequestTimeout) {
		t.Fatalf("status %d, error %+v; want 408 request_timeout", resp.StatusCode, e)
	}
	if !resp.Close {
		t.Errorf("the answer to a cut-off body keeps the connection open")
	}
}

// TestIdleConnectionIsClosed: a keep-alive connection with no next
// request is closed after IdleTimeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{IdleTimeout: 200 * time.Millisecond}})
	conn, br := dialRaw(t, serveReal(t, b))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: weir\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("status %d, close %v: want 200 on a kept connection", resp.StatusCode, resp.Close)
	}
	if n, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: read %v, %v; want it closed (EOF)", n, err)
	}
}

// TestStreamOutlivesServerTimeouts: the server's timeouts bound the
// request and the idle time between requests, not the answer: a streamed
// answer longer than all of them runs to its end.
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{
		cfg:  Config{BodyTimeout: 100 * time.Millisecond, ReadHeaderTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond},
		mock: mock.Config{TokensPerSecond: 20, CompletionTokens: 10},
	})
	addr := serveReal(t, b)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(got), "data: [DONE]") {
		t.Fatalf("status %d, %v, after %s: %s; want the whole stream", resp.StatusCode, err, time.Since(start), got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("the stream took %s: too short to outlive the timeouts", d)
	}
}

// TestTaskBeforeCatalog: a task submitted to a gateway with no catalog
// yet is refused as no_candidate, not a panic answered 500.
func TestTaskBeforeCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	gw := gateway.New(gateway.Config{}, gateway.Deps{Engine: b.engine, Keys: b.db})
	// The task service is reached only past the catalog check.
	bare := New(Config{}, Deps{Gateway: gw, Tasks: gateway.NewTasks(gw, new(task.Service))})
	for _, path := range []string{"/v1/tasks", "/v1/videos"} {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"model":"m","prompt":"p","input":{}}`))
		r.Header.Set("Authorization", "Bearer "+b.key)
		w := httptest.NewRecorder()
		bare.Handler().ServeHTTP(w, r)
		if w.Code != weir.CodeNoCandidate.Status() || !strings.Contains(w.Body.String(), string(weir.CodeNoCandidate)) {
			t.Errorf("POST %s before a catalog: %d %s", path, w.Code, w.Body)
		}
	}
}
