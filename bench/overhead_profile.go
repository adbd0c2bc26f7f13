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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weir-gateway/weir/loadgen"
)

// profile arranges for the CPU profile and the execution trace asked for
// to cover target's measured phase, if it is the profiled one; stop ends
// them. A target served by child processes (OutOfProcess) is profiled
// in them: childProfile.
func (c OverheadConfig) profile(t overheadTarget, cfg *loadgen.Config) (stop func(), err error) {
	target := t.name
	if len(t.procs) > 0 {
		return c.childProfile(t, cfg), nil
	}
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

// childProfile has the children serving t, started with the profile
// flags (profileArgs), take their profiles over its measured phase if t
// is the profiled target: SIGUSR1 as it starts, SIGUSR2 (stop) as it
// ends. Each child writes its files as it takes the second.
func (c OverheadConfig) childProfile(t overheadTarget, cfg *loadgen.Config) (stop func()) {
	if t.name != c.ProfileTarget || len(c.profileArgs()) == 0 {
		return func() {}
	}
	signal := func(sig syscall.Signal) {
		for _, p := range t.procs {
			if err := p.cmd.Process.Signal(sig); err != nil {
				fmt.Fprintf(os.Stderr, "bench: profile %s: %v\n", t.name, err)
			}
		}
	}
	var started atomic.Bool
	cfg.OnMeasure = func() { signal(syscall.SIGUSR1); started.Store(true) }
	return func() {
		if started.Load() {
			signal(syscall.SIGUSR2)
		}
	}
}

// profileArgs are the flags that have a child (weir serve, or the proxy's)
// take the profiles asked for between SIGUSR1 and SIGUSR2: --cpuprofile
// and --trace with their paths.
func (c OverheadConfig) profileArgs() []string {
	var args []string
	if c.CPUProfile != "" {
		args = append(args, "--cpuprofile", c.CPUProfile)
	}
	if c.Trace != "" {
		args = append(args, "--trace", c.Trace)
	}
	return args
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
