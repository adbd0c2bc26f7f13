package fleet

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
)

// fleetGoroutines returns the goroutines running code of package fleet
// (its non-test files), by goroutine id, with their stacks. A goroutine
// whose only such frame is group.spawn's wrapper has returned from its
// work and is exiting (a group's wait ends as its work does): it is not
// counted.
func fleetGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := make(map[string]string)
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		fields := strings.Fields(header)
		if len(fields) < 2 {
			continue
		}
		lines := strings.Split(frames, "\n")
		working := false
		for i := 0; i+1 < len(lines); i++ {
			fn, file := lines[i], lines[i+1]
			if strings.HasPrefix(fn, "created by ") {
				i++
				continue
			}
			if !strings.HasPrefix(file, "\t") {
				continue
			}
			i++
			if !strings.HasPrefix(fn, "github.com/weir-gateway/weir/fleet.") ||
				strings.Contains(file, "_test.go:") ||
				strings.HasPrefix(fn, "github.com/weir-gateway/weir/fleet.(*group).spawn.func1(") {
				continue
			}
			working = true
		}
		if working {
			out[fields[1]] = g
		}
	}
	return out
}

// newFleetGoroutines fails t with the stacks of the goroutines running
// fleet code that were not running it at before.
func newFleetGoroutines(t *testing.T, before map[string]string, when string) {
	t.Helper()
	var left []string
	for id, g := range fleetGoroutines() {
		if _, ok := before[id]; !ok {
			left = append(left, g)
		}
	}
	if len(left) > 0 {
		sort.Strings(left)
		t.Fatalf("%s: %d goroutines of package fleet left:\n\n%s", when, len(left), strings.Join(left, "\n\n"))
	}
}

// TestCloseJoinsGoroutines: once Close has returned, no goroutine the
// engine started runs, whatever it was doing — a leader's sessions
// with calls waiting at a barrier, a probe of a replica that went away
// waiting for its next turn, a follower's sync under way and its
// redials. Not parallel: it counts the package's goroutines.
func TestCloseJoinsGoroutines(t *testing.T) {
	before := fleetGoroutines()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	ns := startNodesWith(t, guard, func(c *Config) { c.Options.Clock = clk }, "a", "b", "c", "d")
	a, b, c, d := ns["a"], ns["b"], ns["c"], ns["d"]
	all := []*node{a, b, c, d}
	elect(1, a, []string{"a", "b", "c", "d"}, all...)
	ready(t, all...)
	for _, n := range all {
		if err := n.e.SetScope(t.Context(), "s", admission.ScopeConfig{Limit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	tryAcquire(t, b.e, "held", "s")
	waiting := []chan outcome{enqueue(t, c.e, "w1", "s"), enqueue(t, a.e, "w2", "s")}

	// A new term waits for a replica that never syncs: every sync is
	// held at the leader's first barrier.
	elect(2, a, []string{"a", "b", "c", "d", "ghost"}, all...)
	waitUntil(t, "every sync held at the new term's first barrier", func() bool {
		l := leaderOf(a.e)
		if l == nil || l.epoch != 2 {
			return false
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		w := l.stages[scoped].waiting
		return len(w) == 1 && w["ghost"]
	})
	// d goes away, and cannot come back: the leader probes, on its
	// clock, whether it died.
	d.silence()
	d.mu.Lock()
	for _, nc := range d.conns {
		_ = nc.(*silentConn).Conn.Close()
	}
	d.mu.Unlock()
	waitUntil(t, "the leader probes whether d died", func() bool {
		l := leaderOf(a.e)
		l.mu.Lock()
		defer l.mu.Unlock()
		for p := range l.watching {
			if p.replica == "d" {
				return true
			}
		}
		return false
	})

	for _, n := range all {
		n.e.Close()
	}
	for _, n := range all {
		select {
		case <-n.serving:
		case <-time.After(guard):
			t.Fatalf("%s: Serve still runs after Close", n.id)
		}
	}
	newFleetGoroutines(t, before, "after Close")
	for _, ch := range waiting {
		if o := wait(t, ch, "a waiter when its engine closed"); !errors.Is(o.err, admission.ErrClosed) {
			t.Fatalf("a waiter when its engine closed: %+v, %v; want ErrClosed", o.lease, o.err)
		}
	}
}

// TestCloseJoinsAcceptedSessions: Close joins the connections its
// listener accepted that are still handshaking, closes the listener
// (Serve returns), and ends the calls waiting for a leader at once.
func TestCloseJoinsAcceptedSessions(t *testing.T) {
	before := fleetGoroutines()
	e := New(Config{Replica: "a", Gen: 1, Secret: testSecret, SessionTimeout: guard, Unavailable: guard})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serving := make(chan error, 1)
	go func() { serving <- e.Serve(ln) }()
	// One that never says hello, one that stops in the middle of it.
	dialFrom(t, ln.Addr().String(), "")
	half := dialFrom(t, ln.Addr().String(), "")
	if _, err := half.Write([]byte(`{"op":"hello","rep`)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both connections accepted", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.owned) == 3 // the listener and the two
	})
	called := make(chan error, 1)
	go func() {
		_, err := e.Scope(context.Background(), "s")
		called <- err
	}()

	e.Close()
	select {
	case err := <-serving:
		if err == nil {
			t.Fatal("Serve returned nil once Close closed its listener")
		}
	case <-time.After(guard):
		t.Fatal("Serve still runs after Close")
	}
	select {
	case err := <-called:
		if !errors.Is(err, admission.ErrClosed) {
			t.Fatalf("a call waiting for a leader: %v, want ErrClosed", err)
		}
	case <-time.After(guard / 2):
		t.Fatal("a call waiting for a leader still waits after Close")
	}
	newFleetGoroutines(t, before, "after Close")
	if err := e.Serve(ln); !errors.Is(err, admission.ErrClosed) {
		t.Fatalf("Serve on a closed engine: %v, want ErrClosed", err)
	}
}

// leaderOf is e's leader of the term it leads, or nil.
func leaderOf(e *Engine) *leader {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lead
}

// waitUntil waits, for up to guard, until cond holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, guard)
		}
		time.Sleep(time.Millisecond)
	}
}
