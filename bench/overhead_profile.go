package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"
	"time"

	"github.com/weir-gateway/weir/loadgen"
)

// profile arranges for the CPU profile and the execution trace asked for
// to cover target's measured phase, if it is the profiled one; stop ends
// them.
func (c OverheadConfig) profile(target string, cfg *loadgen.Config) (stop func(), err error) {
	var files []*os.File
	var cpu, tr, mem bool
	stop = func() {
		if cpu {
			pprof.StopCPUProfile()
		}
		if tr {
			trace.Stop()
		}
		if mem {
			err := writeAllocs(c.MemProfile)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			}
		}
		for _, f := range files {
			_ = f.Close()
		}
	}
	if target != c.ProfileTarget || (c.CPUProfile == "" && c.Trace == "" && c.MemProfile == "") {
		return stop, nil
	}
	create := func(path string) *os.File {
		if path == "" || err != nil {
			return nil
		}
		var f *os.File
		if f, err = os.Create(path); err == nil {
			files = append(files, f)
		}
		return f
	}
	cpuFile, traceFile := create(c.CPUProfile), create(c.Trace)
	if err != nil {
		stop()
		return nil, err
	}
	cfg.OnMeasure = func() {
		if cpuFile != nil {
			cpu = pprof.StartCPUProfile(cpuFile) == nil
		}
		if traceFile != nil {
			tr = trace.Start(traceFile) == nil
		}
		if c.MemProfile != "" {
			if err := writeAllocs(c.MemProfile + ".base"); err != nil {
				fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			} else {
				mem = true
			}
		}
	}
	return stop, nil
}

// writeAllocs writes the process's allocations so far, as a profile, to
// path. Two of them, before and after a phase, give the phase's own:
// go tool pprof -sample_index=alloc_space -base path.base weir path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// Allocations show in the profile once a GC has swept them.
	runtime.GC()
	err = pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the allocations profile: %w", err)
	}
	return nil
}

// startWatcher runs argv with WEIR_URL=url and waits (up to a minute)
// for it to print "watching"; stop kills it.
func startWatcher(ctx context.Context, argv []string, url string) (stop func(), err error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "WEIR_URL="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the console watcher: %w", err)
	}
	cmd.WaitDelay = 5 * time.Second
	stop = func() {
		// SIGTERM first, so that the watcher closes its browser.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "watching" {
				ready <- true
				break
			}
		}
		ready <- false
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if !ok {
			stop()
			return nil, fmt.Errorf("the console watcher %s ended without watching", argv[0])
		}
	case <-time.After(time.Minute):
		stop()
		return nil, fmt.Errorf("the console watcher %s did not print \"watching\" within a minute", argv[0])
	}
	return stop, nil
}
