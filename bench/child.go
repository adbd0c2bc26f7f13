package bench

import (
	"bufio"
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
// sync-waiters floor): it reads the child's JSON log lines from stderr,
// notes the address it says it serves on, and keeps its warnings.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	url     string
	serving time.Time // when its serving line arrived
	exited  chan struct{}
	warns   warnTally
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

// startChild runs exe with args (without the WEIR_ variables of this
// environment) and waits, up to within, for its "weir serving" (or the
// floor's "serving") line. Each line is also handed to seen, if set, in
// the goroutine that reads them.
func startChild(exe string, args []string, within time.Duration, seen func(logLine)) (*child, error) {
	c := &child{cmd: exec.Command(exe, args...), exited: make(chan struct{})}
	c.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "WEIR_") })
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	var tail []string
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var v logLine
			_ = json.Unmarshal(sc.Bytes(), &v)
			if v.Level == "WARN" || v.Level == "ERROR" {
				c.warns.add(v.Msg, sc.Text())
			}
			if seen != nil {
				seen(v)
			}
			if c.url == "" {
				if (v.Msg == "weir serving" || v.Msg == "serving") && v.Addr != "" {
					c.url, c.serving = "http://"+v.Addr, time.Now()
					close(ready)
				} else if len(tail) < 50 {
					tail = append(tail, sc.Text())
				}
			}
		}
		_ = c.cmd.Wait()
		close(c.exited)
	}()
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
func (c *child) warnings() string { return c.warns.summary() }

// memKiB reads a field (VmRSS, VmHWM) of the child's /proc status, in KiB.
func (c *child) memKiB(field string) (int64, error) { return statusKiB(c.cmd.Process.Pid, field) }
