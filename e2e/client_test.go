package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// client is what the tests talk to gateways with.
var client = &http.Client{Timeout: 30 * time.Second}

// reply is a whole HTTP answer.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// request is one call to a gateway; zero fields are left out.
type request struct {
	Method string // default POST
	Path   string
	Key    string // sent as a bearer token
	Body   string
	Agent  string // User-Agent, which the gateway passes to the upstream
	Header map[string]string
}

func (g *gateway) newRequest(ctx context.Context, r request) (*http.Request, error) {
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL+r.Path, body)
	if err != nil {
		return nil, err
	}
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Key != "" {
		req.Header.Set("Authorization", "Bearer "+r.Key)
	}
	if r.Agent != "" {
		req.Header.Set("User-Agent", r.Agent)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	return req, nil
}

// open makes the call and returns the answer as it begins, for a test
// that reads it as it comes; the caller closes its body. It is for the
// test's goroutine: an error fails the test.
func (g *gateway) open(t *testing.T, ctx context.Context, r request) *http.Response {
	t.Helper()
	req, err := g.newRequest(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// send makes the call and reads the whole answer. It is safe to use from
// any goroutine.
func (g *gateway) send(ctx context.Context, r request) (*reply, error) {
	req, err := g.newRequest(ctx, r)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &reply{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// do is send for the test's goroutine: an error fails the test.
func (g *gateway) do(t *testing.T, r request) *reply {
	t.Helper()
	rep, err := g.send(context.Background(), r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	return rep
}

// chatBody is a minimal chat completion request for model.
func chatBody(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"Say hello"}]}`
}

// streamBody is chatBody with "stream": true.
func streamBody(model string) string {
	return `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
}

// sent is the outcome of a request sent in the background.
type sent struct {
	rep *reply
	err error
}

// sendAsync sends r in the background; the answer arrives on the channel.
func (g *gateway) sendAsync(ctx context.Context, r request) <-chan sent {
	ch := make(chan sent, 1)
	go func() {
		rep, err := g.send(ctx, r)
		ch <- sent{rep, err}
	}()
	return ch
}

// await waits for a background request's answer.
func await(t *testing.T, ch <-chan sent) *reply {
	t.Helper()
	select {
	case s := <-ch:
		if s.err != nil {
			t.Fatalf("request failed: %v", s.err)
		}
		return s.rep
	case <-time.After(20 * time.Second):
		t.Fatal("no answer within 20s")
	}
	return nil
}

// errorTypes are the OpenAI error types that go with Weir's codes.
var errorTypes = map[string]string{
	"invalid_request":        "invalid_request_error",
	"unauthorized":           "authentication_error",
	"forbidden":              "permission_error",
	"not_found":              "not_found_error",
	"idempotency_key_reused": "invalid_request_error",
	"payload_too_large":      "invalid_request_error",
	"rate_limited":           "rate_limit_error",
	"queue_full":             "rate_limit_error",
	"queue_timeout":          "server_error",
	"no_candidate":           "server_error",
	"upstream_error":         "server_error",
	"upstream_timeout":       "server_error",
}

// apiError is the "error" object of an error answer.
type apiError struct {
	Message string
	Type    string
	Code    string
	Param   *string
}

// checkError checks that rep is the error answer docs/api.md's table gives
// for code: its status, OpenAI's error shape ({"error": {"message",
// "type", "code", "param"}}, param null or a string), and Retry-After for
// the 429s.
func checkError(t *testing.T, rep *reply, status int, code string) apiError {
	t.Helper()
	if rep.Status != status {
		t.Fatalf("status %d, want %d (%s); body %s", rep.Status, status, code, rep.Body)
	}
	if ct := rep.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", code, ct)
	}
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(rep.Body, &outer); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v: %s", code, err, rep.Body)
	}
	if len(outer) != 1 || outer["error"] == nil {
		t.Fatalf("%s: body %s, want exactly one field, \"error\"", code, rep.Body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(outer["error"], &fields); err != nil {
		t.Fatalf("%s: error is not an object: %s", code, rep.Body)
	}
	for _, f := range []string{"message", "type", "code", "param"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("%s: error has no %q field: %s", code, f, rep.Body)
		}
	}
	var e apiError
	if err := json.Unmarshal(outer["error"], &e); err != nil {
		t.Fatalf("%s: error fields have the wrong types: %v: %s", code, err, rep.Body)
	}
	if e.Code != code {
		t.Errorf("error.code %q, want %q: %s", e.Code, code, rep.Body)
	}
	if want := errorTypes[code]; e.Type != want {
		t.Errorf("%s: error.type %q, want %q", code, e.Type, want)
	}
	if strings.TrimSpace(e.Message) == "" {
		t.Errorf("%s: empty error.message", code)
	}
	if status == http.StatusTooManyRequests {
		ra := rep.Header.Get("Retry-After")
		if n, err := strconv.Atoi(ra); err != nil || n <= 0 {
			t.Errorf("%s: Retry-After %q, want a positive number of seconds", code, ra)
		}
	}
	return e
}

// sseEvent is one "data:" line of a stream and when it arrived.
type sseEvent struct {
	data string
	at   time.Time
}

// readSSE reads data lines from an event stream until [DONE] or the end.
func readSSE(r io.Reader) ([]sseEvent, error) {
	var events []sseEvent
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok {
			events = append(events, sseEvent{data: strings.TrimSpace(data), at: time.Now()})
			if strings.TrimSpace(data) == "[DONE]" {
				return events, nil
			}
		}
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
	}
}

// metric finds a sample in Prometheus text: the line of name whose labels
// include every one given (as `key="value"`). It reports whether it found
// one.
func metric(text, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		all := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				all = false
				break
			}
		}
		if !all {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		return v, true
	}
	return 0, false
}
