package e2e

// The fleet listener is open to whoever reaches it: what only a real
// leader process shows is its memory while strangers send it frames.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// logField is field of the first log line of g whose message is msg.
func (g *gateway) logField(t *testing.T, msg, field string) string {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.logs {
		if l.msg != msg {
			continue
		}
		var v map[string]any
		if json.Unmarshal([]byte(l.raw), &v) == nil {
			if s, ok := v[field].(string); ok {
				return s
			}
		}
	}
	t.Fatalf("no %q log line with %s", msg, field)
	return ""
}

// procKB is a field of /proc/<pid>/status counted in kB: VmRSS, the
// resident memory now, or VmHWM, its peak.
func procKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc to read the leader's memory from: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, rest)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestFleetListenerAuthenticatesFirst: ten connections to the leader's
// fleet listener that never show the fleet's secret, each sending the
// head of a hello and then one endless frame, are cut once past the
// hello's bound, and the leader's resident memory, at its peak, does not
// grow with what they send. The fleet serves on.
func TestFleetListenerAuthenticatesFirst(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	f := startFleet(t, 1, chatFleetCatalog(up.URL, 2))
	id := f.leader(t, 20*time.Second)
	f.ready(t, id)
	g := f.rs[id]
	addr := g.logField(t, "weir serving", "fleet_addr")
	pid := g.cmd.Process.Pid
	rssBefore, peakBefore := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")

	const (
		conns = 10
		most  = 16 << 20 // bytes each sends, if it is not cut first
	)
	type result struct {
		written int
		closed  bool
		err     error
	}
	results := make([]result, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				results[i].err = err
				return
			}
			defer nc.Close()
			_ = nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			w, _ := nc.Write([]byte(`{"op":"hello","replica":"stranger","secret":"`))
			chunk := bytes.Repeat([]byte("x"), 256<<10)
			for w < most {
				n, err := nc.Write(chunk)
				w += n
				if err != nil {
					break
				}
			}
			results[i].written = w
			// The leader closes it: a read ends with EOF or a reset,
			// not the deadline.
			_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.Copy(io.Discard, nc)
			var ne net.Error
			results[i].closed = !(errors.As(err, &ne) && ne.Timeout())
		})
	}
	wg.Wait()
	rssAfter, peakAfter := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")
	t.Logf("leader VmRSS %d → %d kB, VmHWM %d → %d kB", rssBefore, rssAfter, peakBefore, peakAfter)

	for i, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("connection %d: %v", i, r.err)
		case r.written >= most:
			t.Errorf("connection %d sent all %d bytes of one frame without a hello; want it cut after the hello's bound", i, r.written)
		case !r.closed:
			t.Errorf("connection %d is open 10s after it stopped sending; want it closed", i)
		}
	}
	// What is sent is 160 MiB; what the leader may hold of it is a read
	// buffer per connection (and the kernel's socket buffers, which are
	// not its resident memory).
	if grew := peakAfter - peakBefore; grew > 32<<10 {
		t.Errorf("the leader's resident peak grew by %d kB while unauthenticated peers sent frames; want it not to grow with them", grew)
	}

	_, key := g.createKey(t, "--name", "after")
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")}); rep.Status != http.StatusOK {
		t.Fatalf("after the strangers: %d %s", rep.Status, rep.Body)
	}
}
