package sigprof

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The window opens at the start signal and closes at the stop signal,
// leaving a CPU profile (gzip) and an execution trace (its header).
func TestWindow(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pb"), filepath.Join(dir, "trace.out")
	w := &window{cpuPath: cpu, tracePath: tr}
	startc, stopc := make(chan os.Signal, 1), make(chan os.Signal, 1)
	exited := make(chan struct{})
	go func() { w.run(startc, stopc, nil); close(exited) }()
	if _, err := os.Stat(tr); !os.IsNotExist(err) {
		t.Fatalf("before the start signal the trace's file is there (%v)", err)
	}
	startc <- syscall.SIGUSR1
	stopc <- syscall.SIGUSR2
	<-exited
	if w.err != nil {
		t.Fatal(w.err)
	}
	checkFiles(t, cpu, tr)
}

// Start listens for the signals themselves; stop closes a window still
// open.
func TestStartSignals(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.pb"), filepath.Join(dir, "trace.out")
	opened := make(chan struct{})
	testOpened = func() { close(opened) }
	t.Cleanup(func() { testOpened = nil })
	stop := Start(cpu, tr)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	<-opened
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, cpu, tr)
}

// Without paths nothing is armed.
func TestStartNothing(t *testing.T) {
	if err := Start("", "")(); err != nil {
		t.Fatal(err)
	}
}

func checkFiles(t *testing.T, cpu, tr string) {
	t.Helper()
	b, err := os.ReadFile(cpu)
	if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("CPU profile %s: %d bytes, %v; want a gzipped profile", cpu, len(b), err)
	}
	b, err = os.ReadFile(tr)
	if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("trace %s: %.10q, %v; want an execution trace", tr, b, err)
	}
}
