package fleet

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/weir-gateway/weir/admission"
)

// The fleet listener's side of a session's start. Whoever reaches the
// listener can connect, so a connection is held at the least cost until
// it has shown the fleet's secret: its first frame must be a hello of at
// most maxHello bytes, read within the hello timeout (pings do not extend
// it: Config.HelloTimeout), and at most maxPending connections — maxPendingPerHost from one
// address — are held before their hello at once; more are closed as they
// come. Once the secret is checked, the session's frames may be as large
// as maxFrame, and its timeout is the session timeout.
const (
	// maxHelloWait bounds the default hello timeout: the session
	// timeout, or this if shorter. A replica sends its hello as soon as
	// it has connected.
	maxHelloWait = 5 * time.Second
	// maxPending and maxPendingPerHost bound the connections held before
	// their hello: a fleet's replicas each open one session per term,
	// and their hellos take a round trip.
	maxPending        = 64
	maxPendingPerHost = 8
)

// unauthenticated counts the accepted connections that have not shown
// the secret yet, in all and by remote host.
type unauthenticated struct {
	mu       sync.Mutex
	n        int
	byHost   map[string]int
	refusing bool // the last connection that came was refused
}

// enter takes a place for a connection from host; false: the bound is
// reached, and first says whether this is the first refusal since one
// was let in (so that a flood is logged once).
func (p *unauthenticated) enter(host string) (ok, first bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n >= maxPending || p.byHost[host] >= maxPendingPerHost {
		first = !p.refusing
		p.refusing = true
		return false, first
	}
	if p.byHost == nil {
		p.byHost = make(map[string]int)
	}
	p.n++
	p.byHost[host]++
	p.refusing = false
	return true, false
}

// leave gives back a place enter took.
func (p *unauthenticated) leave(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n--
	if p.byHost[host]--; p.byHost[host] <= 0 {
		delete(p.byHost, host)
	}
}

// remoteHost is the address a connection comes from, without its port.
func remoteHost(nc net.Conn) string {
	a := nc.RemoteAddr()
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// handshake reads the hello of a connection the listener accepted and
// checks the fleet's secret. It returns the session, with the hello, once
// both are good; otherwise the connection is closed (told why first,
// when its hello was one), and ok is false.
func (e *Engine) handshake(nc net.Conn) (c *conn, hello *frame, ok bool) {
	r := newReader(nc)
	_ = nc.SetReadDeadline(time.Now().Add(e.cfg.HelloTimeout))
	hello, err := r.next()
	if err != nil {
		e.cfg.Logger.Debug("fleet session refused: no hello", "remote", nc.RemoteAddr().String(), "error", err)
		_ = nc.Close()
		return nil, nil, false
	}
	switch {
	case hello.Op != opHello || hello.Replica == "":
		e.refuseHello(nc, fmt.Errorf("%w: a session must begin with hello", admission.ErrInvalid))
		return nil, nil, false
	case subtle.ConstantTimeCompare([]byte(hello.Secret), []byte(e.cfg.Secret)) != 1:
		e.cfg.Logger.Warn("fleet session refused: wrong secret", "replica", hello.Replica, "remote", nc.RemoteAddr().String())
		e.refuseHello(nc, fmt.Errorf("%w: wrong fleet secret", admission.ErrInvalid))
		return nil, nil, false
	}
	r.authenticated()
	return newConnReader(nc, e.cfg.SessionTimeout, r), hello, true
}

// refuseHello answers a hello with err and closes the connection, which
// is not authenticated: it gets no session's writer.
func (e *Engine) refuseHello(nc net.Conn, err error) {
	_ = nc.SetWriteDeadline(time.Now().Add(e.cfg.HelloTimeout))
	_ = json.NewEncoder(nc).Encode(&frame{Op: opWelcome, Err: encodeErr(err)})
	_ = nc.Close()
}
