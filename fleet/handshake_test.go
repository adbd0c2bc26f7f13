package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

const testSecret = "a-fleet-secret-of-some-length"

// leading starts one replica's engine leading epoch 1 on a loopback
// listener, with session timeout st and hello timeout ht (0: the
// default), and returns its listener's address.
func leading(t *testing.T, st, ht time.Duration) (*Engine, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Replica: "a", Gen: 1, Secret: testSecret, SessionTimeout: st, HelloTimeout: ht})
	go e.Serve(ln)
	t.Cleanup(func() { ln.Close() })
	t.Cleanup(e.Close)
	e.SetTerm(Term{Epoch: 1, Leader: "a", Addr: ln.Addr().String()}, true, []string{"a"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.Ready(ctx); err != nil {
		t.Fatalf("the leader is not ready: %v", err)
	}
	return e, ln.Addr().String()
}

// dialFrom opens a connection to addr from the loopback address from
// ("" for any), closed when the test ends.
func dialFrom(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// closedWithin reads nc until the other side closes it (true), or
// within has passed with the connection still open (false). What the
// other side sends meanwhile is read and dropped.
func closedWithin(nc net.Conn, within time.Duration) bool {
	_ = nc.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded))
}

// sendFrame writes f as one line.
func sendFrame(t *testing.T, nc net.Conn, f any) {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(append(b, '\n')); err != nil {
		t.Fatalf("send a frame: %v", err)
	}
}

// readFrame reads one frame from br within 10s.
func readFrame(t *testing.T, nc net.Conn, br *bufio.Reader) *frame {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("read a frame: %v", err)
	}
	f := new(frame)
	if err := json.Unmarshal(line, f); err != nil {
		t.Fatalf("a malformed frame %q: %v", line, err)
	}
	return f
}

// TestListenerCutsAnOversizedHello: a peer that has not authenticated
// and sends one endless frame is cut once it passes the hello's bound:
// the listener reads (and holds) no more than its read buffer of it,
// whatever bound an authenticated session's frames have.
func TestListenerCutsAnOversizedHello(t *testing.T) {
	t.Parallel()
	e := New(Config{Replica: "a", Gen: 1, Secret: testSecret, SessionTimeout: 10 * time.Second})
	t.Cleanup(e.Close)
	// A pipe buffers nothing: what the peer wrote is what the listener
	// read.
	server, peer := net.Pipe()
	t.Cleanup(func() { peer.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.accept(server, func() {})
	}()
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	const most = 16 << 20
	written := 0
	for written < most {
		n, err := peer.Write(chunk)
		written += n
		if err != nil {
			break
		}
	}
	if written >= most {
		t.Fatalf("the listener read %d bytes of one frame before any hello; want it cut after %d", written, maxHello)
	}
	if written > 128<<10 {
		t.Errorf("the listener read %d bytes of a frame before any hello; want no more than its read buffer", written)
	}
	<-done
}

// TestListenerCutsAPeerThatOnlyPings: a peer that sends pings but no
// hello is cut, though it is never silent for the session timeout.
func TestListenerCutsAPeerThatOnlyPings(t *testing.T) {
	t.Parallel()
	const st = 600 * time.Millisecond
	_, addr := leading(t, st, 0)
	nc := dialFrom(t, addr, "")
	keepSending(t, nc, []byte(`{"op":"ping"}`+"\n"), st/6)
}

// TestListenerCutsASlowHelloAtTheHelloTimeout: a peer that sends its
// hello a byte at a time, never silent for long, is cut at the hello
// timeout, however long the session timeout is.
func TestListenerCutsASlowHelloAtTheHelloTimeout(t *testing.T) {
	t.Parallel()
	const ht = 500 * time.Millisecond
	_, addr := leading(t, time.Minute, ht)
	nc := dialFrom(t, addr, "")
	start := time.Now()
	keepSending(t, nc, []byte(`{`), 50*time.Millisecond)
	if took := time.Since(start); took < ht/2 {
		t.Errorf("cut after %s; want the hello timeout (%s)", took, ht)
	}
}

// keepSending writes b to nc every interval until the listener closes
// nc; it fails the test if that takes 10s.
func keepSending(t *testing.T, nc net.Conn, b []byte, interval time.Duration) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		closedWithin(nc, 20*time.Second)
	}()
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return
		case <-tick.C:
			_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := nc.Write(b); err != nil {
				<-closed
				return
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("a peer that sends %q and no hello is still connected after %s; want it cut", b, time.Since(start))
			}
		}
	}
}

// TestListenerCapsUnauthenticated: past maxPendingPerHost connections
// from one address, or maxPending in all, that have not sent their hello,
// the listener closes more as they come; one that authenticates gives
// its place back.
func TestListenerCapsUnauthenticated(t *testing.T) {
	t.Parallel()
	// Hellos time out late: only the bound closes a connection here.
	_, addr := leading(t, 10*time.Second, time.Minute)

	var held []net.Conn
	for range maxPendingPerHost {
		held = append(held, dialFrom(t, addr, "127.0.0.1"))
	}
	extra := dialFrom(t, addr, "127.0.0.1")
	if !closedWithin(extra, 5*time.Second) {
		t.Fatalf("a connection past %d from one address that have not authenticated is held; want it closed", maxPendingPerHost)
	}
	for i, nc := range held {
		if closedWithin(nc, 10*time.Millisecond) {
			t.Fatalf("held connection %d was closed; want it waiting for its hello", i)
		}
	}

	// One authenticates: its place goes to the next.
	br := bufio.NewReader(held[0])
	sendFrame(t, held[0], frame{Op: opHello, Epoch: 1, Replica: "z", Gen: 1, Secret: testSecret})
	if w := readFrame(t, held[0], br); w.Op != opWelcome || w.Err != nil {
		t.Fatalf("hello answered with %+v; want a welcome", w)
	}
	next := dialFrom(t, addr, "127.0.0.1")
	if closedWithin(next, 200*time.Millisecond) {
		t.Fatal("a connection after one authenticated was closed; want the place given back")
	}

	// Other addresses (the rest of 127/8 is loopback too) fill the
	// listener's bound in all.
	n := maxPendingPerHost
	for host := 2; n < maxPending; host++ {
		for i := 0; i < maxPendingPerHost && n < maxPending; i++ {
			dialFrom(t, addr, "127.0.0."+strconv.Itoa(host))
			n++
		}
	}
	last := dialFrom(t, addr, "127.0.1.1")
	if !closedWithin(last, 5*time.Second) {
		t.Fatalf("a connection past %d in all that have not authenticated is held; want it closed", maxPending)
	}
}

// TestListenerTakesLargeFramesOnceAuthenticated: after its hello, a
// replica's frames may be far larger than the hello's bound.
func TestListenerTakesLargeFramesOnceAuthenticated(t *testing.T) {
	t.Parallel()
	_, addr := leading(t, 10*time.Second, 0)
	nc := dialFrom(t, addr, "")
	br := bufio.NewReader(nc)
	sendFrame(t, nc, frame{Op: opHello, Epoch: 1, Replica: "z", Gen: 1, Secret: testSecret})
	if w := readFrame(t, nc, br); w.Op != opWelcome || w.Err != nil {
		t.Fatalf("hello answered with %+v; want a welcome", w)
	}
	big := strings.Repeat("s", 2<<20)
	sendFrame(t, nc, frame{ID: 7, Op: opScope, Epoch: 1, Scope: big})
	for {
		f := readFrame(t, nc, br)
		if f.Op == opReply && f.ID == 7 {
			break
		}
	}
}

// TestListenerRefusesAWrongSecret: a hello with another secret is told
// so and closed.
func TestListenerRefusesAWrongSecret(t *testing.T) {
	t.Parallel()
	_, addr := leading(t, 10*time.Second, 0)
	nc := dialFrom(t, addr, "")
	br := bufio.NewReader(nc)
	sendFrame(t, nc, frame{Op: opHello, Epoch: 1, Replica: "z", Gen: 1, Secret: "not-the-fleet-secret"})
	w := readFrame(t, nc, br)
	if w.Op != opWelcome || w.Err == nil || !strings.Contains(w.Err.Message, "wrong fleet secret") {
		t.Fatalf("a wrong secret answered with %+v; want a welcome refusing it", w)
	}
	if !closedWithin(nc, 5*time.Second) {
		t.Fatal("the connection with a wrong secret is still open")
	}
}
