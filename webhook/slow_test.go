package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir/webhook"
)

// TestSlowReceiverGetsShortTimeout: after an attempt to a receiver runs
// out of Timeout, the tenant's next attempts to it run under SlowTimeout,
// but for one at a time (the probe) under Timeout; another tenant's
// attempts to the same host are not shortened; an answer forgets it.
func TestSlowReceiverGetsShortTimeout(t *testing.T) {
	t.Parallel()
	const full, short = 250 * time.Millisecond, 20 * time.Millisecond
	var answer atomic.Bool
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	sender := webhook.NewSender(webhook.Config{AllowLoopback: true, Timeout: full, SlowTimeout: short})
	signer := mustSigner(t, mustSecret(t))
	send := func(tenant string) (webhook.Attempt, error) {
		return sender.Send(context.Background(), webhook.Message{URL: srv.URL + "/hook", ID: "evt_slow", Body: []byte(`{}`), Signer: signer, Tenant: tenant})
	}
	background := func(tenant string) <-chan webhook.Attempt {
		ch := make(chan webhook.Attempt, 1)
		go func() { a, _ := send(tenant); ch <- a }()
		<-arrived // the request is at the receiver
		return ch
	}

	a, err := send("a")
	<-arrived
	if !a.TimedOut || a.Timeout != full || a.Outcome != webhook.Retryable || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "timed out after 250ms") {
		t.Fatalf("first attempt: %+v, %v; want timed out after the full timeout", a, err)
	}

	// a's receiver is slow: one probe runs under the full timeout, the
	// others under the short one; b's attempts to the same host do not.
	probe := background("a")
	a, err = send("a")
	<-arrived
	if !a.TimedOut || a.Timeout != short || !strings.Contains(err.Error(), "timed out after 20ms") {
		t.Errorf("attempt beside the probe: %+v, %v; want timed out after the short timeout", a, err)
	}
	other := background("b")
	if a := <-probe; !a.TimedOut || a.Timeout != full {
		t.Errorf("probe: %+v, want the full timeout", a)
	}
	if a := <-other; a.Timeout != full {
		t.Errorf("another tenant's attempt to the same host: %+v, want the full timeout", a)
	}

	// Still slow after the probe timed out; an answer forgets it.
	answer.Store(true)
	if a, err := send("a"); a.Outcome != webhook.Delivered || a.Timeout != full || a.TimedOut {
		t.Fatalf("probe to the receiver now answering: %+v, %v; want delivered under the full timeout", a, err)
	}
	answer.Store(false)
	first, second := background("a"), background("a")
	if a, b := <-first, <-second; a.Timeout != full || b.Timeout != full {
		t.Errorf("after an answer: timeouts %s and %s, want both full", a.Timeout, b.Timeout)
	}
}
