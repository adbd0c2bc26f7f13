package bench

import (
	"context"
	"errors"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/config"
)

// Weir is how the harness reaches the gateway it measures. cmd/weir-bench
// fills it in: the weir binary for the scenarios that run `weir serve` as
// a child, and package serve's Main for the one that starts the gateway
// in this process.
type Weir struct {
	// Exe is the weir binary that Drain, Restart, SyncWaiters and
	// Overhead's fleet targets run as child processes.
	Exe string
	// ServeArgs run the gateway from Exe; the harness appends
	// "-c" and a config file. cmd/weir-bench: ["serve"].
	ServeArgs []string
	// FloorExe and FloorArgs run SyncWaiters' floor server (ServeFloor)
	// as a child; the harness appends "--upstream" URL "--limit" N.
	// cmd/weir-bench: its own binary and ["sync-waiters-floor"].
	FloorExe  string
	FloorArgs []string
	// ProxyArgs run Overhead's plain proxy (ServeProxy) from FloorExe as
	// a child, under OverheadConfig.OutOfProcess; the harness appends
	// "--upstream" URL "--listen" address. cmd/weir-bench:
	// ["overhead-proxy"].
	ProxyArgs []string
	// Start starts a gateway in this process on cfg and returns once it
	// serves; Overhead measures it.
	Start func(ctx context.Context, cfg *config.Config) (Gateway, error)
	// StartTraced is Start with tracing on, every request traced and its
	// spans exported by OTLP/HTTP to otlpURL (http://host:port). Overhead
	// needs it for its weir+trace target (OverheadConfig.Tracing).
	StartTraced func(ctx context.Context, cfg *config.Config, otlpURL string) (Gateway, error)
	// CreateKey stores a new API key k in store, filling in its id, and
	// returns its secret, as `weir keys create` does.
	CreateKey func(ctx context.Context, store weir.Store, k *weir.APIKey) (secret string, err error)
	// CreateNode stores a new edge node named name in store and returns
	// it with its token, as `weir nodes create` does. Overhead needs it
	// for its edge target (OverheadConfig.Edge).
	CreateNode func(ctx context.Context, store weir.NodeStore, name string) (weir.Node, string, error)
}

// Gateway is a gateway started in this process by Weir.Start.
type Gateway interface {
	// Addr is the address it serves HTTP on.
	Addr() string
	// Store is its storage, where Overhead creates its key.
	Store() weir.Store
	// NodeStore is the same storage's edge nodes, where Overhead creates
	// its node.
	NodeStore() weir.NodeStore
	// EdgeAddr is the address its edge listener serves nodes on; "" when
	// its config has none.
	EdgeAddr() string
	// Scopes are its admission engine's scopes.
	Scopes(ctx context.Context) []admission.ScopeStats
	// Stop stops it.
	Stop(ctx context.Context) error
}

// child checks that w can start child processes.
func (w Weir) child() error {
	switch {
	case w.Exe == "":
		return errors.New("bench: Weir.Exe, the weir binary, is required")
	case len(w.ServeArgs) == 0:
		return errors.New("bench: Weir.ServeArgs are required")
	case w.CreateKey == nil:
		return errors.New("bench: Weir.CreateKey is required")
	}
	return nil
}
