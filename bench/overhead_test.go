package bench

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
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
		{lat(1500*time.Microsecond, 3*time.Millisecond), "p50 1.00x, p99 1.00x (target <= 1.1x: met)"},
		{lat(1500*time.Microsecond, 4*time.Millisecond), "p50 1.00x, p99 1.50x (target <= 1.1x: missed)"},
		{lat(1550*time.Microsecond, 3200*time.Microsecond), "p50 1.10x, p99 1.10x (target <= 1.1x: met)"},
		{lat(2*time.Millisecond, 3*time.Millisecond), "p50 2.00x, p99 1.00x (target <= 1.1x: missed)"},
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
		{func(c *OverheadConfig) { c.ProfileTarget = "edge" }, "--edge"},
		{func(c *OverheadConfig) { c.Edge = true }, "Weir.CreateNode"},
		{func(c *OverheadConfig) { c.Interleave = true }, "--interleave needs --dialects"},
		{func(c *OverheadConfig) { c.Interleave, c.Dialects, c.MaxRPS = true, true, true }, "not --max-rps"},
		{func(c *OverheadConfig) { c.Interleave, c.Dialects, c.Edge = true, true, true }, "not with --edge"},
		{func(c *OverheadConfig) { c.Interleave, c.Dialects, c.ConsoleWatcher = true, true, []string{"watch"} }, "--console-watcher"},
		{func(c *OverheadConfig) { c.ProfileTarget = "budgets" }, "--profile-target budgets needs --budgets"},
		{func(c *OverheadConfig) { c.Interleave, c.Budgets, c.MaxRPS = true, true, true }, "not --max-rps"},
		{func(c *OverheadConfig) { c.OutOfProcess, c.Dialects = true, true }, "--out-of-process drives direct, proxy and weir alone"},
		{func(c *OverheadConfig) { c.OutOfProcess = true }, "Weir.ProxyArgs"},
		{func(c *OverheadConfig) {
			c.OutOfProcess, c.Weir.FloorExe, c.Weir.ProxyArgs, c.MemProfile = true, "weir-bench", []string{"overhead-proxy"}, "mem.prof"
		}, "--profile-target direct"},
		{func(c *OverheadConfig) {
			c.OutOfProcess, c.Weir.FloorExe, c.Weir.ProxyArgs = true, "weir-bench", []string{"overhead-proxy"}
		}, "Weir.Exe"},
	} {
		c := valid()
		tc.change(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
	// --budgets, in turn or interleaved without --dialects, and profiled.
	for _, change := range []func(*OverheadConfig){
		func(c *OverheadConfig) { c.Budgets, c.ProfileTarget = true, "budgets" },
		func(c *OverheadConfig) { c.Budgets, c.Interleave = true, true },
		func(c *OverheadConfig) { c.Budgets, c.Dialects, c.Interleave = true, true, true },
	} {
		c := valid()
		change(&c)
		if err := c.validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// The budgets line judges what budgets adds over direct against what
// weir adds, within 1.1x.
func TestOverheadVerdictOnBudgetsLine(t *testing.T) {
	t.Parallel()
	lat := func(p50, p99 time.Duration) row { return row{lat: loadgen.Percentiles{P50: p50, P99: p99}} }
	ms := time.Millisecond
	for _, tc := range []struct {
		budgets row
		want    string
	}{
		// Weir adds 0.2 / 2 ms over direct.
		{lat(1200*time.Microsecond, 3*ms), "p50 1.00x, p99 1.00x (target <= 1.1x: met)"},
		{lat(1220*time.Microsecond, 3200*time.Microsecond), "p50 1.10x, p99 1.10x (target <= 1.1x: met)"},
		{lat(1250*time.Microsecond, 3*ms), "p50 1.25x, p99 1.00x (target <= 1.1x: missed)"},
		{lat(1200*time.Microsecond, 4*ms), "p50 1.00x, p99 1.50x (target <= 1.1x: missed)"},
	} {
		rows := map[string]row{
			"direct":  lat(ms, ms),
			"proxy":   lat(1100*time.Microsecond, 2*ms),
			"weir":    lat(1200*time.Microsecond, 3*ms),
			"budgets": tc.budgets,
		}
		var b strings.Builder
		printOverhead(&b, "budgets", rows)
		if !strings.Contains(b.String(), "budgets/weir added: "+tc.want) {
			t.Errorf("budgets' line %q, want it to end %q", b.String(), tc.want)
		}
	}
}

// The budgets target's gateway config is valid: the platform model is
// priced, the budgets target's group and model each have a hard budget
// and the weir target's none, and its requests are as long as the weir
// target's.
func TestBudgetsCatalog(t *testing.T) {
	t.Parallel()
	cfg := overheadCatalog("http://127.0.0.1:9/v1", "/tmp/x.db")
	budgetsCatalog(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := cfg.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, pm := range cat.PlatformModels {
		if pm.Name == chatPM && pm.Price.IsZero() {
			t.Errorf("%s has no price: a request would reserve nothing", chatPM)
		}
	}
	subjects := map[string]weir.BudgetMode{}
	for _, b := range cat.Budgets {
		subjects[b.Subject.String()] = b.Mode
	}
	want := map[string]weir.BudgetMode{"group:" + budgetsGroup: weir.BudgetHard, "model:" + budgetsModel: weir.BudgetHard}
	if !maps.Equal(subjects, want) {
		t.Errorf("budgets %v, want %v (none on the weir target's group or model)", subjects, want)
	}
	if len(budgetsBody) != len(chatBody) || len(budgetsStreamBody) != len(chatStreamBody) || !strings.Contains(budgetsBody, budgetsModel) {
		t.Errorf("budgets requests %q / %q, want chatBody's size for %s", budgetsBody, budgetsStreamBody, budgetsModel)
	}
}

// The edge line judges the tunnel (edge over weir) against the proxy's
// hop (proxy over direct), not edge over direct.
func TestOverheadVerdictOnEdgesLine(t *testing.T) {
	t.Parallel()
	lat := func(p50, p99 time.Duration) row { return row{lat: loadgen.Percentiles{P50: p50, P99: p99}} }
	ms := time.Millisecond
	for _, tc := range []struct {
		edge row
		want string
	}{
		// The proxy adds 0.5 / 2 ms over direct; weir is at 2 / 5 ms.
		{lat(2500*time.Microsecond, 7*ms), "tunnel (edge-weir) +0.500/+2.000 ms, proxy hop (proxy-direct) +0.500/+2.000 ms; tunnel/proxy added: p50 1.00x, p99 1.00x (target <= 1.5x: met)"},
		{lat(2750*time.Microsecond, 8*ms), "p50 1.50x, p99 1.50x (target <= 1.5x: met)"},
		// Edge over direct would be 2.5x here; the tunnel alone is 1x.
		{lat(3*ms, 6*ms), "p50 2.00x, p99 0.50x (target <= 1.5x: missed)"},
	} {
		rows := map[string]row{
			"direct": lat(ms, ms),
			"proxy":  lat(1500*time.Microsecond, 3*ms),
			"weir":   lat(2*ms, 5*ms),
			"edge":   tc.edge,
		}
		var b strings.Builder
		printOverhead(&b, "edge", rows)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("edge's line %q, want it to end %q", b.String(), tc.want)
		}
	}
}

// The chunk table's edge line gives its added p99 per chunk over direct
// against 2 ms, and over weir.
func TestChunkVerdictOnEdgesLine(t *testing.T) {
	t.Parallel()
	p99 := func(d time.Duration) row { return row{lat: loadgen.Percentiles{P99: d}} }
	ms := time.Millisecond
	for _, tc := range []struct {
		edge time.Duration
		want string
	}{
		{3 * ms, "p99 +2.000 ms over direct (target <= 2 ms: met), +1.500 ms over weir"},
		{3100 * time.Microsecond, "p99 +2.100 ms over direct (target <= 2 ms: missed), +1.600 ms over weir"},
	} {
		rows := map[string]row{"direct": p99(ms), "proxy": p99(ms), "weir": p99(1500 * time.Microsecond), "edge": p99(tc.edge)}
		var b strings.Builder
		printChunks(&b, "edge", rows)
		if !strings.Contains(b.String(), "edge added per chunk: "+tc.want) {
			t.Errorf("edge's chunk line %q, want it to end %q", b.String(), tc.want)
		}
		b.Reset()
		printChunks(&b, "weir", rows)
		if strings.Contains(b.String(), "per chunk") {
			t.Errorf("weir's chunk line %q carries the edge verdict", b.String())
		}
	}
}

// The edge target's gateway config is valid, its model has no platform
// model to fall back on, and its requests are as long as the weir
// target's.
func TestEdgeCatalog(t *testing.T) {
	t.Parallel()
	cfg := overheadCatalog("http://127.0.0.1:9/v1", "/tmp/x.db")
	edgeCatalog(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := cfg.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cat.Models {
		switch m.Name {
		case edgeModel:
			if len(m.Candidates) != 0 || m.Nodes == weir.NodesNever {
				t.Errorf("edge model %+v: want nodes alone", m)
			}
		case "gpt-4o-mini":
			if m.Nodes != weir.NodesNever {
				t.Errorf("weir's model looks for nodes (%q): the weir target would differ with --edge", m.Nodes)
			}
		}
	}
	if len(edgeBody) != len(chatBody) || len(edgeStreamBody) != len(chatStreamBody) || !strings.Contains(edgeBody, edgeModel) {
		t.Errorf("edge requests %q / %q, want chatBody's size for %s", edgeBody, edgeStreamBody, edgeModel)
	}
}

// TestPlainProxyStreamsWhole: every stream through the plain proxy
// arrives whole, though the mock answers (and the proxy sends the
// answer's headers) as soon as it has read the request, while the
// proxy's transport may still be finishing with the request's body.
func TestPlainProxyStreamsWhole(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(overheadMock(OverheadConfig{CompletionTokens: 80, Stream: 1}))
	defer upstream.Close()
	proxy := httptest.NewServer(plainProxy(upstream.URL))
	defer proxy.Close()
	const streams, parallel = 400, 32
	var failed atomic.Int64
	var wg sync.WaitGroup
	next := make(chan struct{})
	for range parallel {
		wg.Go(func() {
			for range next {
				if _, err := probe(t.Context(), proxy.URL+"/v1/chat/completions", http.Header{}, chatStreamBody); err != nil {
					failed.Add(1)
					t.Log(err)
				}
			}
		})
	}
	for range streams {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d streams failed through the plain proxy", n, streams)
	}
}

// TestWriteAllocs: the allocations profile is written, as pprof's
// gzipped protobuf, and a path that cannot be created is an error.
func TestWriteAllocs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mem.prof")
	if err := writeAllocs(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the profile is not gzipped: % x", b[:min(len(b), 8)])
	}
	if err := writeAllocs(filepath.Join(t.TempDir(), "missing", "mem.prof")); err == nil {
		t.Error("a path in a missing directory: no error")
	}
}

// The port plan hands out consecutive ports from its first, skips one
// that is taken, and with 0 leaves the choice to the kernel.
func TestPortPlanSkipsATakenPort(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	first := taken.Addr().(*net.TCPAddr).Port
	plan := portPlan{next: first}
	ln, err := plan.listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ln.Addr().(*net.TCPAddr).Port; got == first || got > first+portTries {
		t.Errorf("listen from a taken %d: port %d, want one of the next %d", first, got, portTries)
	}
	if addr := plan.addr(); addr == ln.Addr().String() || addr == "127.0.0.1:0" {
		t.Errorf("the next address %s: want a new fixed port after %s", addr, ln.Addr())
	}
	if addr := (&portPlan{}).addr(); addr != "127.0.0.1:0" {
		t.Errorf("a plan from 0: %s, want the kernel's choice", addr)
	}
}

// A target's memory log keeps a sample a phase: this process's status
// for a target in it, and the median of each field over the phases.
func TestMemLogSamplesThisProcess(t *testing.T) {
	t.Parallel()
	var l memLog
	l.sample(nil)
	if m := l.last(); m.rss <= 0 || m.anon <= 0 || m.anon > m.rss || m.hwm < m.rss {
		t.Errorf("this process's memory: %+v, want 0 < anon <= rss <= hwm", m)
	}
	l.samples = []memSample{{rss: 30, anon: 5, hwm: 40}, {rss: 10, anon: 9, hwm: 90}, {rss: 20, anon: 1, hwm: 50}}
	if m := l.median(); m != (memSample{rss: 20, anon: 5, hwm: 50}) {
		t.Errorf("median %+v, want {20 5 50}", m)
	}
	var none *memLog
	none.sample(nil)
	if m := none.median(); m != (memSample{}) {
		t.Errorf("a nil log's median %+v", m)
	}
}
