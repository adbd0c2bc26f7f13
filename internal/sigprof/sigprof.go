// Package sigprof lets a process be profiled from outside over a window
// another process chooses: a CPU profile and an execution trace that
// start on SIGUSR1 and stop on SIGUSR2. weir serve and weir-bench's
// proxy child take it (--cpuprofile, --trace), so that weir-bench
// --out-of-process can profile a child over its measured phase alone.
package sigprof

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"syscall"
)

// Start arms the profiles asked for (a path "" asks for none): SIGUSR1
// starts them, SIGUSR2 stops them and closes their files. Each path is
// written once: signals after the first window are ignored. stop ends
// the window if it is open, and stops listening; it returns the first
// errors of starting and writing the profiles. With neither path, Start
// arms nothing and the signals keep their default action.
func Start(cpuPath, tracePath string) (stop func() error) {
	if cpuPath == "" && tracePath == "" {
		return func() error { return nil }
	}
	startc, stopc := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(startc, syscall.SIGUSR1)
	signal.Notify(stopc, syscall.SIGUSR2)
	w := &window{cpuPath: cpuPath, tracePath: tracePath}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		w.run(startc, stopc, done)
	}()
	var once sync.Once
	return func() error {
		once.Do(func() {
			signal.Stop(startc)
			signal.Stop(stopc)
			close(done)
			<-exited
		})
		return w.err
	}
}

// testOpened, if set, is called once a window has opened.
var testOpened func()

// window is one profiling window: its files, open while it is.
type window struct {
	cpuPath, tracePath string
	files              []io.Closer
	cpu, tr            bool
	err                error
}

// run opens the window at the first receive on startc and closes it at
// the next on stopc or when done is closed, whichever is first.
func (w *window) run(startc, stopc <-chan os.Signal, done <-chan struct{}) {
	select {
	case <-startc:
	case <-done:
		return
	}
	w.open()
	if testOpened != nil {
		testOpened()
	}
	select {
	case <-stopc:
	case <-done:
	}
	w.close()
}

// open starts the profiles; a profile that cannot start is noted in
// w.err and the others still run.
func (w *window) open() {
	if w.cpuPath != "" {
		if f := w.create(w.cpuPath); f != nil {
			w.cpu = w.note(pprof.StartCPUProfile(f))
		}
	}
	if w.tracePath != "" {
		if f := w.create(w.tracePath); f != nil {
			w.tr = w.note(trace.Start(f))
		}
	}
}

// close stops the profiles started and closes their files.
func (w *window) close() {
	if w.cpu {
		pprof.StopCPUProfile()
	}
	if w.tr {
		trace.Stop()
	}
	for _, f := range w.files {
		w.note(f.Close())
	}
}

func (w *window) create(path string) *os.File {
	f, err := os.Create(path)
	if !w.note(err) {
		return nil
	}
	w.files = append(w.files, f)
	return f
}

// note keeps err, if any, and reports whether there was none.
func (w *window) note(err error) bool {
	if err != nil {
		w.err = errors.Join(w.err, err)
		return false
	}
	return true
}
