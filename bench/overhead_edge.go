package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/node"
)

// The edge target's model, provider and slots.
const (
	// edgeModel is routed to the node alone. It is as long as the weir
	// target's model name, so that both send requests of one size; the
	// runtime knows it as gpt-4o-mini, as the mock's platform model does.
	edgeModel    = "gpt-4o-edge"
	edgeProvider = "mock"
	// edgeSlots is the most one provider may register (package edge's
	// bound): like generous, checked on every request, never reached.
	edgeSlots = 4096
)

// The edge target's requests: the weir target's, for edgeModel.
var (
	edgeBody       = strings.Replace(chatBody, `"gpt-4o-mini"`, `"`+edgeModel+`"`, 1)
	edgeStreamBody = strings.Replace(chatStreamBody, `"gpt-4o-mini"`, `"`+edgeModel+`"`, 1)
)

// edgeCatalog gives Overhead's gateway an edge listener and a model
// served by edge nodes alone: no platform model is a candidate, so every
// request of the edge target goes through the node.
func edgeCatalog(cfg *config.Config) {
	cfg.Edge.Listen = "127.0.0.1:0"
	cfg.Models = append(cfg.Models, config.Model{Name: edgeModel, Kind: weir.KindChat, Nodes: weir.NodesFirst})
}

// edgeNode is the edge target's node: its agent runs in this process.
type edgeNode struct {
	node weir.Node
	log  *nodeLog
}

// scope is the node's provider's slots, the scope its requests hold
// instead of the platform model's.
func (e *edgeNode) scope() string { return weir.NodeScope(e.node.ID, edgeProvider) }

// startEdgeTarget creates a node, runs its agent against the gateway's
// edge listener with the mock (mockURL, its /v1) as its one provider,
// waits for its session, and adds the target "edge" to rig. The agent is
// configured as `weir node` configures it from a file with only the
// required fields, and logs as it would at its default level (info),
// into a tally instead of stderr.
func startEdgeTarget(ctx context.Context, c OverheadConfig, rig *overheadRig, mockURL string, auth http.Header) error {
	addr := rig.gateway.EdgeAddr()
	if addr == "" {
		return fmt.Errorf("edge: the gateway has no edge listener")
	}
	n, token, err := c.Weir.CreateNode(ctx, rig.gateway.NodeStore(), "bench-edge")
	if err != nil {
		return fmt.Errorf("edge: create the node: %w", err)
	}
	log := newNodeLog()
	agent, err := node.New(node.Config{
		Gateway: addr,
		Token:   token,
		Version: "bench",
		// Nothing is in flight when the rig closes: stop at once.
		DrainTimeout: -1,
		Providers: []node.Provider{{
			ID:     edgeProvider,
			URL:    mockURL,
			Slots:  edgeSlots,
			Models: []node.Model{{Name: edgeModel, Runtime: "gpt-4o-mini"}},
		}},
	}, node.Deps{Logger: slog.New(log)})
	if err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	labelled(runCtx, "node", func(ctx context.Context) {
		go func() {
			defer close(ran)
			_ = agent.Run(ctx)
		}()
	})
	rig.closers = append(rig.closers, func() { stop(); <-ran })
	rig.edge = &edgeNode{node: n, log: log}
	select {
	case <-log.started:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("edge: the node opened no session with the gateway within 10s; its log: %s", log.warnings())
	case <-ctx.Done():
		return ctx.Err()
	}
	const chat = "/v1/chat/completions"
	rig.targets = append(rig.targets, overheadTarget{
		name: "edge", urls: []string{"http://" + rig.gateway.Addr() + chat}, header: auth,
		body: edgeBody, streamBody: edgeStreamBody,
	})
	return nil
}

// nodeLog is the agent's slog handler: each record is formatted as `weir
// node` formats it at its default level, info, and dropped, so that the
// node spends what it would on its log; its warnings and errors are
// tallied for the report, and started closes when its first session
// starts.
type nodeLog struct {
	slog.Handler
	*nodeLogState
}

type nodeLogState struct {
	warns   warnTally
	started chan struct{}
	once    sync.Once
}

func newNodeLog() *nodeLog {
	return &nodeLog{
		Handler:      slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}),
		nodeLogState: &nodeLogState{started: make(chan struct{})},
	}
}

func (h *nodeLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "node: session started" {
		h.once.Do(func() { close(h.started) })
	}
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		h.warns.add(r.Message, b.String())
	}
	return h.Handler.Handle(ctx, r)
}

func (h *nodeLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &nodeLog{Handler: h.Handler.WithAttrs(attrs), nodeLogState: h.nodeLogState}
}

func (h *nodeLog) WithGroup(name string) slog.Handler {
	return &nodeLog{Handler: h.Handler.WithGroup(name), nodeLogState: h.nodeLogState}
}

// warnings summarises the WARN and ERROR records the agent logged.
func (h *nodeLog) warnings() string { return h.warns.summary() }
