package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// upstream is a mock provider served in the test process on a real
// listener, with the controls a test needs on top of the mock's own: the
// order in which work requests arrived (by the User-Agent the gateway
// passes through), a status forced on every request (the mock's
// X-Mock-Status, which the gateway does not forward from clients), and a
// gate that holds each answer, slot taken, until the test releases it.
type upstream struct {
	Mock *mock.Server
	// URL is the base URL of its API, ending in /v1.
	URL string

	force atomic.Int32 // non-zero: answer every work request with this status
	hold  atomic.Bool  // set: hold every work request's answer until release
	gate  chan struct{}
	// slow, if set, holds the answer of each work request whose
	// User-Agent begins with "slow-" that much longer, slot taken.
	slow atomic.Int64

	mu       sync.Mutex
	arrivals []string
	times    []time.Time // when each arrival came
}

func startUpstream(t *testing.T, cfg mock.Config) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{Mock: mock.New(cfg), gate: make(chan struct{}), URL: "http://" + ln.Addr().String() + "/v1"}
	srv := &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() }) // Close ends held requests with their connections
	return u
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/") {
		u.mu.Lock()
		u.arrivals = append(u.arrivals, r.UserAgent())
		u.times = append(u.times, time.Now())
		u.mu.Unlock()
		if s := u.force.Load(); s != 0 {
			r.Header.Set("X-Mock-Status", strconv.Itoa(int(s)))
		}
		if u.hold.Load() {
			w = &heldWriter{ResponseWriter: w, gate: u.gate, done: r.Context().Done()}
		}
		if d := time.Duration(u.slow.Load()); d > 0 && strings.HasPrefix(r.UserAgent(), "slow-") {
			gate := make(chan struct{})
			t := time.AfterFunc(d, func() { close(gate) })
			defer t.Stop()
			w = &heldWriter{ResponseWriter: w, gate: gate, done: r.Context().Done()}
		}
	}
	u.Mock.ServeHTTP(w, r)
}

// Arrivals returns the User-Agent of every work request so far, in the
// order they arrived.
func (u *upstream) Arrivals() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.arrivals...)
}

// ArrivalTimes returns when each work request so far arrived, in order.
func (u *upstream) ArrivalTimes() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.times...)
}

// release lets one held answer go (whichever held request takes it).
func (u *upstream) release(t *testing.T) {
	t.Helper()
	select {
	case u.gate <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("no held upstream request to release within 10s")
	}
}

// heldWriter holds the mock's first write until the gate lets it through
// or the request ends, so that the mock keeps its slot meanwhile: the
// mock's own in-flight count and peak include held requests.
type heldWriter struct {
	http.ResponseWriter
	gate   <-chan struct{}
	done   <-chan struct{}
	passed bool
}

func (w *heldWriter) wait() {
	if w.passed {
		return
	}
	w.passed = true
	select {
	case <-w.gate:
	case <-w.done:
	}
}

func (w *heldWriter) WriteHeader(code int) {
	w.wait()
	w.ResponseWriter.WriteHeader(code)
}

func (w *heldWriter) Write(b []byte) (int, error) {
	w.wait()
	return w.ResponseWriter.Write(b)
}

func (w *heldWriter) Flush() {
	w.wait()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *heldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestStalledStreamIsCut: a platform's idle_timeout ends a stream whose
// upstream stopped sending: the client gets the first half and an
// upstream_timeout error event, and the slot is free again, at the
// gateway and at the upstream.
func TestStalledStreamIsCut(t *testing.T) {
	t.Parallel()
	a := startUpstream(t, mock.Config{StallRate: 1, StallFor: time.Hour, CompletionTokens: 10})
	g := startGateway(t, "", fmt.Sprintf(`platforms:
  - name: a
    base_url: %s
    idle_timeout: 500ms
platform_models:
  - name: a/chat
    platform: a
    upstream: model-a
    concurrency: 1
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: a/chat
`, a.URL))
	_, key := g.createKey(t)
	start := time.Now()
	rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: streamBody("chat")})
	took := time.Since(start)
	if rep.Status != http.StatusOK || !strings.Contains(string(rep.Body), `"code":"upstream_timeout"`) {
		t.Fatalf("status %d: %s; want a stream ended by upstream_timeout", rep.Status, rep.Body)
	}
	if strings.Contains(string(rep.Body), "[DONE]") {
		t.Errorf("the cut stream says it is done: %s", rep.Body)
	}
	if s := g.scope(t, "pm:a/chat"); s.InFlight != 0 {
		t.Errorf("after the cut stream pm:a/chat holds %d", s.InFlight)
	}
	if st := a.Mock.Stats(); st.InFlight != 0 || st.Stalled != 1 {
		t.Errorf("upstream after the cut: %+v", st)
	}
	t.Logf("the stalled stream was cut after %s", took)
}

// TestCredentialRefusalFallsBack: a platform that refuses its credential
// (401) is skipped for the next candidate; alone, the client gets
// upstream_error in Weir's words, never the upstream's.
func TestCredentialRefusalFallsBack(t *testing.T) {
	t.Parallel()
	a := startUpstream(t, mock.Config{})
	b := startUpstream(t, mock.Config{})
	a.force.Store(http.StatusUnauthorized)
	g := startGateway(t, "", twoPlatforms(a, b)+`  - name: only-a
    kind: chat
    candidates:
      - platform_model: a/chat
`)
	_, key := g.createKey(t)
	if got := servedBy(t, g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})); got != "model-b" {
		t.Fatalf("served by %q, want model-b", got)
	}
	rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("only-a")})
	checkError(t, rep, http.StatusBadGateway, "upstream_error")
	for _, leak := range []string{"invalid_api_key", "Incorrect", "API key"} {
		if strings.Contains(string(rep.Body), leak) {
			t.Errorf("the client sees the upstream's words (%q): %s", leak, rep.Body)
		}
	}
	if n := a.Mock.Stats().ByStatus[http.StatusUnauthorized]; n != 2 {
		t.Errorf("platform a answered 401 %d times, want 2", n)
	}
}

// TestTaskMovesOffRefusedCredential: a platform that refuses its
// credential (401) started no job: a task admitted to it runs on the next
// candidate at once.
func TestTaskMovesOffRefusedCredential(t *testing.T) {
	t.Parallel()
	var refused atomic.Int64
	bad := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided: sk-leak","code":"invalid_api_key"}}`))
	}))
	good := startVideoUpstream(t, mock.Config{JobDuration: 300 * time.Millisecond})
	g := startGateway(t, "", twoVideoPlatforms(bad+"/v1", good.URL))
	_, key := g.createKey(t)
	o, _ := g.submitTask(t, key, taskBody("moved", ""), "")
	final := g.waitTerminal(t, key, []string{o.ID}, 10*time.Second)
	if got := final[o.ID]; got.Status != "succeeded" {
		t.Fatalf("task ended %s (%+v), want succeeded on the other platform", got.Status, got.Error)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("the refusing platform saw %d requests, want 1 (then the task moved)", n)
	}
}

// httptestServer serves h on a loopback listener until the test ends and
// returns its URL.
func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
