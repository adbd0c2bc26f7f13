package webhook_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/webhook"
)

func fixedNow() time.Time { return time.Unix(1_750_000_000, 0) }

// testClock is a clock the test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// received is one request as a receiver saw it.
type received struct {
	header    http.Header
	body      []byte
	verifyErr error
}

// receiver is a webhook endpoint on loopback that verifies each request with
// its own Signer and answers with the next of its statuses (the last
// repeating).
type receiver struct {
	t        *testing.T
	srv      *httptest.Server
	signer   *webhook.Signer
	now      func() time.Time
	statuses []int
	respond  http.Header

	mu  sync.Mutex
	got []received
}

func newReceiver(t *testing.T, secret string, now func() time.Time, statuses ...int) *receiver {
	t.Helper()
	r := &receiver{t: t, signer: mustSigner(t, secret), now: now, statuses: statuses, respond: http.Header{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		r.t.Errorf("receiver: read body: %v", err)
	}
	r.mu.Lock()
	r.got = append(r.got, received{header: req.Header.Clone(), body: body, verifyErr: r.signer.Verify(req.Header, body, r.now(), 0)})
	status := http.StatusNoContent
	if n := len(r.statuses); n > 0 {
		status = r.statuses[min(len(r.got)-1, n-1)]
	}
	r.mu.Unlock()
	for k, v := range r.respond {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "ok")
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func TestSendDelivers(t *testing.T) {
	t.Parallel()
	secret := mustSecret(t)
	rcv := newReceiver(t, secret, fixedNow, http.StatusOK)
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true, Now: fixedNow})
	body := []byte(`{"type":"task.succeeded","timestamp":"2025-06-15T15:06:40Z","data":{"id":"task_1"}}`)

	a, err := sender.Send(context.Background(), webhook.Message{URL: rcv.srv.URL + "/hooks/weir", ID: "evt_01J0", Body: body, Signer: mustSigner(t, secret)})
	if err != nil || a.Outcome != webhook.Delivered || a.StatusCode != http.StatusOK {
		t.Fatalf("Send = %+v, %v; want delivered 200", a, err)
	}
	if !a.Timestamp.Equal(fixedNow()) {
		t.Errorf("Attempt.Timestamp = %v, want %v", a.Timestamp, fixedNow())
	}
	got := rcv.requests()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	r := got[0]
	if r.verifyErr != nil {
		t.Errorf("signature does not verify at the receiver: %v", r.verifyErr)
	}
	if string(r.body) != string(body) {
		t.Errorf("body %q, want %q", r.body, body)
	}
	for name, want := range map[string]string{
		"Content-Type":          "application/json",
		"User-Agent":            webhook.DefaultUserAgent,
		webhook.HeaderID:        "evt_01J0",
		webhook.HeaderTimestamp: strconv.FormatInt(fixedNow().Unix(), 10),
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if sig := r.header.Get(webhook.HeaderSignature); !strings.HasPrefix(sig, "v1,") {
		t.Errorf("webhook-signature = %q", sig)
	}
}

// TestRetriesKeepTheID drives a delivery through failures with the retry
// schedule and a hand-moved clock: every attempt carries the same webhook-id
// and a fresh timestamp, and every one verifies at the receiver.
func TestRetriesKeepTheID(t *testing.T) {
	t.Parallel()
	secret := mustSecret(t)
	clock := &testClock{t: fixedNow()}
	rcv := newReceiver(t, secret, clock.Now, http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusOK)
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true, Now: clock.Now})
	schedule := webhook.DefaultSchedule
	schedule.Rand = rand.New(rand.NewPCG(4, 2))
	msg := webhook.Message{URL: rcv.srv.URL, ID: "evt_retry", Body: []byte(`{"n":1}`), Signer: mustSigner(t, secret)}

	var outcomes []webhook.Outcome
	var waits []time.Duration
	for attempts := 0; ; {
		a, err := sender.Send(context.Background(), msg)
		attempts++
		outcomes = append(outcomes, a.Outcome)
		if a.Outcome == webhook.Retryable && !errors.Is(err, webhook.ErrStatus) {
			t.Fatalf("attempt %d: %v, want ErrStatus", attempts, err)
		}
		if a.Outcome != webhook.Retryable {
			break
		}
		d, ok := schedule.NextDelay(attempts)
		if !ok {
			t.Fatal("schedule exhausted")
		}
		waits = append(waits, d)
		clock.Advance(d)
	}
	if want := []webhook.Outcome{webhook.Retryable, webhook.Retryable, webhook.Delivered}; !equalOutcomes(outcomes, want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	got := rcv.requests()
	if len(got) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(got))
	}
	var prev int64
	for i, r := range got {
		if id := r.header.Get(webhook.HeaderID); id != "evt_retry" {
			t.Errorf("attempt %d: webhook-id %q, want evt_retry", i+1, id)
		}
		if r.verifyErr != nil {
			t.Errorf("attempt %d: signature does not verify: %v", i+1, r.verifyErr)
		}
		ts, _ := strconv.ParseInt(r.header.Get(webhook.HeaderTimestamp), 10, 64)
		if i > 0 {
			// The timestamp is the attempt's, in whole seconds.
			if gap := time.Duration(ts-prev) * time.Second; gap <= waits[i-1]-time.Second || gap >= waits[i-1]+time.Second {
				t.Errorf("attempt %d came %v after the one before, want %v", i+1, gap, waits[i-1])
			}
		}
		prev = ts
	}
}

func equalOutcomes(a, b []webhook.Outcome) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStatusClassification(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("status"))
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true})
	signer := mustSigner(t, mustSecret(t))
	tests := []struct {
		status  int
		outcome webhook.Outcome
		err     error
	}{
		{200, webhook.Delivered, nil},
		{201, webhook.Delivered, nil},
		{202, webhook.Delivered, nil},
		{204, webhook.Delivered, nil},
		{410, webhook.Gone, webhook.ErrGone},
		{500, webhook.Retryable, webhook.ErrStatus},
		{502, webhook.Retryable, webhook.ErrStatus},
		{504, webhook.Retryable, webhook.ErrStatus},
		{400, webhook.Retryable, webhook.ErrStatus},
		{401, webhook.Retryable, webhook.ErrStatus},
		{404, webhook.Retryable, webhook.ErrStatus},
		{429, webhook.Retryable, webhook.ErrStatus},
		{302, webhook.Retryable, webhook.ErrStatus},
		{307, webhook.Retryable, webhook.ErrStatus},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			a, err := sender.Send(context.Background(), webhook.Message{
				URL: srv.URL + "/?status=" + strconv.Itoa(tt.status), ID: "evt_status", Body: []byte(`{}`), Signer: signer,
			})
			if a.Outcome != tt.outcome || a.StatusCode != tt.status {
				t.Errorf("Send = %+v, want %v with status %d", a, tt.outcome, tt.status)
			}
			if tt.err == nil && err != nil || tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("error %v, want %v", err, tt.err)
			}
			if tt.outcome == webhook.Delivered {
				return
			}
			if errors.Is(err, webhook.ErrForbiddenAddress) {
				t.Errorf("status failure reported as forbidden: %v", err)
			}
		})
	}
	if webhook.Gone.String() != "gone" || webhook.Outcome(0).String() != "unknown" {
		t.Errorf("Outcome names: %q %q", webhook.Gone, webhook.Outcome(0))
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	secret := mustSecret(t)
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true, Now: fixedNow})
	for value, want := range map[string]time.Duration{
		"120": 2 * time.Minute,
		fixedNow().Add(90 * time.Second).UTC().Format(http.TimeFormat): 90 * time.Second,
		fixedNow().Add(-time.Hour).UTC().Format(http.TimeFormat):       0,
		"soon": 0,
		"-5":   0,
	} {
		rcv := newReceiver(t, secret, fixedNow, http.StatusTooManyRequests)
		rcv.respond.Set("Retry-After", value)
		a, _ := sender.Send(context.Background(), webhook.Message{URL: rcv.srv.URL, ID: "evt_ra", Body: []byte(`{}`), Signer: mustSigner(t, secret)})
		if a.Outcome != webhook.Retryable || a.RetryAfter != want {
			t.Errorf("Retry-After %q: %+v, want retryable after %v", value, a, want)
		}
	}
}

func TestTransportFailuresAreRetryable(t *testing.T) {
	t.Parallel()
	signer := mustSigner(t, mustSecret(t))

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		sender := webhook.NewSender(webhook.Config{AllowLoopback: true})
		a, err := sender.Send(context.Background(), webhook.Message{URL: "http://" + addr + "/", ID: "evt_conn", Body: []byte(`{}`), Signer: signer})
		if a.Outcome != webhook.Retryable || a.StatusCode != 0 || err == nil || errors.Is(err, webhook.ErrForbiddenAddress) {
			t.Fatalf("Send = %+v, %v; want retryable with a connection error", a, err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) }) // runs first: frees the handler so Close can return
		sender := webhook.NewSender(webhook.Config{AllowLoopback: true, Timeout: 100 * time.Millisecond})
		a, err := sender.Send(context.Background(), webhook.Message{URL: srv.URL, ID: "evt_slow", Body: []byte(`{}`), Signer: signer})
		if a.Outcome != webhook.Retryable || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 100ms") {
			t.Fatalf("Send = %+v, %v; want retryable timeout", a, err)
		}
	})

	t.Run("caller cancelled", func(t *testing.T) {
		t.Parallel()
		rcv := newReceiver(t, mustSecret(t), fixedNow)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		sender := webhook.NewSender(webhook.Config{AllowLoopback: true})
		a, err := sender.Send(ctx, webhook.Message{URL: rcv.srv.URL, ID: "evt_cancel", Body: []byte(`{}`), Signer: signer})
		if a.Outcome != webhook.Retryable || !errors.Is(err, context.Canceled) {
			t.Fatalf("Send = %+v, %v; want retryable, context.Canceled", a, err)
		}
	})
}

func TestSendRefusesInvalidMessages(t *testing.T) {
	t.Parallel()
	secret := mustSecret(t)
	rcv := newReceiver(t, secret, fixedNow)
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true})
	signer := mustSigner(t, secret)
	valid := webhook.Message{URL: rcv.srv.URL, ID: "evt_ok", Body: []byte(`{}`), Signer: signer}
	tests := []struct {
		name string
		edit func(*webhook.Message)
		want error
	}{
		{"empty id", func(m *webhook.Message) { m.ID = "" }, webhook.ErrInvalidMessage},
		{"id with a dot", func(m *webhook.Message) { m.ID = "evt.1" }, webhook.ErrInvalidMessage},
		{"id with a space", func(m *webhook.Message) { m.ID = "evt 1" }, webhook.ErrInvalidMessage},
		{"id with a newline", func(m *webhook.Message) { m.ID = "evt\r\nX-Injected: 1" }, webhook.ErrInvalidMessage},
		{"id too long", func(m *webhook.Message) { m.ID = strings.Repeat("a", 257) }, webhook.ErrInvalidMessage},
		{"no signer", func(m *webhook.Message) { m.Signer = nil }, webhook.ErrInvalidMessage},
		{"body not JSON", func(m *webhook.Message) { m.Body = []byte("hello") }, webhook.ErrInvalidMessage},
		{"ftp URL", func(m *webhook.Message) { m.URL = "ftp://" + strings.TrimPrefix(rcv.srv.URL, "http://") }, webhook.ErrInvalidURL},
		{"userinfo", func(m *webhook.Message) { m.URL = strings.Replace(rcv.srv.URL, "://", "://u:p@", 1) }, webhook.ErrInvalidURL},
	}
	for _, tt := range tests {
		msg := valid
		tt.edit(&msg)
		a, err := sender.Send(context.Background(), msg)
		if a.Outcome != webhook.Refused || !errors.Is(err, tt.want) {
			t.Errorf("%s: Send = %v, %v; want refused, %v", tt.name, a.Outcome, err, tt.want)
		}
	}
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("%d invalid messages reached the receiver", n)
	}
	if a, err := sender.Send(context.Background(), valid); a.Outcome != webhook.Delivered {
		t.Fatalf("valid message: %v, %v", a.Outcome, err)
	}
}

// TestLocalhostWithAllowLoopback: tests and demos reach a local receiver by
// name through the system resolver (/etc/hosts) when loopback is allowed.
func TestLocalhostWithAllowLoopback(t *testing.T) {
	t.Parallel()
	secret := mustSecret(t)
	rcv := newReceiver(t, secret, fixedNow)
	u, _ := url.Parse(rcv.srv.URL)
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true, Now: fixedNow})
	a, err := sender.Send(context.Background(), webhook.Message{URL: "http://localhost:" + u.Port() + "/", ID: "evt_local", Body: []byte(`{}`), Signer: mustSigner(t, secret)})
	if a.Outcome != webhook.Delivered {
		t.Fatalf("Send = %+v, %v; want delivered", a, err)
	}
	if got := rcv.requests(); len(got) != 1 || got[0].verifyErr != nil {
		t.Fatalf("receiver: %+v", got)
	}
}
