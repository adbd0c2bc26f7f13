package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider"
)

// pingCounter is a listener whose connections count the HTTP/2 PING
// frames that cross them, both ways.
type pingCounter struct {
	net.Listener
	pings atomic.Int64
}

func (l *pingCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	in, out := l.frames(len(http2.ClientPreface)), l.frames(0)
	return &framedConn{Conn: c, in: in, out: out}, nil
}

// frames returns a writer whose bytes, after skip of them, are read as
// HTTP/2 frames and their PINGs counted.
func (l *pingCounter) frames(skip int) *io.PipeWriter {
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.CopyN(io.Discard, pr, int64(skip))
		fr := http2.NewFramer(nil, pr)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				// Keep the connection's bytes flowing whatever happens.
				_, _ = io.Copy(io.Discard, pr)
				return
			}
			if _, ok := f.(*http2.PingFrame); ok {
				l.pings.Add(1)
			}
		}
	}()
	return pw
}

type framedConn struct {
	net.Conn
	in, out *io.PipeWriter
}

func (c *framedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	_, _ = c.in.Write(p[:n])
	return n, err
}

func (c *framedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	_, _ = c.out.Write(p[:n])
	return n, err
}

func (c *framedConn) Close() error {
	c.in.Close()
	c.out.Close()
	return c.Conn.Close()
}

// TestTunnelSendsNoPings: a streamed answer of many small chunks, gateway
// ← node, costs no PING frames either way. (gRPC's bandwidth estimation,
// on unless the windows are fixed, keeps a ping and its answer going
// for as long as data flows: one round trip for about every chunk.)
func TestTunnelSendsNoPings(t *testing.T) {
	t.Parallel()
	const chunks = 200
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range chunks {
			fmt.Fprintf(w, "data: {\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(rt.Close)

	var ln *pingCounter
	hub, logs, _ := hubAndAgent(t, func(inner net.Listener) net.Listener {
		ln = &pingCounter{Listener: inner}
		return ln
	}, Provider{ID: "rt", URL: rt.URL + "/v1", Slots: 4, Models: []Model{{Name: "llama", Runtime: "meta/llama"}}})

	target := weir.NodeTarget{Node: "node_a", Gen: generationOf(t, logs), Provider: "rt"}
	for range 3 {
		rctx, done := context.WithTimeout(t.Context(), within)
		resp, err := hub.Do(rctx, target, provider.Call{Path: "/chat/completions", Body: []byte(`{"model":"meta/llama","stream":true}`), Stream: true})
		if err != nil {
			done()
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done()
		if err != nil && !errors.Is(err, io.EOF) || n == 0 {
			t.Fatalf("the answer: %d bytes, %v", n, err)
		}
	}
	if n := ln.pings.Load(); n != 0 {
		t.Errorf("%d PING frames crossed the connection for %d chunks", n, 3*chunks)
	}
}
