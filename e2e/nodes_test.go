package e2e

// Edge nodes: real `weir node` processes dialing a real `weir serve`,
// with the mock provider as each node's runtime. What only processes
// show: a node killed or paused mid-run, and what the gateway makes of
// it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// The gateway's heartbeat settings in these tests: a node is gone after
// a second without one.
const (
	nodeHeartbeat = 200 * time.Millisecond
	nodeGone      = time.Second
)

// nodeCatalog serves model "local" from edge nodes alone.
func nodeCatalog() string {
	return fmt.Sprintf(`edge:
  listen: 127.0.0.1:0
  heartbeat_interval: %s
  heartbeat_timeout: %s

models:
  - name: local
    kind: chat
`, nodeHeartbeat, nodeGone)
}

// edgeAddr is where g listens for nodes, from its log.
func (g *gateway) edgeAddr(t *testing.T) string {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.logs {
		var v struct {
			Msg  string `json:"msg"`
			Addr string `json:"edge_addr"`
		}
		if json.Unmarshal([]byte(l.raw), &v) == nil && v.Msg == "edge nodes dial in" {
			return v.Addr
		}
	}
	t.Fatal("the gateway did not log its edge address")
	return ""
}

// edgeNode is one `weir node` process and its config.
type edgeNode struct {
	id     string // the node's id, from weir nodes create
	config string
	env    []string // added to its process's environment
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	out    bytes.Buffer
}

// newNode makes a node on g (weir nodes create) with a provider "rt" of
// slots on runtimeURL serving "local" as the runtime's gpt-4o-mini, and
// starts it.
func newNode(t *testing.T, g *gateway, name, runtimeURL string, slots int) *edgeNode {
	t.Helper()
	return newNodeEnv(t, g, nil, name, runtimeURL, slots)
}

// newNodeEnv is newNode with env (KEY=value) added to the node process's
// environment.
func newNodeEnv(t *testing.T, g *gateway, env []string, name, runtimeURL string, slots int) *edgeNode {
	t.Helper()
	out := runWeir(t, "nodes", "create", "-c", g.Config, "--name", name)
	id := regexp.MustCompile(`node_[0-9a-f]{12}`).FindString(out)
	token := regexp.MustCompile(`wn-[0-9A-Za-z]+`).FindString(out)
	if id == "" || token == "" {
		t.Fatalf("no id and token in the output of weir nodes create:\n%s", out)
	}
	n := &edgeNode{id: id, config: filepath.Join(t.TempDir(), "node.yaml"), env: env}
	text := fmt.Sprintf(`gateway: %s
token: %s
stall_timeout: 30s
providers:
  - id: rt
    url: %s
    slots: %d
    models:
      - name: local
        runtime: gpt-4o-mini
`, g.edgeAddr(t), token, runtimeURL, slots)
	if err := os.WriteFile(n.config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	return n
}

// start runs the node's process (again); it is killed when the test ends.
func (n *edgeNode) start(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command(weirBin, "node", "-c", n.config)
	n.cmd.Env = append(cleanEnv(), n.env...)
	n.cmd.Stdout, n.cmd.Stderr = n, n
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := n.cmd, n.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("node %s log:\n%s", n.id, n.log())
		}
	})
}

func (n *edgeNode) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.out.Write(p)
}

func (n *edgeNode) log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.out.String()
}

// nodeView is a node as /admin/nodes shows it.
type nodeView struct {
	ID         string `json:"id"`
	Connected  bool   `json:"connected"`
	Generation uint64 `json:"generation"`
	Replica    string `json:"replica"`
	Providers  []struct {
		ID       string `json:"id"`
		Slots    int64  `json:"slots"`
		Used     int64  `json:"used"`
		Queued   int    `json:"queued"`
		Orphaned bool   `json:"orphaned"`
	} `json:"providers"`
}

// node is g's view of node id (zero if it has not registered).
func (g *gateway) node(t *testing.T, id string) nodeView {
	t.Helper()
	resp, err := client.Get(g.URL + "/admin/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Nodes []nodeView `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, n := range v.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nodeView{}
}

// serving waits until g has node id connected at a generation newer
// than after, and returns that generation.
func (g *gateway) serving(t *testing.T, id string, after uint64) uint64 {
	t.Helper()
	var gen uint64
	waitFor(t, 20*time.Second, "node "+id+" to be connected", func() bool {
		n := g.node(t, id)
		gen = n.Generation
		return n.Connected && n.Generation > after && len(n.Providers) == 1 && !n.Providers[0].Orphaned
	})
	return gen
}

// TestNodeKilledMidStream: kill -9 a node while it streams one answer
// and two requests wait for its one slot: the stream ends with an error
// event in OpenAI's shape, the waiters fail at once with no_candidate
// (they have no other candidate), the slot is released, and the node,
// started again, serves under a newer generation. The runtime never
// sees more than the node's slots.
func TestNodeKilledMidStream(t *testing.T) {
	t.Parallel()
	rt := startUpstream(t, mock.Config{TokensPerSecond: 5, CompletionTokens: 200})
	g := startGateway(t, "", nodeCatalog())
	_, key := g.createKey(t, "--name", "edge")
	n := newNode(t, g, "gpu-kill", rt.URL, 1)
	gen := g.serving(t, n.id, 0)

	stream := g.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: streamBody("local")})
	waitFor(t, 10*time.Second, "the stream to start on the runtime", func() bool { return rt.Mock.Stats().InFlight == 1 })
	waiting := []<-chan sent{
		g.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}),
		g.sendAsync(t.Context(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}),
	}
	waitFor(t, 10*time.Second, "two requests queued on the node's slot", func() bool {
		p := g.node(t, n.id).Providers
		return len(p) == 1 && p[0].Queued == 2
	})

	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	rep := await(t, stream)
	if rep.Status != http.StatusOK || !strings.Contains(string(rep.Body), `"error":{`) || !strings.Contains(string(rep.Body), `"code":"upstream_error"`) {
		t.Errorf("the cut stream: %d, ending %q; want its events, then an error event", rep.Status, tail(rep.Body))
	}
	for _, w := range waiting {
		checkError(t, await(t, w), http.StatusServiceUnavailable, "no_candidate")
	}
	if took := time.Since(killed); took > nodeGone+2*time.Second {
		t.Errorf("the waiters' answers took %s after the kill; want about at once", took)
	}
	// The waiters' answers can come before the hub's view of the node
	// says what the engine did (the stream's lease is released as its
	// handler returns): the view must catch up, at once.
	waitFor(t, 2*time.Second, "the killed node to be gone, its slot orphaned and free", func() bool {
		v := g.node(t, n.id)
		return !v.Connected && len(v.Providers) == 1 && v.Providers[0].Orphaned && v.Providers[0].Used == 0
	})

	// The runtime answers at once from here on.
	if err := rt.Mock.Update(func(c *mock.Config) { c.TokensPerSecond = 0 }); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	g.serving(t, n.id, gen)
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}); rep.Status != http.StatusOK {
		t.Fatalf("after the restart: %d %s", rep.Status, rep.Body)
	}
	if st := rt.Mock.Stats(); st.PeakInFlight > 1 {
		t.Errorf("the runtime saw %d at once; the node has 1 slot", st.PeakInFlight)
	}
}

// TestNodePausedIsFenced: a node stopped (SIGSTOP) past the heartbeat
// timeout is declared gone on the gateway's clock and its slots admit
// nothing; resumed (SIGCONT), it finds its session over and registers
// again under a newer generation, and serves.
func TestNodePausedIsFenced(t *testing.T) {
	t.Parallel()
	rt := startUpstream(t, mock.Config{})
	g := startGateway(t, "", nodeCatalog())
	_, key := g.createKey(t, "--name", "edge")
	n := newNode(t, g, "gpu-pause", rt.URL, 2)
	gen := g.serving(t, n.id, 0)
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}); rep.Status != http.StatusOK {
		t.Fatalf("before the pause: %d %s", rep.Status, rep.Body)
	}

	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 10*time.Second, "the paused node to be declared gone", func() bool { return !g.node(t, n.id).Connected })
	if took > nodeGone+2*time.Second {
		t.Errorf("the paused node was declared gone after %s; want about the heartbeat timeout (%s)", took, nodeGone)
	}
	checkError(t, g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}), http.StatusServiceUnavailable, "no_candidate")

	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	g.serving(t, n.id, gen)
	if rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("local")}); rep.Status != http.StatusOK {
		t.Fatalf("after the pause: %d %s", rep.Status, rep.Body)
	}
}

// tail is the end of an answer, for messages.
func tail(b []byte) string {
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}
