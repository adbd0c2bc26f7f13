package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/keys"
)

// newNodes makes what reaches the edge nodes: the hub, when the config
// has an edge listener; in a fleet, the board where the replicas offer
// their nodes and the relay that runs requests on the others'.
func (m *Main) newNodes() error {
	cfg := m.Config.Edge
	if cfg.Listen != "" {
		var tlsCfg *tls.Config
		if cfg.TLSCert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
			if err != nil {
				return fmt.Errorf("edge.tls_cert and edge.tls_key: %w", err)
			}
			tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		forget := cfg.ForgetAfter
		if forget == 0 {
			forget = -1 // never
		}
		m.Hub = edge.New(edge.Config{HeartbeatInterval: cfg.HeartbeatInterval, HeartbeatTimeout: cfg.HeartbeatTimeout, ForgetAfter: forget, TLS: tlsCfg},
			edge.Deps{Engine: m.Engine, Authenticate: m.authenticateNode, Logger: m.Logger, Metrics: m.Metrics})
	}
	if m.Member == nil {
		return nil
	}
	var err error
	if m.Board, err = fleet.NewBoard(m.DB.Fleet, fleet.BoardConfig{Replica: m.Member.Replica(), Offer: m.offer(), Logger: m.Logger}); err != nil {
		return err
	}
	m.Relay = edge.NewRelay(edge.RelayConfig{Secret: m.Member.Secret(), MaxBodyBytes: m.Config.Server.MaxBodyBytes},
		edge.RelayDeps{Hub: m.Hub, Directory: m.Board, Metrics: m.Metrics, Logger: m.Logger})
	return nil
}

// nodes is where the gateway finds edge nodes: the fleet's relay, this
// process's hub, or none.
func (m *Main) nodes() gateway.Nodes {
	switch {
	case m.Relay != nil:
		return m.Relay
	case m.Hub != nil:
		return m.Hub
	}
	return nil
}

// offer is what this replica offers the fleet on its board: its nodes,
// at relayAddr, if it listens for any; nil otherwise.
func (m *Main) offer() *fleet.Offer {
	if m.Hub == nil {
		return nil
	}
	o := &fleet.Offer{Addr: m.relayAddr(), Served: m.Hub.Served, Changes: m.Hub.Changes(), Nodes: m.Hub.Nodes}
	m.Logger.Info("edge: this replica's nodes serve the fleet", "relay_addr", o.Addr)
	return o
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

// EdgeAddr is the address the edge listener serves nodes on; "" without
// one (edge.listen unset) or before Start.
func (m *Main) EdgeAddr() string {
	if m.edgeLn == nil {
		return ""
	}
	return m.edgeLn.Addr().String()
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
		for _, v := range rn.Nodes {
			v.Replica, v.AgeMs = rn.Replica, rn.Age.Milliseconds()
			remote = append(remote, v)
		}
	}
	return edge.FleetViews(local, remote)
}
