package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// barrier is an upstream that holds every request until n are in it at
// once, then lets them all on to next: a limit that let fewer run
// together would keep them there.
type barrier struct {
	n    int
	next http.Handler

	mu      sync.Mutex
	arrived int
	full    chan struct{}
}

func (b *barrier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.full)
	}
	b.mu.Unlock()
	select {
	case <-b.full:
	case <-time.After(10 * time.Second): // a guard: only a held-back request waits here
		http.Error(w, "the others never came", http.StatusServiceUnavailable)
		return
	}
	b.next.ServeHTTP(w, r)
}

// TestShadowLimitRunsEveryone: a platform model with concurrency 1 in
// shadow lets 5 requests run upstream at once, while its scope counts
// the 4 that would have waited.
func TestShadowLimitRunsEveryone(t *testing.T) {
	t.Parallel()
	const n = 5
	up := &barrier{n: n, next: mock.New(mock.Config{}), full: make(chan struct{})}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		onlyUp(c)
		c.Platforms[0].BaseURL = srv.URL + "/v1"
		c.PlatformModels[0].Limits = weir.Limits{Concurrency: 1, Shadow: true}
	}})

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		c := b.chat(t)
		c.RequestID = fmt.Sprintf("req_%d", i)
		wg.Go(func() {
			var out recordedAnswer
			if err := b.svc.Serve(t.Context(), c, &out); err != nil {
				errs <- fmt.Errorf("%s: %w", c.RequestID, err)
				return
			}
			if out.head == nil || out.head.Status != http.StatusOK {
				errs <- fmt.Errorf("%s: head %+v", c.RequestID, out.head)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := b.scope(t, weir.PlatformModelScope("up/m"))
	if !st.Config.Shadow || st.Config.Limit != 1 {
		t.Errorf("scope config %+v; want a shadow limit of 1", st.Config)
	}
	if st.ShadowWaits != 4 || st.ShadowRefusals != 0 || st.Used != 0 || st.ShadowQueued != 0 {
		t.Errorf("after the requests: shadow waits %d, refusals %d, used %d, would be queued %d; want 4, 0, 0, 0",
			st.ShadowWaits, st.ShadowRefusals, st.Used, st.ShadowQueued)
	}
	var views []ScopeView
	for _, v := range b.svc.Scopes(t.Context()) {
		if v.Name == weir.PlatformModelScope("up/m") {
			views = append(views, v)
		}
	}
	if len(views) != 1 || !views[0].Shadow || views[0].Would == nil || views[0].Would.Waits != 4 {
		t.Errorf("scope views of up/m: %+v; want one in shadow with 4 waits", views)
	}
}
