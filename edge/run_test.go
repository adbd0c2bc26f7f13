package edge

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

// offer waits for the next Offer on s.
func (s *testSession) offer() *edgepb.Offer {
	s.t.Helper()
	for {
		m, err := s.stream.Recv()
		if err != nil {
			s.t.Fatalf("want an offer: %v", err)
		}
		if o := m.GetOffer(); o != nil {
			return o
		}
	}
}

// openRun opens a Run stream for run id at generation gen with token.
func (b *testBundle) openRun(t testing.TB, token, id string, gen uint64) (edgepb.Edge_RunClient, error) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
	rs, err := b.client.Run(ctx)
	if err != nil {
		return nil, err
	}
	// A stream the server has ended already (it refused the token) fails
	// the send with io.EOF; its status is what the next Recv returns.
	if err := rs.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{RunId: id, Generation: gen}}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return rs, nil
}

// readBody reads a run's request body off rs.
func readBody(t testing.TB, rs edgepb.Edge_RunClient) string {
	t.Helper()
	var sb strings.Builder
	for {
		m, err := rs.Recv()
		if err != nil {
			t.Fatalf("reading the run's body: %v", err)
		}
		if m.GetBodyEnd() != nil {
			return sb.String()
		}
		sb.Write(m.GetChunk().GetData())
	}
}

func up(m any) *edgepb.RunUp {
	switch v := m.(type) {
	case *edgepb.RunHead:
		return &edgepb.RunUp{Msg: &edgepb.RunUp_Head{Head: v}}
	case *edgepb.Chunk:
		return &edgepb.RunUp{Msg: &edgepb.RunUp_Chunk{Chunk: v}}
	case *edgepb.RunEnd:
		return &edgepb.RunUp{Msg: &edgepb.RunUp_End{End: v}}
	}
	panic("not a RunUp message")
}

type doResult struct {
	body string
	err  error
}

// do runs c on node_a's provider p in the background.
func (b *testBundle) do(ctx context.Context, gen uint64, c provider.Call) <-chan doResult {
	out := make(chan doResult, 1)
	go func() {
		resp, err := b.hub.Do(ctx, weir.NodeTarget{Node: "node_a", Gen: gen, Provider: "p"}, c)
		if err != nil {
			out <- doResult{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		out <- doResult{body: string(body), err: err}
	}()
	return out
}

// TestRunRoundTrip: a call reaches the node's provider with its body (in
// chunks for a large one), and the node's answer reaches the caller
// byte for byte.
func TestRunRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	big := `{"model":"rt-m","prompt":"` + strings.Repeat("x", 3*chunkBytes) + `"}`
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(big), Stream: true})
	o := s.offer()
	if o.Provider != "p" || o.Path != "/chat/completions" || !o.Stream {
		t.Fatalf("offer %+v", o)
	}
	rs, err := b.openRun(t, "wn-a", o.RunId, s.gen)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, rs); got != big {
		t.Fatalf("the node got a body of %d bytes, want the %d sent", len(got), len(big))
	}
	for _, m := range []any{&edgepb.RunHead{Status: 200, Headers: map[string]string{"Content-Type": "text/event-stream"}},
		&edgepb.Chunk{Data: []byte("data: 1\n\n")}, &edgepb.Chunk{Data: []byte("data: [DONE]\n\n")},
		&edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}} {
		if err := rs.Send(up(m)); err != nil {
			t.Fatal(err)
		}
	}
	r := <-res
	if r.err != nil || r.body != "data: 1\n\ndata: [DONE]\n\n" {
		t.Fatalf("answer %q, %v", r.body, r.err)
	}
}

// TestRunErrorStatus: a runtime's error status is the upstream's error,
// classified as an adapter classifies it.
func TestRunErrorStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	rs, err := b.openRun(t, "wn-a", s.offer().RunId, s.gen)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, rs)
	for _, m := range []any{&edgepb.RunHead{Status: 429}, &edgepb.Chunk{Data: []byte(`{"error":{"message":"slow down"}}`)},
		&edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}} {
		if err := rs.Send(up(m)); err != nil {
			t.Fatal(err)
		}
	}
	var pe *provider.Error
	if r := <-res; !errors.As(r.err, &pe) || pe.Status != 429 || !strings.Contains(string(pe.Body), "slow down") || !pe.Retryable() {
		t.Fatalf("a 429 of the runtime: %v", r.err)
	}
}

// TestRunNodeGoneBeforeAnswer: a node whose session ends before it
// answers fails the call with a retryable error at once.
func TestRunNodeGoneBeforeAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	s.offer()
	s.cancel()
	var pe *provider.Error
	if r := <-res; !errors.As(r.err, &pe) || !pe.Retryable() || pe.Status != 0 {
		t.Fatalf("a call whose node left: %v, want a retryable error", r.err)
	}
	// And a call for a generation that is not live fails without an offer.
	if _, err := b.hub.Do(t.Context(), weir.NodeTarget{Node: "node_a", Gen: s.gen, Provider: "p"}, provider.Call{}); !errors.As(err, &pe) {
		t.Fatalf("a call to a gone node: %v", err)
	}
}

// TestRunCancelledByClient: a caller that goes away mid-answer cancels
// the run on the node: its Run stream ends, Canceled.
func TestRunCancelledByClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	ctx, cancel := context.WithCancel(t.Context())
	res := b.do(ctx, s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	rs, err := b.openRun(t, "wn-a", s.offer().RunId, s.gen)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, rs)
	if err := rs.Send(up(&edgepb.RunHead{Status: 200})); err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(up(&edgepb.Chunk{Data: []byte("data: 1\n\n")})); err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the caller's read after it left: %v", r.err)
	}
	for {
		m, err := rs.Recv()
		if status.Code(err) == codes.Canceled {
			return
		}
		if err != nil || m.GetCancel() == nil {
			t.Fatalf("the run's stream went on after the caller left: %v, %v", m, err)
		}
	}
}

// TestRunStreamsTrustATokenForItsTTL: a Run stream whose token was
// accepted within TokenCacheTTL is authenticated without Authenticate;
// past it Authenticate is asked again, and a token revoked meanwhile is
// refused.
func TestRunStreamsTrustATokenForItsTTL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 4, "m"))
	// run offers a run and opens its stream: the body, or the refusal's code.
	run := func() (string, codes.Code) {
		t.Helper()
		res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{"n":1}`)})
		rs, err := b.openRun(t, "wn-a", s.offer().RunId, s.gen)
		if err != nil {
			t.Fatal(err)
		}
		m, err := rs.Recv()
		if err != nil {
			return "", status.Code(err)
		}
		body := string(m.GetChunk().GetData())
		for _, m := range []any{&edgepb.RunHead{Status: 200}, &edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}} {
			if err := rs.Send(up(m)); err != nil {
				t.Fatal(err)
			}
		}
		if r := <-res; r.err != nil {
			t.Fatalf("a run: %v", r.err)
		}
		return body, codes.OK
	}
	session := b.auths.Load()
	for range 3 {
		if body, code := run(); code != codes.OK || body != `{"n":1}` {
			t.Fatalf("a run within the TTL: body %q, %s", body, code)
		}
	}
	if n := b.auths.Load() - session; n != 0 {
		t.Errorf("3 runs within the TTL of the session's check asked Authenticate %d times, want 0", n)
	}
	// past moves the clock past the TTL, the session kept alive.
	past := func() {
		s.heartbeat()
		s.sync()
		b.clock.Advance(2 * time.Second)
	}
	past()
	if _, code := run(); code != codes.OK || b.auths.Load()-session != 1 {
		t.Errorf("a run past the TTL: %s after %d checks, want OK after 1", code, b.auths.Load()-session)
	}
	b.revoke("wn-a")
	past()
	if _, code := run(); code != codes.Unauthenticated {
		t.Errorf("a run of a token revoked more than the TTL ago: %s, want Unauthenticated", code)
	}
}

// TestRunStreamRefusals: a Run stream for a run never offered, for an
// older generation, for another node's run, or opened twice is refused,
// and the run it names is not touched.
func TestRunStreamRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	other := b.open(t, "wn-b")
	other.welcome(testProvider("p", 2, "m"))
	res := b.do(t.Context(), s.gen, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	id := s.offer().RunId
	refused := func(name, token, id string, gen uint64, want codes.Code) {
		t.Helper()
		rs, err := b.openRun(t, token, id, gen)
		if err == nil {
			_, err = rs.Recv()
		}
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %s", name, err, want)
		}
	}
	refused("never offered", "wn-a", "run_nope", s.gen, codes.NotFound)
	refused("older generation", "wn-a", id, s.gen-1, codes.FailedPrecondition)
	refused("another node's run", "wn-b", id, other.gen, codes.NotFound)
	refused("no token", "", id, s.gen, codes.Unauthenticated)
	rs, err := b.openRun(t, "wn-a", id, s.gen)
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, rs)
	refused("opened twice", "wn-a", id, s.gen, codes.NotFound)
	if err := rs.Send(up(&edgepb.RunEnd{Kind: edgepb.RunEnd_STALLED, Message: "no tokens for 60s"})); err != nil {
		t.Fatal(err)
	}
	var pe *provider.Error
	if r := <-res; !errors.As(r.err, &pe) || !pe.Timeout {
		t.Fatalf("a stalled run: %v, want a timeout", r.err)
	}
}

// TestOfferSaysLong: the offer of a call that holds a long-context slot
// says so, for the node's own count.
func TestOfferSaysLong(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, long := range []bool{false, true} {
		go func() {
			resp, err := b.hub.Do(ctx, weir.NodeTarget{Node: "node_a", Gen: s.gen, Provider: "p", Long: long}, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
			if err == nil {
				resp.Body.Close()
			}
		}()
		if o := s.offer(); o.Long != long {
			t.Errorf("offer of a call with Long %v says %v", long, o.Long)
		}
	}
}
