package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionString(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/weir-gateway/weir", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "b546310abc"}, {Key: "vcs.time", Value: "2026-12-01T05:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"stamped", stamped, true, "weir v0.3.0, revision b546310abc (2026-12-01T05:00:00Z), with uncommitted changes, go1.26.0"},
		{"go run", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, true,
			"weir (devel), no VCS revision stamped (go run, or built with -buildvcs=false), go1.26.0"},
		{"no build info", nil, false, "weir: no build information in this binary"},
	} {
		if got := versionString(tc.bi, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestVersionCommand: `weir version` and `weir --version` print the same
// line, naming the Go version this test binary was built with.
func TestVersionCommand(t *testing.T) {
	bi, _ := debug.ReadBuildInfo()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		rootCmd.SetOut(&out)
		rootCmd.SetArgs(args)
		if err := rootCmd.Execute(); err != nil {
			t.Fatalf("weir %s: %v", args[0], err)
		}
		if got := out.String(); !strings.HasPrefix(got, "weir ") || !strings.Contains(got, bi.GoVersion) {
			t.Errorf("weir %s printed %q", args[0], got)
		}
	}
	rootCmd.SetOut(nil)
	rootCmd.SetArgs(nil)
}
