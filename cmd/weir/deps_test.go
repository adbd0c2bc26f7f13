package main

import (
	"os/exec"
	"strings"
	"testing"
)

// weir links neither the benchmark harness (bench, with its pgbench
// runner) nor its load generator: they are weir-bench's.
func TestLinksNoHarness(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no Go toolchain to list weir's dependencies with:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, harness := range []string{"github.com/weir-gateway/weir/bench", "github.com/weir-gateway/weir/loadgen"} {
			if pkg == harness || strings.HasPrefix(pkg, harness+"/") {
				t.Errorf("weir links %s, which belongs to cmd/weir-bench", pkg)
			}
		}
	}
}
