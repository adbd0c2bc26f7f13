package bench

import (
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sentAt is a send-time table: request i sent at times[i] ms.
func sentAt(times ...int) []atomic.Int64 {
	sent := make([]atomic.Int64, len(times))
	for i, ms := range times {
		sent[i].Store(int64(time.Duration(ms) * time.Millisecond))
	}
	return sent
}

func TestOrderAgreement(t *testing.T) {
	t.Parallel()
	sent := sentAt(0, 10, 20, 30, 40)
	for _, tc := range []struct {
		name    string
		order   []int
		wantRho float64
		wantGap time.Duration
	}{
		{"send order", []int{0, 1, 2, 3, 4}, 1, 0},
		{"reversed", []int{4, 3, 2, 1, 0}, -1, 40 * time.Millisecond},
		{"one passed", []int{1, 0, 2, 3, 4}, 0.9, 10 * time.Millisecond},
		{"warm-up and unknown numbers left out", []int{-1, 0, 1, 7, 2, 3, 4}, 1, 0},
		{"too few to rank", []int{3}, 1, 0},
	} {
		rho, gap := orderAgreement(tc.order, sent)
		if math.Abs(rho-tc.wantRho) > 1e-9 || gap != tc.wantGap {
			t.Errorf("%s: rho %v, gap %s; want %v, %s", tc.name, rho, gap, tc.wantRho, tc.wantGap)
		}
	}
}

func TestSyncWaitersConfigErrors(t *testing.T) {
	t.Parallel()
	valid := func() SyncWaitersConfig {
		return SyncWaitersConfig{
			Weir: Weir{Exe: "/bin/weir", ServeArgs: []string{"serve"}, FloorExe: "/bin/weir-bench", FloorArgs: []string{"sync-waiters-floor"},
				CreateKey: noKey},
			Requests: 10, Limit: 2, Latency: time.Millisecond, Timeout: time.Minute, Targets: []string{"floor", "weir"},
		}
	}
	if err := valid().validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		change func(*SyncWaitersConfig)
		want   string
	}{
		{func(c *SyncWaitersConfig) { c.Weir.Exe = "" }, "Weir.Exe"},
		{func(c *SyncWaitersConfig) { c.Weir.FloorArgs = nil }, "Weir.FloorArgs"},
		{func(c *SyncWaitersConfig) { c.Weir.FloorExe = "" }, "Weir.FloorExe"},
		{func(c *SyncWaitersConfig) { c.Requests = 0 }, "--requests"},
		{func(c *SyncWaitersConfig) { c.Limit = 0 }, "--limit"},
		{func(c *SyncWaitersConfig) { c.Rate = -1 }, "--rate"},
		{func(c *SyncWaitersConfig) { c.Timeout = 0 }, "--timeout"},
		{func(c *SyncWaitersConfig) { c.Targets = []string{"floor", "nginx"} }, `"nginx"`},
		{func(c *SyncWaitersConfig) { c.Targets = nil }, "--targets"},
	} {
		c := valid()
		tc.change(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
	// Weir alone needs no floor.
	c := valid()
	c.Weir.FloorArgs, c.Targets = nil, []string{"weir"}
	if err := c.validate(); err != nil {
		t.Errorf("weir alone, without FloorArgs: %v", err)
	}
}
