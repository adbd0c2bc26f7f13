package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// holdEngine records the Hold of each request it is asked to admit.
type holdEngine struct {
	admission.Engine
	mu    sync.Mutex
	holds []time.Duration
}

func (e *holdEngine) TryAcquire(ctx context.Context, req admission.Request) (admission.Lease, error) {
	e.mu.Lock()
	e.holds = append(e.holds, req.Hold)
	e.mu.Unlock()
	return e.Engine.TryAcquire(ctx, req)
}

// TestLeaseHoldIsTheCallTimeout: a request's lease says how long its
// call may run — the longest call timeout of its candidates' platforms —
// so that a fleet can hold a silent replica's capacity that long; a
// candidate without a call timeout leaves it unbounded.
func TestLeaseHoldIsTheCallTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		server time.Duration
		up2    time.Duration
		want   time.Duration
	}{
		{"the longer platform's", 0, 2 * time.Minute, 10 * time.Minute},
		{"a platform's own", 30 * time.Second, 2 * time.Minute, 2 * time.Minute},
		{"none when one has none", -1, 2 * time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			he := &holdEngine{}
			b := setup(t, setupOpts{
				cfg:    Config{UpstreamCallTimeout: tc.server},
				engine: func(e admission.Engine) admission.Engine { he.Engine = e; return he },
				catalog: func(c *weir.Catalog) {
					c.Platforms[1].CallTimeout = tc.up2
				},
			})
			if err := b.svc.Serve(t.Context(), b.chat(t), &recordedAnswer{}); err != nil {
				t.Fatal(err)
			}
			he.mu.Lock()
			defer he.mu.Unlock()
			if len(he.holds) == 0 || he.holds[0] != tc.want {
				t.Fatalf("holds asked %v; want %v first", he.holds, tc.want)
			}
		})
	}
}
