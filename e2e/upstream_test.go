package e2e

import (
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

	mu       sync.Mutex
	arrivals []string
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
		u.mu.Unlock()
		if s := u.force.Load(); s != 0 {
			r.Header.Set("X-Mock-Status", strconv.Itoa(int(s)))
		}
		if u.hold.Load() {
			w = &heldWriter{ResponseWriter: w, gate: u.gate, done: r.Context().Done()}
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
