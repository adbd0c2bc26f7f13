package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// nodeForgetAfter is edge.forget_after in TestNodeForgotten.
const nodeForgetAfter = 3 * time.Second

// TestNodeForgotten: a node that does not come back is forgotten
// edge.forget_after after it went (its scope leaves /admin/queues, the
// node /admin/nodes), and at once by weir nodes forget, which refuses a
// connected node; a forgotten node serves again when it dials in.
func TestNodeForgotten(t *testing.T) {
	t.Parallel()
	rt := startUpstream(t, mock.Config{})
	catalog := strings.Replace(nodeCatalog(), "\n\nmodels:", "\n  forget_after: "+nodeForgetAfter.String()+"\n\nmodels:", 1)
	g := startGateway(t, "", catalog)
	stays := newNode(t, g, "gpu-stays", rt.URL, 1)
	leaves := newNode(t, g, "gpu-leaves", rt.URL, 1)
	g.serving(t, stays.id, 0)
	gen := g.serving(t, leaves.id, 0)

	forget := func(name string) (string, error) {
		cmd := exec.Command(weirBin, "nodes", "forget", name, "--addr", g.URL)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := forget("gpu-stays"); err == nil || !strings.Contains(out, "is connected") {
		t.Fatalf("forget a connected node: %v\n%s", err, out)
	}

	// By an operator, at once.
	kill(t, stays)
	waitFor(t, 10*time.Second, "gpu-stays to be gone", func() bool { return !g.node(t, stays.id).Connected })
	out, err := forget("gpu-stays")
	if err != nil || !strings.Contains(out, "forgot node gpu-stays ("+stays.id+"); retired 1 scopes") {
		t.Fatalf("forget a gone node: %v\n%s", err, out)
	}
	if n := g.node(t, stays.id); n.ID != "" {
		t.Errorf("/admin/nodes still lists the forgotten node: %+v", n)
	}
	if _, ok := g.scopes(t)["node:"+stays.id+"/rt"]; ok {
		t.Error("/admin/queues still has the forgotten node's scope")
	}

	// By the bound.
	kill(t, leaves)
	waitFor(t, 10*time.Second, "gpu-leaves to be gone", func() bool { return !g.node(t, leaves.id).Connected })
	if _, ok := g.scopes(t)["node:"+leaves.id+"/rt"]; !ok {
		t.Fatal("the gone node's scope went at once, not after forget_after")
	}
	took := waitFor(t, nodeForgetAfter+10*time.Second, "gpu-leaves to be forgotten", func() bool { return g.node(t, leaves.id).ID == "" })
	if took < nodeForgetAfter-nodeGone {
		t.Errorf("forgotten %s after it was seen gone; want about forget_after (%s)", took, nodeForgetAfter)
	}
	if _, ok := g.scopes(t)["node:"+leaves.id+"/rt"]; ok {
		t.Error("/admin/queues still has the scope of the node forgotten after forget_after")
	}
	if g.logCount("edge: a node gone for edge.forget_after forgotten; its scopes are retired") != 1 {
		t.Errorf("the gateway did not log the forget:\n%s", g.log())
	}

	leaves.start(t)
	g.serving(t, leaves.id, gen)
}

// kill ends n's process at once (SIGKILL) and waits for it.
func kill(t *testing.T, n *edgeNode) {
	t.Helper()
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
}
