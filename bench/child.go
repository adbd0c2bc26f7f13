package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a process the harness runs as a target (`weir serve`, or the
// sync-waiters floor): it reads the child's JSON log lines, notes the
// address it says it serves on, and keeps its warnings. The child's
// stderr is a pipe as in production, but one this process does not
// watch: a line the child logs (an access log line a request) wakes
// nothing here, where the load generator runs. The harness reads the pipe
// every millisecond until the child serves, then every 20 ms, once more
// when it exits, and whenever warnings are asked for.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	url     string
	serving time.Time // when its serving line was read
	exited  chan struct{}
	warns   warnTally

	logMu   sync.Mutex
	logFD   int    // the read end of the child's stderr, non-blocking
	logPart []byte // a line read in part
	onLine  func([]byte)
}

// warnTally counts a process's WARN and ERROR log lines by message and
// keeps the first few whole.
type warnTally struct {
	mu    sync.Mutex
	warns map[string]int
	n     int
	first []string
}

func (t *warnTally) add(msg, line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.warns == nil {
		t.warns = map[string]int{}
	}
	t.warns[msg]++
	if t.n++; len(t.first) < 3 {
		t.first = append(t.first, line)
	}
}

// summary is each message with its count, then the first few lines
// whole; "" if none.
func (t *warnTally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return ""
	}
	var parts []string
	for msg, n := range t.warns {
		parts = append(parts, fmt.Sprintf("%dx %q", n, msg))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ") + "; first: " + strings.Join(t.first, " | ")
}

// logLine is what child reads of each log line; fields a line lacks stay
// zero.
type logLine struct {
	Level  string  `json:"level"`
	Msg    string  `json:"msg"`
	Addr   string  `json:"addr"`
	TookMS float64 `json:"took_ms"`
	Active int     `json:"active"`
	Queued int     `json:"queued"`
}

// warnsOrWorse says whether a JSON log line of slog's may be at level
// WARN or ERROR. It is cheap beside decoding the line, which a child's
// access log, a line a request, would otherwise cost the harness (the
// load generator's process) for every request the child serves.
func warnsOrWorse(line []byte) bool {
	return bytes.Contains(line, []byte(`"level":"WARN`)) || bytes.Contains(line, []byte(`"level":"ERROR`))
}

// startChild runs exe with args (without the WEIR_ variables of this
// environment) and waits, up to within, for its "weir serving" (or the
// floor's "serving") line. Each line is also handed to seen, if set, one
// at a time.
func startChild(exe string, args []string, within time.Duration, seen func(logLine)) (*child, error) {
	c := &child{cmd: exec.Command(exe, args...), exited: make(chan struct{})}
	c.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "WEIR_") })
	w, err := c.pipeStderr()
	if err != nil {
		return nil, err
	}
	c.started = time.Now()
	err = c.cmd.Start()
	_ = w.Close() // the child's now
	if err != nil {
		_ = syscall.Close(c.logFD)
		return nil, err
	}
	ready := make(chan struct{})
	var tail []string
	c.onLine = func(line []byte) {
		if seen == nil && c.url != "" && !warnsOrWorse(line) {
			return // an access log line: nothing here reads it
		}
		var v logLine
		_ = json.Unmarshal(line, &v)
		if v.Level == "WARN" || v.Level == "ERROR" {
			c.warns.add(v.Msg, string(line))
		}
		if seen != nil {
			seen(v)
		}
		if c.url == "" {
			if (v.Msg == "weir serving" || v.Msg == "serving") && v.Addr != "" {
				c.url, c.serving = "http://"+v.Addr, time.Now()
				close(ready)
			} else if len(tail) < 50 {
				tail = append(tail, string(line))
			}
		}
	}
	go c.follow(ready)
	name := strings.Join(args, " ")
	select {
	case <-ready:
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("%s exited before serving:\n%s", name, strings.Join(tail, "\n"))
	case <-time.After(within):
	}
	c.kill()
	return nil, fmt.Errorf("%s did not serve within %s", name, within)
}

// follow reads the child's log every millisecond until ready is closed,
// then every 20 ms, and once more when the child has exited; then it
// closes c.exited.
func (c *child) follow(ready <-chan struct{}) {
	waited := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(waited)
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-waited:
			c.readLog()
			c.logMu.Lock()
			_ = syscall.Close(c.logFD)
			c.logFD = -1
			c.logMu.Unlock()
			close(c.exited)
			return
		case <-ready:
			tick.Reset(20 * time.Millisecond)
			ready = nil
		case <-tick.C:
			c.readLog()
		}
	}
}

// readLog hands each whole line the child has logged since the last
// call to c.onLine.
func (c *child) readLog() {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	var chunk [64 << 10]byte
	for c.logFD >= 0 {
		n, err := syscall.Read(c.logFD, chunk[:])
		if n <= 0 || err != nil {
			return // empty for now (EAGAIN), or at its end
		}
		rest := chunk[:n]
		for {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			line := rest[:i]
			if len(c.logPart) > 0 {
				line = append(c.logPart, line...)
				c.logPart = c.logPart[:0]
			}
			c.onLine(line)
			rest = rest[i+1:]
		}
		c.logPart = append(c.logPart, rest...)
	}
}

// pipeStderr makes a pipe for the child's stderr, keeps its read end in
// c.logFD, non-blocking and outside the runtime's poller (which would
// wake for every line), and returns its write end. The pipe is asked to
// hold 1 MiB (Linux), seconds of access log lines between two reads.
func (c *child) pipeStderr() (*os.File, error) {
	var fds [2]int
	syscall.ForkLock.RLock()
	err := syscall.Pipe(fds[:])
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	const fSetPipeSize = 1031 // F_SETPIPE_SZ; elsewhere EINVAL, ignored
	_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[0]), fSetPipeSize, 1<<20)
	c.logFD = fds[0]
	w := os.NewFile(uintptr(fds[1]), "stderr")
	c.cmd.Stderr = w
	return w, nil
}

// stop asks the child to end (SIGTERM) and kills it after 10 s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.kill()
	}
}

// kill ends the child at once (SIGKILL), as a crash would.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// warnings summarises the WARN and ERROR lines the child logged: each
// message with its count, then the first few lines whole; "" if none.
func (c *child) warnings() string {
	select {
	case <-c.exited: // read to its end, and closed
	default:
		c.readLog()
	}
	return c.warns.summary()
}

// memKiB reads a field (VmRSS, VmHWM) of the child's /proc status, in KiB.
func (c *child) memKiB(field string) (int64, error) { return statusKiB(c.cmd.Process.Pid, field) }
