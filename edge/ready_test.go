package edge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

// openReady opens a Run stream ahead for node token's session gen.
func (b *testBundle) openReady(t *testing.T, token string, gen uint64) edgepb.Edge_RunClient {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	rs, err := b.client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{Generation: gen, Ready: true}}}); err != nil {
		t.Fatal(err)
	}
	return rs
}

// waitReady waits until the node named name has n Run streams waiting.
func (b *testBundle) waitReady(t *testing.T, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, v := range b.hub.Nodes(t.Context()) {
			if v.Name == name && v.ReadyStreams == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d ready streams: %+v", name, n, b.hub.Nodes(t.Context()))
		}
		// The hub says nothing when it parks a stream: look again shortly.
		<-time.After(time.Millisecond)
	}
}

// recvBody reads a run's request body off rs, from any goroutine.
func recvBody(rs edgepb.Edge_RunClient) (string, error) {
	var sb strings.Builder
	for {
		m, err := rs.Recv()
		if err != nil {
			return "", err
		}
		if m.GetBodyEnd() != nil {
			return sb.String(), nil
		}
		sb.Write(m.GetChunk().GetData())
	}
}

// readySession is node_a's session with a provider of 2 slots and one
// ready stream, parked.
func readySession(t *testing.T) (*testBundle, *testSession, edgepb.Edge_RunClient) {
	t.Helper()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	rs := b.openReady(t, "wn-a", s.gen)
	b.waitReady(t, "gpu-a", 1)
	return b, s, rs
}

// readyOffer waits for the Offer on a ready stream.
func readyOffer(t *testing.T, rs edgepb.Edge_RunClient) *edgepb.Offer {
	t.Helper()
	m, err := rs.Recv()
	if err != nil {
		t.Fatalf("want an offer on the ready stream: %v", err)
	}
	o := m.GetOffer()
	if o == nil {
		t.Fatalf("want an offer on the ready stream, got %v", m)
	}
	return o
}

// TestReadyStreamCarriesRuns: a Run stream opened ahead carries the runs
// offered on it one after another, the request body after its offer and
// the answer back, whole in its head or in chunks; none is offered on
// the Control stream meanwhile.
func TestReadyStreamCarriesRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	w := s.welcome(testProvider("p", 2, "m"))
	if w.ReadyRuns != 2 || !w.WholeHeads {
		t.Fatalf("welcome allows %d ready streams (whole heads %v), want 2 (true)", w.ReadyRuns, w.WholeHeads)
	}
	rs := b.openReady(t, "wn-a", s.gen)
	b.waitReady(t, "gpu-a", 1)

	length := make(chan int64, 1)
	go func() {
		resp, err := b.hub.Do(t.Context(), weir.NodeTarget{Node: "node_a", Gen: s.gen, Provider: "p"}, provider.Call{Path: "/chat/completions", Body: []byte(`{"n":1}`)})
		if err != nil {
			length <- -2
			return
		}
		resp.Body.Close()
		length <- resp.ContentLength
	}()
	o := readyOffer(t, rs)
	if o.Provider != "p" || o.Path != "/chat/completions" || o.RunId == "" {
		t.Fatalf("offer %+v", o)
	}
	if got := readBody(t, rs); got != `{"n":1}` {
		t.Fatalf("body %q", got)
	}
	if err := rs.Send(up(&edgepb.RunHead{Status: 200, Body: []byte(`{"ok":1}`), Complete: true})); err != nil {
		t.Fatal(err)
	}
	if n := <-length; n != int64(len(`{"ok":1}`)) {
		t.Fatalf("a whole head's answer has length %d, want %d", n, len(`{"ok":1}`))
	}

	b.waitReady(t, "gpu-a", 1) // back, for the next run
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{"n":2}`), Stream: true})
	o2 := readyOffer(t, rs)
	if o2.RunId == o.RunId || !o2.Stream {
		t.Fatalf("second offer %+v", o2)
	}
	readBody(t, rs)
	for _, m := range []any{&edgepb.RunHead{Status: 200, Body: []byte("data: 1\n\n")}, &edgepb.Chunk{Data: []byte("data: [DONE]\n\n")},
		&edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}} {
		if err := rs.Send(up(m)); err != nil {
			t.Fatal(err)
		}
	}
	if r := <-res; r.err != nil || r.body != "data: 1\n\ndata: [DONE]\n\n" {
		t.Fatalf("a streamed answer: %q, %v", r.body, r.err)
	}
	b.waitReady(t, "gpu-a", 1)
	s.sync() // fails on any message but the sync's refusal: no offer came on Control
}

// TestReadyStreamCutShort: a run cut short on a ready stream ends the
// stream (Canceled), which never carries another; with no ready stream
// left the next offer goes on the Control stream.
func TestReadyStreamCutShort(t *testing.T) {
	t.Parallel()
	b, s, rs := readySession(t)
	ctx, cancel := context.WithCancel(t.Context())
	res := b.do(ctx, s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	readyOffer(t, rs)
	readBody(t, rs)
	for _, m := range []any{&edgepb.RunHead{Status: 200}, &edgepb.Chunk{Data: []byte("data: 1\n\n")}} {
		if err := rs.Send(up(m)); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the caller's read after it left: %v", r.err)
	}
	if _, err := rs.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("the cut run's stream: %v, want Canceled", err)
	}
	b.waitReady(t, "gpu-a", 0)

	res = b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	o := s.offer()
	run, err := b.openRun(t, "wn-a", o.RunId, s.gen)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, run)
	if err := run.Send(up(&edgepb.RunHead{Status: 200, Body: []byte("ok"), Complete: true})); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.err != nil || r.body != "ok" {
		t.Fatalf("the run offered on Control: %q, %v", r.body, r.err)
	}
}

// TestReadyStreamRefusals: ready streams beyond the Welcome's bound, of
// an older generation or naming a run are refused and change nothing.
func TestReadyStreamRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 1, "m"))
	b.openReady(t, "wn-a", s.gen)
	b.waitReady(t, "gpu-a", 1)
	refused := func(name string, rs edgepb.Edge_RunClient, want codes.Code) {
		t.Helper()
		if _, err := rs.Recv(); status.Code(err) != want {
			t.Errorf("%s: %v, want %s", name, err, want)
		}
	}
	refused("one over the bound", b.openReady(t, "wn-a", s.gen), codes.ResourceExhausted)
	refused("older generation", b.openReady(t, "wn-a", s.gen-1), codes.FailedPrecondition)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer wn-a")
	named, err := b.client.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := named.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{RunId: "run_x", Generation: s.gen, Ready: true}}}); err != nil {
		t.Fatal(err)
	}
	refused("naming a run", named, codes.InvalidArgument)
	b.waitReady(t, "gpu-a", 1)
}

// TestReadyStreamProtocol: a node that breaks the protocol on a ready
// stream fails that run and loses the stream (InvalidArgument).
func TestReadyStreamProtocol(t *testing.T) {
	t.Parallel()
	b, s, rs := readySession(t)
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	readyOffer(t, rs)
	readBody(t, rs)
	if err := rs.Send(up(&edgepb.Chunk{Data: []byte("no head")})); err != nil {
		t.Fatal(err)
	}
	var pe *provider.Error
	if r := <-res; !errors.As(r.err, &pe) || !strings.Contains(pe.Error(), "a chunk before the run's head") {
		t.Fatalf("a chunk before the head: %v", r.err)
	}
	if _, err := rs.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("the stream of a broken run: %v, want InvalidArgument", err)
	}
	b.waitReady(t, "gpu-a", 0)
}

// TestReadyStreamSessionEnds: the session's end fails the run on a ready
// stream with a retryable error and ends the stream.
func TestReadyStreamSessionEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	rs := b.openReady(t, "wn-a", s.gen)
	idle := b.openReady(t, "wn-a", s.gen)
	b.waitReady(t, "gpu-a", 2)
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	// One of the two waiting streams takes the run.
	var taken edgepb.Edge_RunClient
	got := make(chan edgepb.Edge_RunClient, 2)
	for _, c := range []edgepb.Edge_RunClient{rs, idle} {
		go func() {
			if m, err := c.Recv(); err == nil && m.GetOffer() != nil {
				got <- c
			}
		}()
	}
	taken = <-got
	readBody(t, taken)
	if err := taken.Send(up(&edgepb.RunHead{Status: 200})); err != nil {
		t.Fatal(err)
	}
	s.cancel()
	var pe *provider.Error
	if r := <-res; !errors.As(r.err, &pe) || !pe.Retryable() {
		t.Fatalf("a run whose session ended: %v, want a retryable error", r.err)
	}
	if _, err := taken.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the run's stream after the session ended: %v, want Unavailable", err)
	}
}

// TestReadyStreamsUnderLoad: many calls at once share a few ready
// streams and the Control stream; each gets its own answer.
func TestReadyStreamsUnderLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 4, "m"))
	// The node: four ready streams and the Control stream, each run
	// answered with its own body.
	echo := func(rs edgepb.Edge_RunClient, body string, stream bool) error {
		if stream {
			for _, m := range []any{&edgepb.RunHead{Status: 200}, &edgepb.Chunk{Data: []byte(body)}, &edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}} {
				if err := rs.Send(up(m)); err != nil {
					return err
				}
			}
			return nil
		}
		return rs.Send(up(&edgepb.RunHead{Status: 200, Body: []byte(body), Complete: true}))
	}
	for range 4 {
		rs := b.openReady(t, "wn-a", s.gen)
		go func() {
			for {
				m, err := rs.Recv()
				if err != nil {
					return
				}
				body, err := recvBody(rs)
				if err != nil || echo(rs, body, m.GetOffer().GetStream()) != nil {
					return
				}
			}
		}()
	}
	b.waitReady(t, "gpu-a", 4)
	go func() {
		for {
			m, err := s.stream.Recv()
			if err != nil {
				return
			}
			o := m.GetOffer()
			if o == nil {
				continue
			}
			go func() {
				run, err := b.openRun(t, "wn-a", o.RunId, s.gen)
				if err != nil {
					return
				}
				if body, err := recvBody(run); err == nil {
					_ = echo(run, body, o.Stream)
				}
			}()
		}
	}()
	const calls = 64
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			body := fmt.Sprintf(`{"i":%d}`, i)
			r := <-b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(body), Stream: i%2 == 0})
			if r.err != nil || r.body != body {
				errs <- fmt.Errorf("call %d: %q, %v", i, r.body, r.err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	b.waitReady(t, "gpu-a", 4)
}
