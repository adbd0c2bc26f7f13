package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/loadgen"
)

func TestMedianRowTakesEachColumnsMedian(t *testing.T) {
	t.Parallel()
	r := func(rate float64, p99 time.Duration, late int) row {
		return row{rate: rate, late: late, lat: loadgen.Percentiles{P99: p99}}
	}
	odd := medianRow([]row{r(3, 9*time.Millisecond, 1), r(1, 2*time.Millisecond, 7), r(2, 5*time.Millisecond, 4)})
	if odd.rate != 2 || odd.lat.P99 != 5*time.Millisecond || odd.late != 4 {
		t.Errorf("odd: rate %v, p99 %s, late %d; want 2, 5ms, 4", odd.rate, odd.lat.P99, odd.late)
	}
	even := medianRow([]row{r(1, 2*time.Millisecond, 0), r(4, 8*time.Millisecond, 0), r(2, 4*time.Millisecond, 0), r(3, 6*time.Millisecond, 0)})
	if even.rate != 2.5 || even.lat.P99 != 5*time.Millisecond {
		t.Errorf("even: rate %v, p99 %s; want 2.5, 5ms", even.rate, even.lat.P99)
	}
}

func TestOverheadVerdictOnWeirsLine(t *testing.T) {
	t.Parallel()
	lat := func(p50, p99 time.Duration) row { return row{lat: loadgen.Percentiles{P50: p50, P99: p99}} }
	for _, tc := range []struct {
		weir row
		want string
	}{
		{lat(1500*time.Microsecond, 3*time.Millisecond), "p50 1.00x, p99 1.00x (target <= 1.5x: met)"},
		{lat(1500*time.Microsecond, 4*time.Millisecond), "p50 1.00x, p99 1.50x (target <= 1.5x: met)"},
		{lat(2*time.Millisecond, 3*time.Millisecond), "p50 2.00x, p99 1.00x (target <= 1.5x: missed)"},
	} {
		rows := map[string]row{
			"direct": lat(time.Millisecond, time.Millisecond),
			"proxy":  lat(1500*time.Microsecond, 3*time.Millisecond),
			"weir":   tc.weir,
		}
		var b strings.Builder
		printOverhead(&b, "weir", rows)
		if !strings.Contains(b.String(), "weir/proxy added: "+tc.want) {
			t.Errorf("weir's line %q, want it to end %q", b.String(), tc.want)
		}
	}
}

func TestOverheadConfigErrors(t *testing.T) {
	t.Parallel()
	valid := func() OverheadConfig {
		return OverheadConfig{
			Weir: Weir{Start: func(ctx context.Context, _ *config.Config) (Gateway, error) { return nil, ctx.Err() }, CreateKey: noKey},
			Rate: 100, Duration: time.Second, Rounds: 1, Concurrency: 8, Connections: 8, ProfileTarget: "weir",
		}
	}
	if err := valid().validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		change func(*OverheadConfig)
		want   string
	}{
		{func(c *OverheadConfig) { c.Weir.Start = nil }, "Weir.Start"},
		{func(c *OverheadConfig) { c.Duration = 0 }, "--duration"},
		{func(c *OverheadConfig) { c.Warmup = -time.Second }, "--warmup"},
		{func(c *OverheadConfig) { c.Rounds = 0 }, "--rounds"},
		{func(c *OverheadConfig) { c.Rate = 0 }, "--rate"},
		{func(c *OverheadConfig) { c.Concurrency = 0 }, "--concurrency"},
		{func(c *OverheadConfig) { c.MaxRPS, c.Connections = true, 0 }, "--connections"},
		{func(c *OverheadConfig) { c.Stream = 1.5 }, "--stream"},
		{func(c *OverheadConfig) { c.ProfileTarget = "nginx" }, "--profile-target"},
	} {
		c := valid()
		tc.change(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
}
