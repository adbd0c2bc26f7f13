package bench

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// gatedUpstream holds every request until release is closed, counting
// those in flight and their peak.
type gatedUpstream struct {
	release  chan struct{}
	inFlight atomic.Int64
	peak     atomic.Int64
	served   atomic.Int64
}

func (u *gatedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := u.inFlight.Add(1)
	defer u.inFlight.Add(-1)
	for p := u.peak.Load(); n > p && !u.peak.CompareAndSwap(p, n); p = u.peak.Load() {
	}
	<-u.release
	u.served.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// inProcess is a client whose requests h serves in the caller's
// goroutine, without a network: inside a synctest bubble, a request
// waiting anywhere on the way is durably blocked.
func inProcess(h http.Handler) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Result(), nil
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestFloorHoldsAtMostLimitUpstream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const limit, n = 2, 6
		up := &gatedUpstream{release: make(chan struct{})}
		floor := floorHandler("http://mock/v1/chat/completions", limit, inProcess(up))
		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				floor.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(waiterBody(i))))
				codes[i] = rec.Code
			})
		}
		// Every request is blocked: limit of them upstream, the others on
		// the floor's slots.
		synctest.Wait()
		if got := up.inFlight.Load(); got != limit {
			t.Errorf("with %d requests waiting, %d upstream, want the limit %d", n, got, limit)
		}
		close(up.release)
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("request %d answered %d", i, c)
			}
		}
		if p := up.peak.Load(); p != limit {
			t.Errorf("peak upstream %d, want the limit %d", p, limit)
		}
		if s := up.served.Load(); s != n {
			t.Errorf("upstream served %d, want %d", s, n)
		}
	})
}

func TestFloorRejectsABadBody(t *testing.T) {
	t.Parallel()
	up := &gatedUpstream{release: make(chan struct{})}
	close(up.release)
	floor := floorHandler("http://mock/v1/chat/completions", 1, inProcess(up))
	for _, body := range []string{`not json`, `{"messages":[]}`} {
		rec := httptest.NewRecorder()
		floor.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("body %q: status %d, want 400", body, rec.Code)
		}
	}
	if s := up.served.Load(); s != 0 {
		t.Errorf("a bad body reached the upstream %d times", s)
	}
}
