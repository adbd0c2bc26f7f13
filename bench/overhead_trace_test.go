package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/loadgen"
)

// In every three rounds each instance plays each role once, and starts
// once in each place relative to the traced one: no role keeps an
// instance. Round 1 is the order the instances start in.
func TestTraceRolesTurnEveryRound(t *testing.T) {
	t.Parallel()
	n := len(traceRoles)
	for round := 1; round <= 2*n; round++ {
		seen := map[int]bool{}
		for role := range n {
			i := roleInstance(role, round)
			if seen[i] {
				t.Fatalf("round %d: instance %s plays two roles", round, instanceName(i))
			}
			seen[i] = true
			if got := instanceRole(i, round); got != role {
				t.Errorf("round %d: instanceRole(%s) = %d, want %d", round, instanceName(i), got, role)
			}
		}
	}
	for i := range n {
		played := map[int]bool{}
		for round := 1; round <= n; round++ {
			played[instanceRole(i, round)] = true
		}
		if len(played) != n {
			t.Errorf("instance %s played %d roles in %d rounds, want each once", instanceName(i), len(played), n)
		}
	}
	if got, want := roleLine(1), "weir A, weir+trace B, weir' C"; got != want {
		t.Errorf("round 1: %q, want %q", got, want)
	}
	if got, want := roleLine(2), "weir B, weir+trace C, weir' A"; got != want {
		t.Errorf("round 2: %q, want %q", got, want)
	}
}

// fakeGateway is a Gateway that notes whether it runs.
type fakeGateway struct {
	addr    string
	traced  bool
	stopped bool
}

func (g *fakeGateway) Addr() string                                  { return g.addr }
func (g *fakeGateway) Store() weir.Store                             { return nil }
func (g *fakeGateway) NodeStore() weir.NodeStore                     { return nil }
func (g *fakeGateway) EdgeAddr() string                              { return "" }
func (g *fakeGateway) Scopes(context.Context) []admission.ScopeStats { return nil }
func (g *fakeGateway) Stop(context.Context) error                    { g.stopped = true; return nil }

// Each round, the trio stops the last round's gateways and starts three
// new ones, A, B, C in that order, the traced one by StartTraced to the
// receiver; the rig's targets and gateway follow the roles.
func TestTraceTrioRestartsWithRolesTurned(t *testing.T) {
	t.Parallel()
	var started []*fakeGateway
	start := func(traced bool) func(*config.Config) (Gateway, error) {
		return func(cfg *config.Config) (Gateway, error) {
			g := &fakeGateway{addr: fmt.Sprintf("gw%d", len(started)), traced: traced}
			started = append(started, g)
			return g, nil
		}
	}
	w := Weir{
		Start: func(_ context.Context, cfg *config.Config) (Gateway, error) { return start(false)(cfg) },
		StartTraced: func(_ context.Context, cfg *config.Config, otlpURL string) (Gateway, error) {
			if otlpURL != "http://sink" {
				t.Errorf("traced gateway exports to %q", otlpURL)
			}
			return start(true)(cfg)
		},
		CreateKey: func(_ context.Context, _ weir.Store, k *weir.APIKey) (string, error) {
			k.ID = fmt.Sprintf("key%d", len(started)-1)
			return "secret-" + k.ID, nil
		},
	}
	rig := &overheadRig{}
	for _, name := range traceRoles {
		rig.targets = append(rig.targets, overheadTarget{name: name})
	}
	trio := &traceTrio{c: OverheadConfig{Weir: w}, dir: t.TempDir(), mockURL: "http://mock/v1", sinkURL: "http://sink", receiver: &otlpSink{}}
	tracedBy := map[int]bool{}
	for round := 1; round <= 3; round++ {
		if err := trio.start(t.Context(), rig, round); err != nil {
			t.Fatal(err)
		}
		now := started[len(started)-3:]
		for i, g := range now {
			role := traceRoles[instanceRole(i, round)]
			if g.traced != (role == traceName) {
				t.Errorf("round %d: instance %s (%s) traced %v", round, instanceName(i), role, g.traced)
			}
			if g.traced {
				tracedBy[i] = true
			}
			target := rig.targets[instanceRole(i, round)]
			if want := "http://" + g.addr + "/v1/chat/completions"; target.urls[0] != want {
				t.Errorf("round %d: target %s at %s, want %s", round, target.name, target.urls[0], want)
			}
			if got := target.header.Get("Authorization"); !strings.HasPrefix(got, "Bearer secret-") {
				t.Errorf("round %d: target %s's header %q", round, target.name, got)
			}
		}
		if weirGW := now[roleInstance(0, round)]; rig.gateway != weirGW {
			t.Errorf("round %d: rig.gateway is not weir's", round)
		}
		for _, g := range started[:len(started)-3] {
			if !g.stopped {
				t.Errorf("round %d: %s of an earlier round still runs", round, g.addr)
			}
		}
	}
	if len(tracedBy) != 3 {
		t.Errorf("instances traced in 3 rounds: %v, want each of the 3", tracedBy)
	}
	trio.stop()
	for _, g := range started {
		if !g.stopped {
			t.Errorf("%s runs after stop", g.addr)
		}
	}
}

// traceResults are the results of rounds whose added latency over
// direct (1 ms p50, 2 ms p99) is, for weir, weir+trace and weir', the
// given p50/p99 pairs in µs.
func traceResults(rounds [][3][2]int) overheadResults {
	lat := func(p50, p99 time.Duration) loadgen.Result {
		return loadgen.Result{Latency: loadgen.Percentiles{P50: p50, P99: p99}}
	}
	res := overheadResults{}
	for _, r := range rounds {
		res["direct"] = append(res["direct"], lat(time.Millisecond, 2*time.Millisecond))
		for i, name := range traceRoles {
			p50, p99 := time.Duration(r[i][0])*time.Microsecond, time.Duration(r[i][1])*time.Microsecond
			res[name] = append(res[name], lat(time.Millisecond+p50, 2*time.Millisecond+p99))
		}
	}
	return res
}

// The trace-overhead verdict is the median of the rounds' ratios of
// weir+trace's added latency to weir's, p50 and p99, against 1.15x;
// weir”s is beside it.
func TestTraceVerdict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		rounds [][3][2]int
		want   []string
	}{
		{
			name: "met",
			// weir+trace/weir: 1.10/1.00, 1.50/1.20, 1.00/1.10; weir'/weir: 1.00/0.90, 0.80/1.00, 1.20/1.30.
			rounds: [][3][2]int{{{100, 1000}, {110, 1000}, {100, 900}}, {{100, 1000}, {150, 1200}, {80, 1000}}, {{200, 1000}, {200, 1100}, {240, 1300}}},
			want: []string{
				"trace-overhead: weir+trace/weir added p50 1.10x, p99 1.10x, medians of 3 rounds' ratios (target <= 1.15x: met; each instance traced in as many rounds)",
				"A/A, two untraced instances: weir'/weir added p50 1.00x, p99 1.00x, medians of 3 rounds' ratios",
			},
		},
		{
			name:   "missed at p99",
			rounds: [][3][2]int{{{100, 1000}, {110, 1200}, {100, 1000}}, {{100, 1000}, {110, 1300}, {100, 1000}}, {{100, 1000}, {110, 1100}, {100, 1000}}},
			want:   []string{"p50 1.10x, p99 1.20x, medians of 3 rounds' ratios (target <= 1.15x: missed;"},
		},
		{
			name:   "rounds not a multiple of 3",
			rounds: [][3][2]int{{{100, 1000}, {100, 1000}, {100, 1000}}, {{100, 1000}, {100, 1000}, {100, 1000}}},
			want:   []string{"p50 1.00x, p99 1.00x, medians of 2 rounds' ratios (target <= 1.15x: met; rounds not a multiple of 3"},
		},
		{
			name:   "weir added nothing",
			rounds: [][3][2]int{{{0, 1000}, {100, 1000}, {100, 1000}}},
			want:   []string{"p50 n/a, p99 1.00x, medians of 1 rounds' ratios (target <= 1.15x: not measured"},
		},
	} {
		got := traceVerdict(traceResults(tc.rounds), len(tc.rounds))
		for _, want := range tc.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: verdict\n%s\nlacks %q", tc.name, got, want)
			}
		}
	}
}

// The rounds' ratios name the instances that played the role and weir.
func TestTraceInstanceRatios(t *testing.T) {
	t.Parallel()
	res := traceResults([][3][2]int{{{100, 1000}, {110, 1000}, {100, 900}}, {{100, 1000}, {150, 1200}, {80, 1000}}, {{200, 1000}, {200, 1100}, {240, 1300}}})
	if got, want := instanceRatios(res, 1), "1.10x/1.00x (B/A)  1.50x/1.20x (C/B)  1.00x/1.10x (A/C)"; got != want {
		t.Errorf("weir+trace: %q, want %q", got, want)
	}
	if got, want := instanceRatios(res, 2), "1.00x/0.90x (C/A)  0.80x/1.00x (A/B)  1.20x/1.30x (B/C)"; got != want {
		t.Errorf("weir': %q, want %q", got, want)
	}
}

// --tracing restarts weir every round, so targets that need a gateway
// for the whole run are refused beside it.
func TestOverheadConfigTracingAlone(t *testing.T) {
	t.Parallel()
	valid := func() OverheadConfig {
		return OverheadConfig{
			Weir: Weir{Start: noStart, CreateKey: noKey, StartTraced: func(context.Context, *config.Config, string) (Gateway, error) { return nil, nil }},
			Rate: 100, Duration: time.Second, Rounds: 3, Concurrency: 8, ProfileTarget: traceName, Tracing: true, Interleave: true,
		}
	}
	if err := valid().validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, change := range map[string]func(*OverheadConfig){
		"--budgets":         func(c *OverheadConfig) { c.Budgets = true },
		"--dialects":        func(c *OverheadConfig) { c.Dialects = true },
		"--edge":            func(c *OverheadConfig) { c.Edge, c.Interleave = true, false },
		"--console-watcher": func(c *OverheadConfig) { c.ConsoleWatcher, c.Interleave = []string{"watch"}, false },
		"Weir.StartTraced":  func(c *OverheadConfig) { c.Weir.StartTraced = nil },
	} {
		c := valid()
		change(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: want an error naming it, got %v", name, err)
		}
	}
}
