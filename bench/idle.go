package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
)

// IdleConfig says how Idle runs; the defaults are `weir-bench idle`'s
// flags'.
type IdleConfig struct {
	Weir Weir
	// Duration is the measured window (60s).
	Duration time.Duration
	// Settle is how long the gateway is left alone after it serves,
	// before the window opens (15s: River's client, idle, stops after
	// task.Config.IdleAfter, 5s).
	Settle time.Duration
	// Fleet, with Replicas 1, runs the gateway as one replica of a fleet
	// on PostgreSQL instead of alone on SQLite; more replicas are not
	// supported.
	Fleet FleetConfig
}

// IdleGoal is the most CPU an idle gateway should use: 0.2% of a core,
// 20 ms of CPU in 10 s.
const IdleGoal = 0.002

func (c IdleConfig) validate() error {
	if err := c.Weir.child(); err != nil {
		return err
	}
	if err := c.Fleet.validate(); err != nil {
		return err
	}
	switch {
	case c.Duration < time.Second:
		return errors.New("--duration must be at least 1s")
	case c.Settle < 0:
		return errors.New("--settle must not be negative")
	case c.Fleet.Replicas > 1:
		return errors.New("--fleet: idle runs one replica at most")
	}
	return nil
}

// Idle measures what an idle `weir serve` costs: it starts one as a child
// process (on a new SQLite file, or with Fleet as one replica on
// PostgreSQL) with a video model and a chat model in front of the mock
// provider, waits until it serves, leaves it alone for Settle, then
// reads its CPU time (user + system, from /proc/<pid>/stat) and its
// threads' context switches (from /proc/<pid>/task/*/status) at the
// start and the end of Duration, sending it nothing. It prints the CPU
// per 10 s, as a share of a core against IdleGoal, and the switches per
// second (each one a thread of the process waking or being preempted).
// Linux only.
func Idle(ctx context.Context, out io.Writer, c IdleConfig) error {
	if err := c.validate(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "weir-bench-idle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	up, err := startTasksUpstream(mock.Config{JobDuration: time.Second})
	if err != nil {
		return err
	}
	defer up.srv.Close()
	rest := tasksCatalog(up.url, 100, TasksConfig{PollMin: 250 * time.Millisecond, PollMax: 10 * time.Second})
	key := &weir.APIKey{Name: "bench-idle", Group: "default"}
	var (
		gw    *child
		where string
	)
	if c.Fleet.Replicas > 0 {
		f, err := startFleet(ctx, fleetParams{Weir: c.Weir, Fleet: c.Fleet, Dir: dir, Rest: rest, Key: key})
		if err != nil {
			return err
		}
		defer f.stop()
		gw, where = f.replicas[0], "postgres (one fleet replica, schema "+f.schema.name+"; the server's own CPU not counted)"
	} else {
		var err error
		if gw, _, err = startSQLiteServe(ctx, c.Weir, dir, "", rest, key); err != nil {
			return err
		}
		defer gw.stop()
		where = "sqlite"
	}
	fmt.Fprintf(out, "weir-bench idle: one 'weir serve' on %s, nothing sent; %s to settle, %s measured\n", where, c.Settle, c.Duration)
	select {
	case <-time.After(c.Settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	pid := gw.cmd.Process.Pid
	cpu0, sw0, t0 := cpuTime(pid), switches(pid), time.Now()
	select {
	case <-time.After(c.Duration):
	case <-gw.exited:
		return errors.New("weir serve exited while idle")
	case <-ctx.Done():
		return ctx.Err()
	}
	cpu1, sw1, t1 := cpuTime(pid), switches(pid), time.Now()
	fmt.Fprintln(out, idleLine(cpu1-cpu0, sw1-sw0, t1.Sub(t0)))
	if w := gw.warnings(); w != "" {
		fmt.Fprintf(out, "warnings: %s\n", w)
	}
	return nil
}

// idleLine is Idle's figure: cpu used and context switches made over
// window.
func idleLine(cpu time.Duration, switches int64, window time.Duration) string {
	share := cpu.Seconds() / window.Seconds()
	verdict := "met"
	if share > IdleGoal {
		verdict = "missed"
	}
	per10 := time.Duration(float64(cpu) * float64(10*time.Second) / float64(window))
	return fmt.Sprintf("idle  window %.1fs  cpu %s  %.1f ms per 10s  %.3f%% of a core (goal <= %.1f%%: %s)  context switches %.1f/s",
		window.Seconds(), cpu, float64(per10)/float64(time.Millisecond), share*100, IdleGoal*100, verdict,
		float64(switches)/window.Seconds())
}

// switches is the context switches, voluntary and not, of process pid's
// threads, from /proc/<pid>/task/*/status (Linux; 0 elsewhere). A thread
// that ended meanwhile takes its count with it.
func switches(pid int) int64 {
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			} else if v, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			}
		}
	}
	return n
}
