package serve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/keys"
)

// newHub makes the edge hub when the config has an edge listener (nil
// otherwise); startEdge serves it once the catalog is applied.
func (m *Main) newHub() (*edge.Hub, error) {
	cfg := m.Config.Edge
	if cfg.Listen == "" {
		return nil, nil
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("edge.tls_cert and edge.tls_key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return edge.New(edge.Config{HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout, TLS: tlsCfg},
		edge.Deps{Engine: m.Engine, Authenticate: m.authenticateNode, Logger: m.Logger, Metrics: m.Metrics}), nil
}

// authenticateNode finds the node whose token this is: an unknown or
// revoked one is refused.
func (m *Main) authenticateNode(ctx context.Context, token string) (edge.Identity, error) {
	n, err := m.DB.NodeByHash(ctx, keys.Hash(token))
	switch {
	case errors.Is(err, weir.ErrNotFound):
		return edge.Identity{}, edge.ErrUnauthenticated
	case err != nil:
		return edge.Identity{}, err
	case !n.Active():
		return edge.Identity{}, edge.ErrUnauthenticated
	}
	return edge.Identity{ID: n.ID, Name: n.Name}, nil
}

// startEdge listens for nodes on edge.listen.
func (m *Main) startEdge() error {
	if m.Hub == nil {
		return nil
	}
	ln, err := net.Listen("tcp", m.Config.Edge.Listen)
	if err != nil {
		return fmt.Errorf("edge.listen: %w", listenError(m.Config.Edge.Listen, err))
	}
	srv := m.Hub.Server()
	m.edgeLn = ln
	go func() { _ = srv.Serve(m.Hub.Guard(ln)) }()
	// Stop ends the nodes' sessions at once: their streams never end by
	// themselves, and the engine is closed right after.
	m.stopEdge = srv.Stop
	return nil
}

// EdgeAddr is the address the edge listener serves nodes on; "" without
// one (edge.listen unset) or before Start.
func (m *Main) EdgeAddr() string {
	if m.edgeLn == nil {
		return ""
	}
	return m.edgeLn.Addr().String()
}

// startBoard keeps this replica's place on the fleet's board of nodes:
// it reads the other replicas' offers, and offers its own nodes, if it
// listens for any, at relayAddr; and it runs the relay's probes.
func (m *Main) startBoard() {
	var offer *fleet.Offer
	if m.Hub != nil {
		offer = &fleet.Offer{Addr: m.relayAddr(), Served: m.Hub.Served, Changes: m.Hub.Changes(),
			Nodes: func(ctx context.Context) any { return m.Hub.Nodes(ctx) }}
		m.Logger.Info("edge: this replica's nodes serve the fleet", "relay_addr", offer.Addr)
	}
	m.stopBoard = goUntilStopped(func(ctx context.Context) { m.Board.Run(ctx, offer) })
	// The replicas this one relays runs to are probed while the runs
	// last; Stop ends the probes only once the API has drained.
	m.stopProbes = goUntilStopped(m.Relay.Run)
}

// goUntilStopped runs f in a goroutine until the returned func is called,
// which cancels f's context and waits for it to return.
func goUntilStopped(f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// relayAddr is the base URL the other replicas relay this replica's
// node runs to: fleet.relay_advertise, or http:// and the address the API
// listens on (this host's name if it listens on every interface).
func (m *Main) relayAddr() string {
	if a := m.Config.Fleet.RelayAdvertise; a != "" {
		return strings.TrimSuffix(a, "/")
	}
	addr := m.ln.Addr().String()
	if ta, ok := m.ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		if host, err := os.Hostname(); err == nil && host != "" {
			addr = net.JoinHostPort(host, strconv.Itoa(ta.Port))
		}
	}
	return "http://" + addr
}

// fleetNodes is /admin/nodes in a fleet: this replica's nodes and the
// other replicas', as they last published them on the board.
func (m *Main) fleetNodes(ctx context.Context) []edge.NodeView {
	var local []edge.NodeView
	if m.Hub != nil {
		local = m.Hub.Nodes(ctx)
	}
	var remote []edge.NodeView
	for _, rn := range m.Board.Nodes() {
		var vs []edge.NodeView
		if err := json.Unmarshal(rn.Nodes, &vs); err != nil {
			m.Logger.Warn("edge: another replica's view of its nodes is unreadable", "replica", rn.Replica, "error", err)
			continue
		}
		for _, v := range vs {
			v.Replica, v.AgeMs = rn.Replica, rn.Age.Milliseconds()
			remote = append(remote, v)
		}
	}
	return edge.FleetViews(local, remote)
}
