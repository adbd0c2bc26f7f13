package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fixture is a mock provider on a real listener, with its events on
// channels so tests wait on them instead of sleeping.
type fixture struct {
	t        *testing.T
	s        *Server
	ts       *httptest.Server
	waiting  chan struct{}
	stalling chan struct{}
	done     chan int
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureWith(t, cfg, nil)
}

// newFixtureWith lets setup change the server before it serves.
func newFixtureWith(t *testing.T, cfg Config, setup func(*Server)) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		s:        New(cfg),
		waiting:  make(chan struct{}, 1024),
		stalling: make(chan struct{}, 1024),
		done:     make(chan int, 1024),
	}
	f.s.hooks = testHooks{
		waiting:  func() { f.waiting <- struct{}{} },
		stalling: func() { f.stalling <- struct{}{} },
		done:     func(status int) { f.done <- status },
	}
	if setup != nil {
		setup(f.s)
	}
	f.ts = httptest.NewServer(f.s)
	t.Cleanup(f.ts.Close)
	return f
}

// eventTimeout bounds every wait for an event, so a broken server fails
// the test instead of hanging it.
const eventTimeout = 10 * time.Second

func (f *fixture) await(ch <-chan struct{}, what string) {
	f.t.Helper()
	select {
	case <-ch:
	case <-time.After(eventTimeout):
		f.t.Fatalf("no %s within %s", what, eventTimeout)
	}
}

func (f *fixture) awaitDone() int {
	f.t.Helper()
	select {
	case st := <-f.done:
		return st
	case <-time.After(eventTimeout):
		f.t.Fatalf("no request finished within %s", eventTimeout)
		return 0
	}
}

func (f *fixture) request(ctx context.Context, method, path string, body any, header map[string]string) *http.Response {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.ts.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

func (f *fixture) post(path string, body any, header map[string]string) *http.Response {
	f.t.Helper()
	return f.request(context.Background(), http.MethodPost, path, body, header)
}

// readAll reads and closes the body.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// obj decodes a JSON object.
func obj(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}

// hasKeys fails unless m holds every key (null counts: the SDKs type
// these fields as present-but-nullable).
func hasKeys(t *testing.T, where string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: missing %q in %v", where, k, m)
		}
	}
}

func expectStatus(t *testing.T, resp *http.Response, want int) []byte {
	t.Helper()
	b := readAll(t, resp)
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, b)
	}
	return b
}

// expectError checks OpenAI's error JSON and returns its object.
func expectError(t *testing.T, resp *http.Response, status int, typ string) map[string]any {
	t.Helper()
	b := expectStatus(t, resp, status)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q", ct)
	}
	m := obj(t, b)
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", b)
	}
	hasKeys(t, "error", e, "message", "type", "param", "code")
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("empty error message: %s", b)
	}
	if e["type"] != typ {
		t.Errorf("error type %v, want %s", e["type"], typ)
	}
	return e
}

var chatBody = map[string]any{
	"model":    "gpt-4o-mini",
	"messages": []map[string]any{{"role": "user", "content": "Say hello to the mock provider."}},
}

func chatWith(extra map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range chatBody {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// sseEvents splits a complete SSE body into its data payloads, checking
// the framing: every event is one "data: " line followed by a blank line.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s[max(0, len(s)-80):])
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("bad SSE event %q", ev)
		}
		out = append(out, data)
	}
	return out
}
