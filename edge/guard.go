package edge

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/peer"

	"github.com/weir-gateway/weir/clock"
)

// guard keeps the Hub's connections that have not authenticated, by
// their local and remote addresses, with the timers that close them.
type guard struct {
	mu       sync.Mutex
	pending  map[connKey]*guardedConn
	refusing bool // the last connection that came was refused
}

// connKey names a TCP connection: its two ends.
type connKey struct{ local, remote string }

func keyOf(local, remote net.Addr) connKey {
	var k connKey
	if local != nil {
		k.local = local.String()
	}
	if remote != nil {
		k.remote = remote.String()
	}
	return k
}

// guardedConn is an accepted connection, while it has not authenticated.
type guardedConn struct {
	net.Conn
	g     *guard
	key   connKey
	timer clock.Timer
}

// Close forgets c before it closes it: its place is free.
func (c *guardedConn) Close() error {
	c.g.forget(c)
	return c.Conn.Close()
}

// forget drops c from the pending connections; it reports whether c was
// there (it had not authenticated).
func (g *guard) forget(c *guardedConn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[c.key] != c {
		return false
	}
	delete(g.pending, c.key)
	if c.timer != nil {
		c.timer.Stop()
	}
	return true
}

// guardedListener is a listener whose connections the Hub's guard
// bounds until they authenticate.
type guardedListener struct {
	net.Listener
	h *Hub
}

// Guard returns ln with its connections that have not authenticated
// bounded, as the package doc's "The edge listener" says: serve the
// Hub's Server on it.
func (h *Hub) Guard(ln net.Listener) net.Listener { return &guardedListener{Listener: ln, h: h} }

// Accept returns the next connection within the bound of those not
// authenticated; it closes those past it and goes on.
func (l *guardedListener) Accept() (net.Conn, error) {
	g, cfg, log := &l.h.guard, &l.h.cfg, l.h.deps.Logger
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &guardedConn{Conn: nc, g: g, key: keyOf(nc.LocalAddr(), nc.RemoteAddr())}
		g.mu.Lock()
		if len(g.pending) >= cfg.MaxUnauthenticated {
			first := !g.refusing
			g.refusing = true
			g.mu.Unlock()
			if first {
				log.Warn("edge: too many connections that have not authenticated; refusing more until they do or time out",
					"remote", nc.RemoteAddr().String(), "max", cfg.MaxUnauthenticated, "auth_timeout", cfg.AuthTimeout.String())
			}
			_ = nc.Close()
			continue
		}
		g.refusing = false
		if g.pending == nil {
			g.pending = make(map[connKey]*guardedConn)
		}
		g.pending[c.key] = c
		c.timer = cfg.Clock.AfterFunc(cfg.AuthTimeout, func() {
			if g.forget(c) {
				log.Debug("edge: a connection did not authenticate in time; closed", "remote", nc.RemoteAddr().String())
				_ = nc.Close()
			}
		})
		g.mu.Unlock()
		return c, nil
	}
}

// authenticated takes the connection of a stream whose token the Hub
// accepted out of the guard's bound: it is a node's.
func (g *guard) authenticated(ctx context.Context) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return
	}
	key := keyOf(p.LocalAddr, p.Addr)
	g.mu.Lock()
	c := g.pending[key]
	g.mu.Unlock()
	if c != nil {
		g.forget(c)
	}
}
