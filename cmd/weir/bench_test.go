package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/bench"
)

// The harness runs this binary with Weir's args: they must name the
// commands that serve the gateway and the floor.
func TestBenchWeirArgsNameTheirCommands(t *testing.T) {
	w, err := benchWeir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{w.ServeArgs, "serve"},
		{w.FloorArgs, "sync-waiters-floor"},
	} {
		cmd, rest, err := rootCmd.Find(tc.args)
		if err != nil || len(rest) > 0 || cmd.Name() != tc.want {
			t.Errorf("%q finds %q (rest %q, %v), want %q", tc.args, cmd.Name(), rest, err, tc.want)
		}
	}
	for _, name := range []string{"listen", "upstream", "limit"} {
		floor, _, _ := rootCmd.Find(w.FloorArgs)
		if floor.Flags().Lookup(name) == nil {
			t.Errorf("the floor command has no --%s, which the harness passes", name)
		}
	}
	if w.Exe == "" || w.Start == nil || w.CreateKey == nil {
		t.Errorf("benchWeir left a field empty: %+v", w)
	}
}

// Overhead against Main started in this process: a short open loop
// through all three targets, every request admitted through Weir's three
// scopes.
func TestBenchOverheadThroughMain(t *testing.T) {
	if testing.Short() {
		t.Skip("drives load for a few seconds")
	}
	w, err := benchWeir()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err = bench.Overhead(t.Context(), &out, bench.OverheadConfig{
		Weir: w, Rate: 100, Duration: 300 * time.Millisecond, Rounds: 1, Concurrency: 16,
		CompletionTokens: 80, ProfileTarget: "weir",
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(out.String(), "\n")
	for _, target := range []string{"direct ", "proxy ", "weir "} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, target) && strings.Contains(l, "100.00") })
		if i < 0 {
			t.Errorf("no line for %s with 100%% success in:\n%s", target, out.String())
		}
	}
	for _, want := range []string{"weir/proxy added: p50", "weir scopes used: group:default (limit 1000000", "pm:mock/gpt-4o-mini (limit 1000000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
