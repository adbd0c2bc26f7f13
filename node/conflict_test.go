package node

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge"
)

// conflictLog is what an agent logs when the gateway refuses it for
// another process with its token.
const conflictLog = "node: the gateway refuses this process: another weir node process is connected with this node's token, " +
	"and a token serves one process at a time; give each process its own token (weir nodes create), or stop the other"

var conflictProvider = Provider{ID: "rt", URL: "http://127.0.0.1:8000/v1", Slots: 2, Models: []Model{{Name: "llama", Runtime: "meta/llama"}}}

// connected is the Hub's one node: whether it has a session, and its
// generation.
func connected(t *testing.T, hub *edge.Hub) (bool, uint64) {
	t.Helper()
	ns := hub.Nodes(context.Background())
	if len(ns) != 1 {
		t.Fatalf("the hub has %d nodes; want 1", len(ns))
	}
	return ns[0].Connected, ns[0].Generation
}

// beats advances the clock n heartbeat intervals, each once the Hub has
// taken the node's heartbeat of the last.
func beats(t *testing.T, hub *edge.Hub, fc *clock.Fake, n int) {
	t.Helper()
	for range n {
		fc.Advance(time.Second)
		waitBeat(t, hub)
	}
}

// TestSecondProcessWithTheTokenRefused: a second `weir node` with the
// token of a node that is connected is refused, says why at ERROR and
// tries again seldom, while the first keeps its session and generation;
// once the first has gone, the second takes over.
func TestSecondProcessWithTheTokenRefused(t *testing.T) {
	t.Parallel()
	hub, addr, fc := startHub(t, nil)
	first, stopFirst := startAgent(t, addr, fc, conflictProvider)
	first.wait(t, "node: session started")
	gen := generationOf(t, first)

	second, _ := startAgent(t, addr, fc, conflictProvider)
	level, attrs := second.wait(t, conflictLog)
	if level != slog.LevelError || !strings.Contains(attrs["refusal"], "gpu-a") || !strings.Contains(attrs["refusal"], "own token") {
		t.Errorf("the refused process logged %s %v; want an ERROR naming the node and what to do", level, attrs)
	}
	// The gateway's wait: the first session's heartbeat timeout and an
	// interval, on the clock that has not moved.
	if attrs["retry_in"] != "4s" {
		t.Errorf("the first refusal waits %s; want what the gateway said, 4s", attrs["retry_in"])
	}
	if ok, g := connected(t, hub); !ok || g != gen {
		t.Fatalf("after the refusal the node is connected %v at generation %d; want the first session, %d", ok, g, gen)
	}

	// The second tries again while the first heartbeats: refused again,
	// and now it waits long.
	beats(t, hub, fc, 4)
	_, attrs = second.waitNth(t, conflictLog, 2)
	if attrs["retry_in"] != "1m0s" {
		t.Errorf("the second refusal waits %s; want the conflict backoff, 1m0s", attrs["retry_in"])
	}
	beats(t, hub, fc, 5)
	if ok, g := connected(t, hub); !ok || g != gen {
		t.Fatalf("after the second refusal the node is connected %v at generation %d; want the first session, %d", ok, g, gen)
	}
	if strings.Contains(first.text(), "node: session ended") {
		t.Errorf("the first process's session ended:\n%s", first.text())
	}

	// The first stops: the second's next attempt takes over.
	stopFirst()
	deadline := time.Now().Add(within)
	for ok, _ := connected(t, hub); ok; ok, _ = connected(t, hub) {
		if time.Now().After(deadline) {
			t.Fatal("the hub keeps the session of the process that stopped")
		}
		// The hub says nothing when a session ends: look again shortly.
		<-time.After(time.Millisecond)
	}
	fc.Advance(time.Minute)
	second.wait(t, "node: session started")
	if ok, g := connected(t, hub); !ok || g <= gen {
		t.Errorf("after the first stopped the node is connected %v at generation %d; want the second's, after %d", ok, g, gen)
	}
}

// TestRestartTakesOverAHalfOpenSession: a node restarted while the
// gateway still holds its dead process's session (the connection broke
// with nothing sent) is refused until that session misses its
// heartbeats, then registers, within the wait the gateway gave.
func TestRestartTakesOverAHalfOpenSession(t *testing.T) {
	t.Parallel()
	var ln *severable
	hub, addr, fc := startHub(t, func(inner net.Listener) net.Listener {
		ln = &severable{Listener: inner}
		return ln
	})
	first, stopFirst := startAgent(t, addr, fc, conflictProvider)
	first.wait(t, "node: session started")
	gen := generationOf(t, first)
	ln.sever(0)
	stopFirst()

	restarted, _ := startAgent(t, addr, fc, conflictProvider)
	_, attrs := restarted.wait(t, conflictLog)
	if attrs["retry_in"] != "4s" {
		t.Fatalf("the restarted process waits %s; want what the gateway said, 4s", attrs["retry_in"])
	}
	for range 4 {
		fc.Advance(time.Second)
	}
	restarted.wait(t, "node: session started")
	if ok, g := connected(t, hub); !ok || g <= gen {
		t.Errorf("after the restart the node is connected %v at generation %d; want a session after %d", ok, g, gen)
	}
}

// TestReconnectOfTheSameProcessSupersedes: a process whose connection
// broke reconnects at once, superseding its own half-open session: it is
// the same instance, not a second process.
func TestReconnectOfTheSameProcessSupersedes(t *testing.T) {
	t.Parallel()
	var ln *severable
	hub, addr, fc := startHub(t, func(inner net.Listener) net.Listener {
		ln = &severable{Listener: inner}
		return ln
	})
	logs, _ := startAgent(t, addr, fc, conflictProvider)
	logs.wait(t, "node: session started")
	gen := generationOf(t, logs)
	ln.sever(0)
	logs.wait(t, "node: dialing the gateway again")
	// Its backoff, well short of the Hub's heartbeat timeout.
	fc.Advance(200 * time.Millisecond)
	logs.waitNth(t, "node: session started", 2)
	if ok, g := connected(t, hub); !ok || g <= gen {
		t.Errorf("after the reconnect the node is connected %v at generation %d; want a session after %d", ok, g, gen)
	}
	if strings.Contains(logs.text(), conflictLog) {
		t.Errorf("the reconnecting process was refused as another:\n%s", logs.text())
	}
}

// severable is a listener whose connections a test can sever: the
// node's side sees its connection closed, the Hub's side nothing more
// (its reads wait until it closes the connection, its writes are
// dropped), as when a node's machine dies with no packet sent.
type severable struct {
	net.Listener
	mu    sync.Mutex
	conns []*severableConn
}

func (l *severable) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &severableConn{Conn: nc, gone: make(chan struct{}), closed: make(chan struct{})}
	l.mu.Lock()
	l.conns = append(l.conns, c)
	l.mu.Unlock()
	return c, nil
}

// sever severs the ith connection accepted.
func (l *severable) sever(i int) {
	l.mu.Lock()
	c := l.conns[i]
	l.mu.Unlock()
	c.cut.Do(func() {
		close(c.gone)
		_ = c.Conn.Close()
	})
}

type severableConn struct {
	net.Conn
	gone, closed chan struct{}
	cut, close   sync.Once
}

func (c *severableConn) severed() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

func (c *severableConn) Read(p []byte) (int, error) {
	if !c.severed() {
		n, err := c.Conn.Read(p)
		if err == nil || !c.severed() {
			return n, err
		}
	}
	<-c.closed
	return 0, net.ErrClosed
}

func (c *severableConn) Write(p []byte) (int, error) {
	if !c.severed() {
		n, err := c.Conn.Write(p)
		if err == nil || !c.severed() {
			return n, err
		}
	}
	return len(p), nil
}

func (c *severableConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// text is the messages logged so far, one a line.
func (l *logRecorder) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		b.WriteString(r.Message)
		b.WriteByte('\n')
	}
	return b.String()
}
