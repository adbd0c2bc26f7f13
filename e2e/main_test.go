package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// weirBin is the weir binary every test runs, built by TestMain.
var weirBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Println("e2e: skipping the end-to-end tests: no Go toolchain to build weir with:", err)
		return 0
	}
	dir, err := os.MkdirTemp("", "weir-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	weirBin = filepath.Join(dir, "weir")
	build := exec.Command(goTool, "build", "-o", weirBin, "./cmd/weir")
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/weir failed: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
