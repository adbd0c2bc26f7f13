package edge

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// rawConn opens a TCP connection to addr that sends nothing, closed when
// the test ends.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, within)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// closedWithin reads nc until the Hub closes it (true) or d has passed
// (false), dropping what the Hub sends meanwhile (its HTTP/2 settings).
func closedWithin(nc net.Conn, d time.Duration) bool {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded))
}

// eventually polls cond until it holds, for what can be seen only from
// the Hub's state; it fails the test after within.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %s", what, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGuardClosesSilentConnections: a connection that opens no stream
// with an accepted token is closed at the auth timeout, by the Hub's
// clock; a node's connection is not.
func TestGuardClosesSilentConnections(t *testing.T) {
	t.Parallel()
	// Longer than the test runs: gRPC's own handshake timeout, which is
	// this in real time, does not close the connection first.
	const timeout = time.Minute
	b := setupWith(t, func(c *Config) {
		c.AuthTimeout = timeout
		// Only the guard's timers fall due while the test runs.
		c.HeartbeatInterval, c.HeartbeatTimeout, c.TokenRecheck = time.Hour, 2*time.Hour, 3*time.Hour
	}, true)

	silent := rawConn(t, b.addr)
	// The listener accepts in order: once the node's connection, dialed
	// after, is welcomed, the silent one was accepted too.
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m"))

	b.clock.Advance(timeout - time.Millisecond)
	if closedWithin(silent, 50*time.Millisecond) {
		t.Fatal("a silent connection was closed before the auth timeout")
	}
	b.clock.Advance(time.Millisecond)
	if !closedWithin(silent, within) {
		t.Fatalf("a silent connection is open after the auth timeout (%s); want it closed", timeout)
	}
	// The node's connection outlives it.
	b.clock.Advance(timeout)
	s.sync()
}

// TestGuardClosesAConnectionWithABadToken: a connection whose streams
// bring no accepted token is closed at the auth timeout all the same.
func TestGuardClosesAConnectionWithABadToken(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Second
	b := setupWith(t, func(c *Config) { c.AuthTimeout = timeout }, true)
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Up before the stream: the client's picker is ready a moment before
	// the connection's state says so, so a stream refused at once could
	// otherwise find it CONNECTING.
	conn.Connect()
	up, cancelUp := context.WithTimeout(t.Context(), within)
	defer cancelUp()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(up, st) {
			t.Fatalf("the connection is %s; want it up", st)
		}
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer wn-unknown")
	stream, err := edgepb.NewEdgeClient(conn).Control(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a stream with an unknown token: %v; want Unauthenticated", err)
	}
	if st := conn.GetState(); st != connectivity.Ready {
		t.Fatalf("the connection is %s after its stream was refused; want it still up", st)
	}
	b.clock.Advance(timeout)
	wait, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	if !conn.WaitForStateChange(wait, connectivity.Ready) {
		t.Fatalf("a connection with no accepted token is up after the auth timeout (%s); want it closed", timeout)
	}
}

// TestGuardBoundsUnauthenticated: past MaxUnauthenticated connections
// that have not authenticated, the listener closes more as they come;
// one that goes gives its place back.
func TestGuardBoundsUnauthenticated(t *testing.T) {
	t.Parallel()
	const most = 4
	b := setupWith(t, func(c *Config) { c.MaxUnauthenticated = most }, true)
	var held []net.Conn
	for range most {
		held = append(held, rawConn(t, b.addr))
	}
	// Accepted after the others.
	extra := rawConn(t, b.addr)
	if !closedWithin(extra, within) {
		t.Fatalf("a connection past %d that have not authenticated is held; want it closed", most)
	}
	for i, nc := range held {
		if closedWithin(nc, 10*time.Millisecond) {
			t.Fatalf("held connection %d was closed; want it waiting to authenticate", i)
		}
	}
	held[0].Close()
	eventually(t, "the closed connection's place to be free", func() bool {
		b.hub.guard.mu.Lock()
		defer b.hub.guard.mu.Unlock()
		return len(b.hub.guard.pending) < most
	})
	next := rawConn(t, b.addr)
	if closedWithin(next, 200*time.Millisecond) {
		t.Fatal("a connection after one went was closed; want the place given back")
	}
}
