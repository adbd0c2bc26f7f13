package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/bench"
	"github.com/weir-gateway/weir/pgtest"
)

// testWeir is benchWeir for this test binary.
func testWeir(t *testing.T) bench.Weir {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return benchWeir(self)
}

// The harness runs this binary with the floor's args and the proxy's:
// they must name their commands, with the flags the harness passes.
func TestFloorArgsNameTheirCommand(t *testing.T) {
	t.Parallel()
	w := testWeir(t)
	floor, rest, err := rootCmd().Find(w.FloorArgs)
	if err != nil || len(rest) > 0 || floor.Name() != "sync-waiters-floor" {
		t.Fatalf("%q finds %q (rest %q, %v), want sync-waiters-floor", w.FloorArgs, floor.Name(), rest, err)
	}
	for _, name := range []string{"listen", "upstream", "limit"} {
		if floor.Flags().Lookup(name) == nil {
			t.Errorf("the floor command has no --%s, which the harness passes", name)
		}
	}
	proxy, rest, err := rootCmd().Find(w.ProxyArgs)
	if err != nil || len(rest) > 0 || proxy.Name() != "overhead-proxy" || proxy.Flags().Lookup("upstream") == nil || proxy.Flags().Lookup("listen") == nil {
		t.Errorf("%q finds %q (rest %q, %v), want overhead-proxy with --upstream and --listen", w.ProxyArgs, proxy.Name(), rest, err)
	}
	if w.FloorExe == "" || len(w.ServeArgs) == 0 || w.Start == nil || w.CreateKey == nil || w.CreateNode == nil {
		t.Errorf("benchWeir left a field empty: %+v", w)
	}
}

// --weir is taken as given, and else the weir beside this binary, before
// any build.
func TestFindWeirGivenOrBeside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	given := filepath.Join(dir, "my-weir")
	if err := os.WriteFile(given, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, cleanup, err := findWeir(t.Context(), given, filepath.Join(t.TempDir(), "weir-bench"))
	if err != nil || exe != given {
		t.Errorf("--weir %s: %q, %v", given, exe, err)
	} else {
		cleanup()
	}
	if _, _, err := findWeir(t.Context(), filepath.Join(dir, "missing"), given); err == nil || !strings.Contains(err.Error(), "--weir") {
		t.Errorf("--weir naming no file: %v, want an error naming --weir", err)
	}
	beside := filepath.Join(dir, "weir")
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, cleanup, err = findWeir(t.Context(), "", filepath.Join(dir, "weir-bench"))
	if err != nil || exe != beside {
		t.Errorf("a weir beside weir-bench: %q, %v; want %s", exe, err, beside)
	} else {
		cleanup()
	}
}

// builtWeir is the weir findWeir builds from this checkout, built once
// for every test that needs it and removed when they end (TestMain).
var builtWeir struct {
	once    sync.Once
	exe     string
	cleanup func()
	err     error
}

// buildWeir builds weir as findWeir does with neither --weir nor a weir
// beside this binary.
func buildWeir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the weir binary")
	}
	builtWeir.once.Do(func() {
		builtWeir.exe, builtWeir.cleanup, builtWeir.err = findWeir(t.Context(), "", filepath.Join(t.TempDir(), "weir-bench"))
	})
	if builtWeir.err != nil {
		t.Fatal(builtWeir.err)
	}
	return builtWeir.exe
}

func TestMain(m *testing.M) {
	// The harness runs this binary as its proxy child (ProxyArgs).
	if len(os.Args) > 1 && os.Args[1] == "overhead-proxy" {
		cmd := rootCmd()
		cmd.SetArgs(os.Args[1:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if builtWeir.cleanup != nil {
		builtWeir.cleanup()
	}
	os.Exit(code)
}

// With neither --weir nor a weir beside it, the harness builds weir from
// this checkout; ServeArgs name its serve command, which takes the -c the
// harness appends.
func TestFindWeirBuilds(t *testing.T) {
	t.Parallel()
	exe := buildWeir(t)
	out, err := exec.Command(exe, append(slices.Clone(testWeir(t).ServeArgs), "--help")...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-c, --config") {
		t.Errorf("%s serve --help: %v\n%s", exe, err, out)
	}
}

// Overhead against serve.Main started in this process: a short open loop
// through all the targets (the Responses API's too), every request
// admitted through Weir's three scopes.
func TestBenchOverheadThroughMain(t *testing.T) {
	if testing.Short() {
		t.Skip("drives load for a few seconds")
	}
	w := testWeir(t)
	var out strings.Builder
	err := bench.Overhead(t.Context(), &out, bench.OverheadConfig{
		Weir: w, Rate: 100, Duration: 300 * time.Millisecond, Rounds: 1, Concurrency: 16,
		CompletionTokens: 80, ProfileTarget: "weir", Dialects: true,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	for _, target := range []string{"direct ", "proxy ", "weir ", "responses ", "messages "} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, target) && strings.Contains(l, "100.00") })
		if i < 0 {
			t.Errorf("no line for %s with 100%% success in:\n%s", target, out.String())
		}
	}
	for _, want := range []string{"weir/proxy added: p50", "responses/weir added: p50", "messages/weir added: p50", "weir scopes used: group:default (limit 1000000", "pm:mock/gpt-4o-mini (limit 1000000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// Overhead out of process, briefly: the plain proxy (this binary as its
// proxy child) and a `weir serve` child, each request to weir admitted,
// each child's memory on its lines.
func TestBenchOutOfProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two processes and drives load for a few seconds")
	}
	w := testWeir(t)
	w.Exe = buildWeir(t)
	var out strings.Builder
	err := bench.Overhead(t.Context(), &out, bench.OverheadConfig{
		Weir: w, Rate: 100, Duration: 300 * time.Millisecond, Rounds: 1, Concurrency: 16, Stream: 0.5,
		CompletionTokens: 80, ProfileTarget: "weir", OutOfProcess: true, Ports: bench.DefaultPorts,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	for _, target := range []string{"direct ", "proxy ", "weir "} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, target) && strings.Contains(l, "100.00") }) {
			t.Errorf("no line for %s with 100%% success in:\n%s", target, out.String())
		}
	}
	// The children's lines of the cost table: their CPU, their rss and
	// hwm unmarked (their own), weir's against the proxy's.
	cost := regexp.MustCompile(`(?m)^weir +[0-9.]+ +- +- +- +[0-9.]+  +[0-9.]+  +[0-9.]+  +[-+][0-9.]+ .*weir/proxy rss [0-9.]+x`)
	if !cost.MatchString(out.String()) {
		t.Errorf("no cost line for the weir child with its memory:\n%s", out.String())
	}
	if strings.Contains(out.String(), "failures") {
		t.Errorf("a target failed requests:\n%s", out.String())
	}
}

// Overhead's interleaved rounds against serve.Main, briefly: the five
// targets share each round's open loop, each gets a fifth of it with
// every request answered, the lines judge the dialects against weir
// round by round and over the medians, and a cost pass follows.
func TestBenchInterleavedThroughMain(t *testing.T) {
	if testing.Short() {
		t.Skip("drives load for a few seconds")
	}
	w := testWeir(t)
	var out strings.Builder
	err := bench.Overhead(t.Context(), &out, bench.OverheadConfig{
		Weir: w, Rate: 250, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Rounds: 2, Concurrency: 16,
		CompletionTokens: 80, ProfileTarget: "weir", Dialects: true, Interleave: true,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	lines := strings.Split(text, "\n")
	for _, target := range []string{"direct ", "proxy ", "weir ", "responses ", "messages "} {
		// Each round's line, the medians' and the cost pass's.
		n := len(slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
			return !strings.HasPrefix(l, target) || !strings.Contains(l, " 100.00 ")
		}))
		if n != 4 {
			t.Errorf("%d lines for %s with 100%% success, want 4 (2 rounds, medians, cost pass):\n%s", n, target, text)
		}
	}
	// 250 req/s over 5 targets for 400ms: 20 measured requests each.
	if n := strings.Count(text, "requests measured: direct 20, proxy 20, weir 20, responses 20, messages 20\n"); n != 2 {
		t.Errorf("%d rounds gave each target its 20 requests, want 2:\n%s", n, text)
	}
	for _, want := range []string{
		"overhead interleaved, one open loop at 250 req/s dealing each turn of 5 requests to every target in a shuffled order (50 req/s each)",
		"responses/weir added: p50 ", "messages/weir added: p50 ",
		"responses/weir added latency, round by round: ", "messages/weir added latency, round by round: ",
		"cost pass, each target alone in turn at 250 req/s",
		"added cpu µs",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "failures:") {
		t.Errorf("requests failed:\n%s", text)
	}
}

// Overhead's budgets target interleaved with the others against
// serve.Main, briefly: every request answered, the budgets line judged
// against weir round by round and over the medians, and each of the
// three budget scopes (the key's, the group's, the model's) shows spend.
func TestBenchBudgetsInterleavedThroughMain(t *testing.T) {
	if testing.Short() {
		t.Skip("drives load for a few seconds")
	}
	w := testWeir(t)
	var out strings.Builder
	err := bench.Overhead(t.Context(), &out, bench.OverheadConfig{
		Weir: w, Rate: 200, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Rounds: 2, Concurrency: 16,
		CompletionTokens: 80, ProfileTarget: "budgets", Budgets: true, Interleave: true,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	lines := strings.Split(text, "\n")
	for _, target := range []string{"direct ", "proxy ", "weir ", "budgets "} {
		// Each round's line, the medians' and the cost pass's.
		n := len(slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
			return !strings.HasPrefix(l, target) || !strings.Contains(l, " 100.00 ")
		}))
		if n != 4 {
			t.Errorf("%d lines for %s with 100%% success, want 4 (2 rounds, medians, cost pass):\n%s", n, target, text)
		}
	}
	// 200 req/s over 4 targets for 400ms: 20 measured requests each.
	if n := strings.Count(text, "requests measured: direct 20, proxy 20, weir 20, budgets 20\n"); n != 2 {
		t.Errorf("%d rounds gave each target its 20 requests, want 2:\n%s", n, text)
	}
	for _, want := range []string{
		"budgets: the same gateway and platform model",
		"budgets/weir added: p50 ",
		"budgets/weir added latency, round by round: ",
		"budgets-weir: cpu ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "failures:") {
		t.Errorf("requests failed:\n%s", text)
	}
	spent := regexp.MustCompile(`budget:(\S+) \(spent ([0-9.]+),`).FindAllStringSubmatch(text, -1)
	if len(spent) != 3 {
		t.Fatalf("%d budget scopes with their spend, want 3 (key, group, model):\n%s", len(spent), text)
	}
	for _, m := range spent {
		if v, err := weir.ParseMoney(m[2]); err != nil || v <= 0 {
			t.Errorf("budget %s spent %s (%v), want more than 0", m[1], m[2], err)
		}
	}
}

// Overhead's edge target against serve.Main, briefly, over two rounds with a
// share of streams: every request through the node agent succeeds, the
// edge line judges the tunnel against the proxy's hop, and the chunk
// table judges its added p99 per chunk.
func TestBenchEdgeThroughMain(t *testing.T) {
	if testing.Short() {
		t.Skip("drives load for a few seconds")
	}
	w := testWeir(t)
	var out strings.Builder
	err := bench.Overhead(t.Context(), &out, bench.OverheadConfig{
		Weir: w, Rate: 100, Duration: 250 * time.Millisecond, Rounds: 2, Stream: 0.2, Concurrency: 16,
		CompletionTokens: 80, ProfileTarget: "edge", Edge: true,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	// Each round's table, the medians' and the three stream tables.
	if n := len(slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
		return !strings.HasPrefix(l, "edge ") || !strings.Contains(l, " 100.00 ")
	})); n != 6 {
		t.Errorf("%d edge lines with 100%% success, want 6 (2 rounds, medians, first byte, last byte, chunks):\n%s", n, out.String())
	}
	for _, want := range []string{
		"edge: the same gateway, model gpt-4o-edge routed to node node_",
		"tunnel/proxy added: p50 ",
		"tunnel/proxy added latency (edge-weir over proxy-direct), round by round: ",
		"edge added per chunk: p99 ",
		"edge added per-chunk p99 in ms, over direct/over weir, round by round: ",
		"tunnel (edge-weir) ",
		"/mock (limit 4096, mean hold ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "edge failures") || strings.Contains(out.String(), "edge node log") {
		t.Errorf("the edge target failed requests or its node warned:\n%s", out.String())
	}
}

// The fleet's scenarios end to end, briefly, through real `weir serve`
// children: two replicas on a PostgreSQL schema of their own and one
// serve on SQLite. Skipped (failed under WEIR_TEST_POSTGRES=require)
// without PostgreSQL.
func TestBenchFleetThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five weir serve processes and drives load for a few seconds")
	}
	pgtest.Require(t)
	w := testWeir(t)
	w.Exe = buildWeir(t)
	fleet := bench.FleetConfig{Replicas: 2, DSN: pgtest.BaseDSN()}

	t.Run("overhead", func(t *testing.T) {
		// With pgbench installed, the closed loop and fleet-admit's line.
		_, noPgbench := exec.LookPath("pgbench")
		var out strings.Builder
		err := bench.Overhead(t.Context(), &out, bench.OverheadConfig{
			Weir: w, Rate: 100, Duration: 500 * time.Millisecond, Rounds: 1, Concurrency: 16, Connections: 4,
			MaxRPS: noPgbench == nil, CompletionTokens: 80, ProfileTarget: "weir", Fleet: fleet,
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		want := []string{"fleet: 2 `weir serve` children on PostgreSQL", "r0 leads"}
		if noPgbench == nil {
			want = append(want, "fleet/serve ", "fleet-admit (HTTP level) 2 replicas", "x-pgbench")
		} else {
			want = append(want, "fleet/serve added: p50")
		}
		for _, s := range want {
			if !strings.Contains(out.String(), s) {
				t.Errorf("output lacks %q:\n%s", s, out.String())
			}
		}
		for _, target := range []string{"serve ", "fleet "} {
			lines := strings.Split(out.String(), "\n")
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, target) && strings.Contains(l, "100.0") }) {
				t.Errorf("no line for %s with 100%% success in:\n%s", target, out.String())
			}
		}
	})
	t.Run("drain", func(t *testing.T) {
		var out strings.Builder
		err := bench.Drain(t.Context(), &out, bench.TasksConfig{
			Weir: w, Tasks: 20, Capacity: 10, Job: 200 * time.Millisecond,
			PollMin: 50 * time.Millisecond, PollMax: time.Second, Connections: 4, Fleet: fleet,
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		for _, s := range []string{"drain (fleet of 2 on PostgreSQL)  tasks 20  capacity 10", "statuses map[succeeded:20]"} {
			if !strings.Contains(out.String(), s) {
				t.Errorf("output lacks %q:\n%s", s, out.String())
			}
		}
	})
}

// idleWindow is Idle's window of a 1s run as it prints it.
var idleWindow = regexp.MustCompile(`idle  window 1\.[0-9]s  `)

// Idle against a weir serve child, alone on SQLite and as one fleet
// replica on PostgreSQL: it serves, and the line has the CPU's share.
func TestBenchIdleThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two weir serve processes")
	}
	w := testWeir(t)
	w.Exe = buildWeir(t)
	run := func(t *testing.T, fleet bench.FleetConfig, where string) {
		var out strings.Builder
		if err := bench.Idle(t.Context(), &out, bench.IdleConfig{Weir: w, Duration: time.Second, Fleet: fleet}); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		for _, s := range []string{"one 'weir serve' on " + where, "% of a core (goal <= 0.2%: ", "context switches "} {
			if !strings.Contains(out.String(), s) {
				t.Errorf("output lacks %q:\n%s", s, out.String())
			}
		}
		// The window is the time it took, from the first reading of
		// the process's CPU to the second: 1s and what the readings add.
		if !idleWindow.MatchString(out.String()) {
			t.Errorf("output lacks a window of 1s or a little more:\n%s", out.String())
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, bench.FleetConfig{}, "sqlite") })
	t.Run("fleet", func(t *testing.T) {
		pgtest.Require(t)
		run(t, bench.FleetConfig{Replicas: 1, DSN: pgtest.BaseDSN()}, "postgres")
	})
}
