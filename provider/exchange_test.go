package provider

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
)

// stallingUpstream answers with headers and first, then sends nothing
// until the request ends; ended is closed once its handler has returned
// from the stall, as an upstream's in-flight count would drop.
func stallingUpstream(t *testing.T, first string) (url string, ended <-chan struct{}) {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(done)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, done
}

// advanceUntil moves clk by step, up to limit in all, until done is
// closed: the bound under test fires on the fake clock once the read it
// bounds has begun, which the test cannot see, so it keeps moving time
// until the effect shows. The tests' abort grace is far beyond limit, so
// only the upstream hanging up ends an aborted call.
func advanceUntil(t *testing.T, clk *clock.Fake, step, limit time.Duration, done <-chan struct{}) {
	t.Helper()
	if !clk.AdvanceUntil(done, step, limit, 10*time.Second) {
		t.Fatal("the call never ended")
	}
}

// readPastStall reads body's first part, which must begin with prefix,
// then the rest while clk runs on until the read ends; it returns the
// error that ended it.
func readPastStall(t *testing.T, clk *clock.Fake, body io.Reader, prefix string) error {
	t.Helper()
	first := make([]byte, 4096)
	if n, err := body.Read(first); err != nil || !strings.HasPrefix(string(first[:n]), prefix) {
		t.Fatalf("first read: %q, %v", first[:n], err)
	}
	got := make(chan struct{})
	var err error
	go func() { _, err = io.ReadAll(body); close(got) }()
	advanceUntil(t, clk, 5*time.Second, time.Minute, got)
	return err
}

const testGrace = time.Hour

func TestIdleTimeoutEndsStalledBody(t *testing.T) {
	t.Parallel()
	url, ended := stallingUpstream(t, "data: {}\n\n")
	clk := clock.NewFake(time.Unix(0, 0))
	ad := &OpenAI{BaseURL: url, IdleTimeout: 10 * time.Second, Clock: clk, AbortGrace: testGrace}
	resp, err := ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	err2 := readPastStall(t, clk, resp.Body, "data:")
	var pe *Error
	if !errors.As(err2, &pe) || !pe.Timeout {
		t.Fatalf("read after the stall: %v; want a timeout *Error", err2)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	// The upstream's handler saw the call end before Close returned.
	select {
	case <-ended:
	default:
		t.Fatal("Close returned while the upstream still held the request")
	}
}

// TestHeaderBoundOnceHeadersIn: once the headers are in, the header
// bound's time passing ends nothing (the timer set for it may still
// fire), and the idle bound still ends a stalled body.
func TestHeaderBoundOnceHeadersIn(t *testing.T) {
	t.Parallel()
	url, _ := stallingUpstream(t, "data: {}\n\n")
	clk := clock.NewFake(time.Unix(0, 0))
	ad := &OpenAI{BaseURL: url, Timeout: 30 * time.Second, IdleTimeout: 10 * time.Minute, Clock: clk, AbortGrace: testGrace}
	resp, err := ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 4096)
	if n, err := resp.Body.Read(first); err != nil || !strings.HasPrefix(string(first[:n]), "data:") {
		t.Fatalf("first read: %q, %v", first[:n], err)
	}
	clk.Advance(time.Minute) // runs every timer due, the header bound's included
	x := resp.Body.(*body).x
	x.mu.Lock()
	aborted := x.err
	x.mu.Unlock()
	if aborted != nil {
		t.Fatalf("the call was aborted past the header bound, its headers in: %v", aborted)
	}
	got := make(chan struct{})
	var rerr error
	go func() { _, rerr = io.ReadAll(resp.Body); close(got) }()
	advanceUntil(t, clk, time.Minute, time.Hour, got)
	var pe *Error
	if !errors.As(rerr, &pe) || !pe.Timeout || !strings.Contains(pe.Error(), "nothing received") {
		t.Fatalf("read after the stall: %v; want the idle bound's timeout", rerr)
	}
}

func TestHeaderTimeout(t *testing.T) {
	t.Parallel()
	arrived, released := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		<-r.Context().Done()
		close(released)
	}))
	t.Cleanup(srv.Close)
	clk := clock.NewFake(time.Unix(0, 0))
	ad := &OpenAI{BaseURL: srv.URL, Timeout: 30 * time.Second, Clock: clk, AbortGrace: testGrace}
	errc := make(chan error, 1)
	go func() {
		_, err := ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{}`)})
		errc <- err
	}()
	// The bound passes only once the upstream holds the request: a bound
	// that passes before the request goes out cancels it unsent, and
	// there is then no upstream to let go of it.
	<-arrived
	got := make(chan struct{})
	var err error
	go func() { err = <-errc; close(got) }()
	advanceUntil(t, clk, 10*time.Second, time.Minute, got)
	var pe *Error
	if !errors.As(err, &pe) || !pe.Timeout || !pe.Retryable() {
		t.Fatalf("Do = %v; want a retryable timeout", err)
	}
	// The upstream lets go of the request: the abort reached it. (Its
	// handler sees that a moment after the connection's end, which Do
	// waits for.)
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream still holds the request after Do returned")
	}
}

// TestCallTimeout: an answer that trickles in, never idle for long, is
// still cut at the call's bound.
func TestCallTimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := io.WriteString(w, "data: {}\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	clk := clock.NewFake(time.Unix(0, 0))
	// The idle bound is past the call's: the fake clock moves faster than
	// the trickle on a loaded machine, and only the call's bound is
	// under test here.
	ad := &OpenAI{BaseURL: srv.URL, IdleTimeout: 10 * time.Minute, CallTimeout: 5 * time.Minute, Clock: clk, AbortGrace: testGrace}
	resp, err := ad.Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan struct{})
	var rerr error
	go func() {
		_, rerr = io.Copy(io.Discard, resp.Body)
		close(got)
	}()
	advanceUntil(t, clk, 30*time.Second, 10*time.Minute, got)
	var pe *Error
	if !errors.As(rerr, &pe) || !pe.Timeout || !strings.Contains(pe.Error(), "longer than 5m0s") {
		t.Fatalf("read = %v; want the call's timeout", rerr)
	}
}

// TestCancelWaitsForUpstream: when the caller goes away mid-answer, the
// body's read and Close return only once the upstream has let go of the
// request, so that capacity released after them is really free.
func TestCancelWaitsForUpstream(t *testing.T) {
	t.Parallel()
	for range 20 {
		url, ended := stallingUpstream(t, "data: {}\n\n")
		ctx, cancel := context.WithCancel(t.Context())
		resp, err := (&OpenAI{BaseURL: url, AbortGrace: testGrace}).Do(ctx, Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: %v; want context.Canceled", err)
		}
		resp.Body.Close()
		select {
		case <-ended:
		default:
			t.Fatal("the call ended while the upstream still held the request")
		}
	}
}

func TestCredentialRefusalInWeirsWords(t *testing.T) {
	t.Parallel()
	const key = "sk-proj-s3cr3tKEYvalue1234"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		cred   bool
	}{
		{"401", 401, `{"error":{"message":"Incorrect API key provided: sk-proj-****1234.","code":"invalid_api_key"}}`, true},
		{"403", 403, `forbidden`, true},
		{"400 quoting the key", 400, `bad request for key ` + key, true},
		{"400 about the key", 400, `{"error":{"message":"API key not valid. Please pass a valid API key."}}`, true},
		{"400 of the client", 400, `{"error":{"message":"'messages' must hold at least one message."}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			_, err := (&OpenAI{BaseURL: srv.URL, APIKey: key}).Do(t.Context(), Call{Path: "/chat/completions", Body: []byte(`{}`)})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Do = %v", err)
			}
			if pe.Credential != tc.cred || pe.Retryable() != tc.cred {
				t.Fatalf("Credential %v, Retryable %v; want %v", pe.Credential, pe.Retryable(), tc.cred)
			}
			if tc.cred && (len(pe.Body) != 0 || strings.Contains(pe.Error(), "1234") || strings.Contains(pe.Error(), "API key")) {
				t.Errorf("a credential refusal carries the upstream's words: %q, body %q", pe.Error(), pe.Body)
			}
			// The asynchronous adapter says the same.
			_, err = (&OpenAIVideo{BaseURL: srv.URL, APIKey: key}).Submit(t.Context(), AsyncCall{Body: []byte(`{}`)})
			if !errors.As(err, &pe) || pe.Credential != tc.cred {
				t.Fatalf("Submit = %v; want Credential %v", err, tc.cred)
			}
			if tc.cred && strings.Contains(pe.Error(), "1234") {
				t.Errorf("Submit's error quotes the upstream: %q", pe.Error())
			}
		})
	}
}

// TestConnectionReusedAfterLateAbort: a call whose body was read to its
// end is over; a cancellation that comes before Close (a client hanging
// up right after the last chunk) must not shut its connection, which the
// transport has already handed back for the next call. The test counts
// Weir's shutdowns rather than the transport's reuses: net/http also
// drops a connection whose request write it did not hear of within 50 ms,
// which a loaded machine now and then makes it do.
func TestConnectionReusedAfterLateAbort(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	var shuts atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{TCPConn: c.(*net.TCPConn), shuts: &shuts}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	ad := &OpenAI{BaseURL: srv.URL, AbortGrace: testGrace, Client: &http.Client{Transport: tr}}
	for i := range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		resp, err := ad.Do(ctx, Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatalf("call %d: read: %v", i, err)
		}
		// The abort the cancellation starts, run here rather than on
		// context.AfterFunc's goroutine, so that it surely comes first.
		resp.Body.(*body).x.abort(context.Canceled)
		cancel()
		resp.Body.Close()
	}
	if n := shuts.Load(); n != 0 {
		t.Fatalf("Weir shut %d connections of calls that had ended", n)
	}
}

// countingConn counts the half-closes Weir makes of its connection.
type countingConn struct {
	*net.TCPConn
	shuts *atomic.Int32
}

func (c *countingConn) CloseWrite() error {
	c.shuts.Add(1)
	return c.TCPConn.CloseWrite()
}

// TestShutConnectionNotReused: an aborted call whose upstream still ends
// its answer cleanly leaves a connection Weir has shut its side of; the
// next call must not be sent on it.
func TestShutConnectionNotReused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client hung up: end the answer cleanly
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	ad := &OpenAI{BaseURL: srv.URL, AbortGrace: testGrace}
	for i := range 10 {
		ctx, cancel := context.WithCancel(t.Context())
		resp, err := ad.Do(ctx, Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
			t.Fatalf("call %d: first read: %v", i, err)
		}
		cancel()
		resp.Body.Close()
	}
}
