package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider"
)

const testSecret = "fleet-secret-of-at-least-32-bytes!!"

// staticDir is a Directory that knows one replica's targets.
type staticDir struct {
	model, addr string
	targets     []weir.NodeTarget
}

func (d staticDir) Serving(model string) []weir.NodeTarget {
	if model != d.model {
		return nil
	}
	return slices.Clone(d.targets)
}

func (d staticDir) Where(node string, gen uint64) (string, bool) {
	for _, t := range d.targets {
		if t.Node == node && t.Gen == gen {
			return d.addr, true
		}
	}
	return "", false
}

// relayBundle is a fleet of two replicas: here, whose Hub the node
// dialed (the bundle's), serving relays at url; and there, without a
// Hub, that finds the node through its directory.
type relayBundle struct {
	*testBundle
	s           *testSession
	url         string
	here, there *Relay
	target      weir.NodeTarget
	// counts are both relays' (sent by there, taken by here).
	counts *relayCounts
}

// relayCounts counts Relayed calls by "direction/outcome".
type relayCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *relayCounts) Relayed(direction, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[direction+"/"+outcome]++
}

func (c *relayCounts) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func relaySetup(t testing.TB) *relayBundle {
	t.Helper()
	b := setup(t)
	s := b.open(t, "wn-a")
	s.welcome(testProvider("p", 2, "m"))
	counts := &relayCounts{n: map[string]int{}}
	here := NewRelay(RelayConfig{Secret: testSecret}, RelayDeps{Hub: b.hub, Metrics: counts})
	srv := httptest.NewServer(here.Handler())
	t.Cleanup(srv.Close)
	targets := b.hub.Serving("m")
	if len(targets) != 1 {
		t.Fatalf("the hub serves %+v", targets)
	}
	there := NewRelay(RelayConfig{Secret: testSecret}, RelayDeps{Directory: staticDir{model: "m", addr: srv.URL, targets: targets}, Metrics: counts})
	return &relayBundle{testBundle: b, s: s, url: srv.URL, here: here, there: there, target: targets[0], counts: counts}
}

// do runs c on t through r in the background.
func relayDo(ctx context.Context, r *Relay, t weir.NodeTarget, c provider.Call) <-chan doResult {
	out := make(chan doResult, 1)
	go func() {
		resp, err := r.Do(ctx, t, c)
		if err != nil {
			out <- doResult{err: err}
			return
		}
		defer resp.Body.Close()
		if resp.Header.Get(headerRelay) != "" || resp.Header.Get("Content-Type") != "text/event-stream" {
			out <- doResult{err: errors.New("the answer's headers: " + strings.Join(slices.Collect(func(yield func(string) bool) {
				for k := range resp.Header {
					if !yield(k) {
						return
					}
				}
			}), ","))}
			return
		}
		body, err := io.ReadAll(resp.Body)
		out <- doResult{body: string(body), err: err}
	}()
	return out
}

// answer plays the node's side of the next run: it checks the request's
// body and sends msgs.
func (rb *relayBundle) answer(t testing.TB, wantBody string, msgs ...any) edgepb.Edge_RunClient {
	t.Helper()
	o := rb.s.offer()
	if o.Provider != "p" || o.Path != "/chat/completions" || !o.Stream {
		t.Fatalf("offer %+v", o)
	}
	rs, err := rb.openRun(t, "wn-a", o.RunId, rb.s.gen)
	if err != nil {
		t.Fatal(err)
	}
	if got := readBody(t, rs); got != wantBody {
		t.Fatalf("the node got %q, want %q", got, wantBody)
	}
	for _, m := range msgs {
		if err := rs.Send(up(m)); err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

var streamHead = &edgepb.RunHead{Status: 200, Headers: map[string]string{"Content-Type": "text/event-stream"}}

// TestRelayRunsOnTheNodesReplica: a replica without the node offers it
// and relays its run to the replica it dialed; the request and the
// streamed answer cross whole.
func TestRelayRunsOnTheNodesReplica(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	if got := rb.there.Serving("m"); !slices.Equal(got, []weir.NodeTarget{rb.target}) {
		t.Fatalf("there serves %+v", got)
	}
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 3*chunkBytes) + `"}]}`
	res := relayDo(t.Context(), rb.there, rb.target, provider.Call{Path: "/chat/completions", Body: []byte(body), Stream: true})
	rb.answer(t, body, streamHead, &edgepb.Chunk{Data: []byte("data: 1\n\n")}, &edgepb.Chunk{Data: []byte("data: [DONE]\n\n")},
		&edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE})
	if r := <-res; r.err != nil || r.body != "data: 1\n\ndata: [DONE]\n\n" {
		t.Fatalf("answer %q, %v", r.body, r.err)
	}
	if got := rb.counts.get(); !maps.Equal(got, map[string]int{"sent/answer": 1, "taken/answer": 1}) {
		t.Errorf("counted %v", got)
	}
}

// TestRelayKeepsTheRuntimesError: a runtime's error status reaches the
// relaying replica as the upstream's error it is, classified alike.
func TestRelayKeepsTheRuntimesError(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	res := relayDo(t.Context(), rb.there, rb.target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	rb.answer(t, `{}`, &edgepb.RunHead{Status: 429, Headers: map[string]string{"Retry-After": "7"}},
		&edgepb.Chunk{Data: []byte(`{"error":{"message":"slow down"}}`)}, &edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE})
	var pe *provider.Error
	r := <-res
	if !errors.As(r.err, &pe) || pe.Status != 429 || !strings.Contains(string(pe.Body), "slow down") || !pe.Retryable() {
		t.Fatalf("a 429 of the runtime, relayed: %v", r.err)
	}
	if got := rb.counts.get(); !maps.Equal(got, map[string]int{"sent/error": 1, "taken/error": 1}) {
		t.Errorf("counted %v", got)
	}
}

// TestRelayNodeGone: a run for a session that is not the node's live one
// fails as a gone node (no candidate, if none else), without an offer.
func TestRelayNodeGone(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	stale := rb.target
	stale.Gen--
	rb.there.dir = staticDir{model: "m", addr: rb.url, targets: []weir.NodeTarget{stale}}
	_, err := rb.there.Do(t.Context(), stale, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	if !errors.Is(err, weir.ErrNodeGone) {
		t.Fatalf("a run for an older session: %v", err)
	}
	// One the directory does not know has nowhere to go.
	if _, err := rb.there.Do(t.Context(), weir.NodeTarget{Node: "node_b", Gen: 1, Provider: "p"}, provider.Call{}); !errors.Is(err, weir.ErrNodeGone) {
		t.Fatalf("a run for an unknown node: %v", err)
	}
	// And a replica out of reach is a gone node too.
	rb.there.dir = staticDir{model: "m", addr: "http://127.0.0.1:1", targets: []weir.NodeTarget{rb.target}}
	if _, err := rb.there.Do(t.Context(), rb.target, provider.Call{Path: "/chat/completions"}); !errors.Is(err, weir.ErrNodeGone) {
		t.Fatalf("a run through a replica out of reach: %v", err)
	}
}

// relayStart runs c on the bundle's node through r in the background and
// returns the answer once it began; the node's side sends msgs.
func (rb *relayBundle) relayStart(t *testing.T, r *Relay, msgs ...any) (*http.Response, edgepb.Edge_RunClient) {
	t.Helper()
	type started struct {
		resp *http.Response
		err  error
	}
	ch := make(chan started, 1)
	go func() {
		resp, err := r.Do(t.Context(), rb.target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
		ch <- started{resp, err}
	}()
	rs := rb.answer(t, `{}`, msgs...)
	st := <-ch
	if st.err != nil {
		t.Fatal(st.err)
	}
	t.Cleanup(func() { st.resp.Body.Close() })
	return st.resp, rs
}

// readCut reads a relayed answer that is to break after want: it wants
// want, then an upstream's error.
func readCut(t *testing.T, resp *http.Response, want string) *provider.Error {
	t.Helper()
	first := make([]byte, len(want))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != want {
		t.Fatalf("before the break: %q, %v; want %q", first, err, want)
	}
	return readBroken(t, resp)
}

// readBroken reads what is left of resp and wants it to end with an
// upstream's error.
func readBroken(t *testing.T, resp *http.Response) *provider.Error {
	t.Helper()
	pe := readBrokenErr(resp)
	if pe == nil {
		t.Fatal("a broken answer read to its end, or not with an upstream's error")
	}
	return pe
}

// TestRelayCutShort: a node that goes away mid-answer breaks the relayed
// answer; the relaying replica never sees it end whole, whatever framing
// the node's head claimed.
func TestRelayCutShort(t *testing.T) {
	t.Parallel()
	for name, head := range map[string]*edgepb.RunHead{
		"stream":            streamHead,
		"identity framing":  {Status: 200, Headers: map[string]string{"Content-Type": "text/event-stream", "Transfer-Encoding": "identity"}},
		"a shorter length":  {Status: 200, Headers: map[string]string{"Content-Type": "text/event-stream", "Content-Length": "9"}},
		"connection: close": {Status: 200, Headers: map[string]string{"Content-Type": "text/event-stream", "Connection": "close"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rb := relaySetup(t)
			resp, _ := rb.relayStart(t, rb.there, head, &edgepb.Chunk{Data: []byte("data: 1\n\n")})
			if resp.Header.Get("Content-Type") != "text/event-stream" || resp.ContentLength != -1 {
				t.Errorf("the relayed head: %v, length %d", resp.Header, resp.ContentLength)
			}
			first := make([]byte, 9)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatal(err)
			}
			rb.s.cancel()
			readBroken(t, resp)
		})
	}
}

// TestRelayKeepsATimeoutsClass: a run that stalls on the node mid-answer
// reaches the relaying replica as a timeout, as it would be there.
func TestRelayKeepsATimeoutsClass(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	resp, _ := rb.relayStart(t, rb.there, streamHead, &edgepb.Chunk{Data: []byte("data: 1\n\n")},
		&edgepb.RunEnd{Kind: edgepb.RunEnd_STALLED, Message: "no progress for 30s"})
	if pe := readCut(t, resp, "data: 1\n\n"); !pe.Timeout || !strings.Contains(pe.Error(), "no progress") || !errors.Is(pe, weir.ErrNodeStalled) {
		t.Fatalf("the relayed end: %v; want the node's stall (weir.ErrNodeStalled), a timeout", pe)
	}
}

// TestRelayBoundsAFrozenReplica: a replica that takes a run and then
// says nothing more (frozen, or cut off) is given up on, by the
// relaying replica's own bounds: for the answer to begin, and for each
// more of it.
func TestRelayBoundsAFrozenReplica(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	fc := clock.NewFake(time.Unix(0, 0))
	there := NewRelay(RelayConfig{Secret: testSecret, HeaderTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second, Clock: fc},
		RelayDeps{Directory: staticDir{model: "m", addr: rb.url, targets: []weir.NodeTarget{rb.target}}})

	// No answer begins: the node takes the offer and never answers.
	errc := make(chan error, 1)
	go func() {
		_, err := there.Do(t.Context(), rb.target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
		errc <- err
	}()
	rb.s.offer()
	var err error
	gotErr := make(chan struct{})
	go func() { err = <-errc; close(gotErr) }()
	if !fc.AdvanceUntil(gotErr, time.Second, time.Minute, 10*time.Second) {
		t.Fatal("the header bound never ended the wait")
	}
	if pe, ok := errors.AsType[*provider.Error](err); !ok || !pe.Timeout {
		t.Fatalf("a run whose answer never began: %v; want a timeout", err)
	}

	// The answer begins, then nothing more comes.
	resp, _ := rb.relayStart(t, there, streamHead, &edgepb.Chunk{Data: []byte("data: 1\n\n")})
	first := make([]byte, 9)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	var pe *provider.Error
	read := make(chan struct{})
	go func() { pe = readBrokenErr(resp); close(read) }()
	if !fc.AdvanceUntil(read, time.Second, time.Minute, 10*time.Second) {
		t.Fatal("the idle bound never ended the read")
	}
	if pe == nil || !pe.Timeout {
		t.Fatalf("a stalled relayed answer: %v; want a timeout", pe)
	}
}

// readBrokenErr reads what is left of resp and returns its upstream's
// error, if it ended with one.
func readBrokenErr(resp *http.Response) *provider.Error {
	_, err := io.ReadAll(resp.Body)
	pe, _ := errors.AsType[*provider.Error](err)
	return pe
}

// TestRelayCancelledByClient: a caller of the relaying replica that goes
// away cancels the run on the node.
func TestRelayCancelledByClient(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	ctx, cancel := context.WithCancel(t.Context())
	res := relayDo(ctx, rb.there, rb.target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	rs := rb.answer(t, `{}`, streamHead, &edgepb.Chunk{Data: []byte("data: 1\n\n")})
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the caller's read after it left: %v; want its cancellation", r.err)
	}
	for {
		m, err := rs.Recv()
		if err != nil {
			return // the run's stream ended
		}
		if m.GetCancel() != nil {
			return
		}
	}
}

// TestRelayRefusals: a relayed run without the fleet's secret, or with a
// target or path that is not one, is refused in the API's error shape
// and reaches no node.
func TestRelayRefusals(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	target, _ := json.Marshal(weir.NodeTarget{Node: rb.target.Node, Gen: rb.target.Gen, Provider: "p"})
	for _, tc := range []struct {
		name, auth, target, path string
		status                   int
		code                     string
	}{
		{"no secret", "", string(target), "/chat/completions", 401, "relay_unauthorized"},
		{"wrong secret", "Bearer " + testSecret + "x", string(target), "/chat/completions", 401, "relay_unauthorized"},
		{"no target", "Bearer " + testSecret, "", "/chat/completions", 400, "invalid_relay_target"},
		{"no node", "Bearer " + testSecret, `{"gen":1,"provider":"p"}`, "/chat/completions", 400, "invalid_relay_target"},
		{"no generation", "Bearer " + testSecret, `{"node":"` + rb.target.Node + `","provider":"p"}`, "/chat/completions", 400, "invalid_relay_target"},
		{"relative path", "Bearer " + testSecret, string(target), "chat", 400, "invalid_relay_path"},
		{"dot dot", "Bearer " + testSecret, string(target), "/../admin", 400, "invalid_relay_path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rb.url+RelayPath, strings.NewReader(`{}`))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			req.Header.Set(headerTarget, tc.target)
			req.Header.Set(headerPath, tc.path)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Fatalf("%d %+v (%v), want %d %s", resp.StatusCode, e, err, tc.status, tc.code)
			}
		})
	}
	// A relay whose secret differs offers nothing it cannot send: the
	// other replica refuses it, a retryable failure of the target.
	rb.there.cfg.Secret = "another"
	_, err := rb.there.Do(t.Context(), rb.target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`)})
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Retryable() || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a run with the wrong secret: %v", err)
	}
	if got := rb.counts.get(); got["sent/refused"] != 1 || got["taken/refused"] != 8 {
		t.Errorf("counted %v; want the refusals, each", got)
	}
	// Nothing reached the node: its next offer is the next run's.
	res := relayDo(t.Context(), rb.here, rb.target, provider.Call{Path: "/chat/completions", Body: []byte(`{"n":2}`), Stream: true})
	rb.answer(t, `{"n":2}`, streamHead, &edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE})
	if r := <-res; r.err != nil {
		t.Fatal(r.err)
	}
}

// TestRelayServingPrefersThisReplica: a node this replica's Hub serves
// is this replica's, whatever the directory says of it.
func TestRelayServingPrefersThisReplica(t *testing.T) {
	t.Parallel()
	rb := relaySetup(t)
	moved := rb.target
	moved.Gen--
	other := weir.NodeTarget{Node: "node_b", Gen: 9, Provider: "q"}
	both := NewRelay(RelayConfig{Secret: testSecret}, RelayDeps{Hub: rb.hub, Directory: staticDir{model: "m", addr: "http://elsewhere", targets: []weir.NodeTarget{other, moved}}})
	if got := both.Serving("m"); !slices.Equal(got, []weir.NodeTarget{rb.target, other}) {
		t.Fatalf("Serving = %+v", got)
	}
	// Without a secret the directory's nodes cannot be reached.
	if got := NewRelay(RelayConfig{}, RelayDeps{Hub: rb.hub, Directory: staticDir{model: "m", targets: []weir.NodeTarget{other}}}).Serving("m"); !slices.Equal(got, []weir.NodeTarget{rb.target}) {
		t.Fatalf("Serving without a secret = %+v", got)
	}
}

// serveNode plays the node until its session ends: each offer's run is
// answered with a short stream.
func (rb *relayBundle) serveNode(ctx context.Context) {
	md := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wn-a")
	for {
		m, err := rb.s.stream.Recv()
		if err != nil {
			return
		}
		o := m.GetOffer()
		if o == nil {
			continue
		}
		rs, err := rb.client.Run(md)
		if err != nil {
			return
		}
		if rs.Send(&edgepb.RunUp{Msg: &edgepb.RunUp_Open{Open: &edgepb.RunOpen{RunId: o.RunId, Generation: rb.s.gen}}}) != nil {
			return
		}
		for {
			m, err := rs.Recv()
			if err != nil {
				return
			}
			if m.GetBodyEnd() != nil {
				break
			}
		}
		for _, m := range []any{streamHead, &edgepb.Chunk{Data: []byte("data: 1\n\ndata: [DONE]\n\n")}, &edgepb.RunEnd{Kind: edgepb.RunEnd_COMPLETE}} {
			if rs.Send(up(m)) != nil {
				return
			}
		}
	}
}

// BenchmarkRelay: runs one after another on a node, through the Hub of
// the replica it dialed (local) and relayed from another replica
// (relayed): the difference is what the relay's HTTP hop adds to a run.
func BenchmarkRelay(b *testing.B) {
	for _, via := range []string{"local", "relayed"} {
		b.Run(via, func(b *testing.B) {
			rb := relaySetup(b)
			r := rb.here
			if via == "relayed" {
				r = rb.there
			}
			go rb.serveNode(b.Context())
			call := provider.Call{Path: "/chat/completions", Body: []byte(`{"model":"m","stream":true}`), Stream: true}
			for b.Loop() {
				resp, err := r.Do(b.Context(), rb.target, call)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// TestRelayAnswerWithoutItsEnd: an answer that ends without the relay's
// end trailer (a replica cut off before it could say, or a proxy between
// that drops trailers) is a broken one.
func TestRelayAnswerWithoutItsEnd(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headerRelay, "answer")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
	}))
	t.Cleanup(srv.Close)
	target := weir.NodeTarget{Node: "node_a", Gen: 1, Provider: "p"}
	there := NewRelay(RelayConfig{Secret: testSecret}, RelayDeps{Directory: staticDir{model: "m", addr: srv.URL, targets: []weir.NodeTarget{target}}})
	resp, err := there.Do(t.Context(), target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if pe := readCut(t, resp, "data: 1\n\n"); !strings.Contains(pe.Error(), "cut short") {
		t.Fatalf("an answer without its end: %v", pe)
	}
}

// probeRig is a replica to relay to, played by the test: its /healthz
// answers while healthy, else hangs (frozen); a run's answer is a chunk,
// then one more for each value on more, until the run ends. Its relay
// probes on a fake clock, and says when each round is over.
type probeRig struct {
	healthy atomic.Bool
	more    chan string
	fc      *clock.Fake
	relay   *Relay
	rounds  chan struct{}
	target  weir.NodeTarget
}

func newProbeRig(t *testing.T, client *http.Client) (*probeRig, *httptest.Server) {
	t.Helper()
	p := &probeRig{more: make(chan string), fc: clock.NewFake(time.Unix(0, 0)), rounds: make(chan struct{}, 64),
		target: weir.NodeTarget{Node: "node_a", Gen: 1, Provider: "p"}}
	p.healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			if !p.healthy.Load() {
				<-r.Context().Done() // frozen: no answer
				return
			}
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		w.Header().Set(headerRelay, "answer")
		w.Header().Set("Trailer", trailerEnd)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case m, ok := <-p.more:
				if !ok {
					w.Header().Set(trailerEnd, "ok")
					return
				}
				_, _ = io.WriteString(w, m)
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	p.relay = NewRelay(RelayConfig{Secret: testSecret, HeaderTimeout: -1, IdleTimeout: -1, ProbeInterval: 2 * time.Second, ProbeMisses: 3,
		Clock: p.fc, Client: client}, RelayDeps{Directory: staticDir{model: "m", addr: srv.URL, targets: []weir.NodeTarget{p.target}}})
	p.relay.roundDone = func() { p.rounds <- struct{}{} }
	go p.relay.Run(t.Context())
	<-p.rounds // the first round is due
	return p, srv
}

// start begins a run and reads its first chunk.
func (p *probeRig) start(t *testing.T) *http.Response {
	t.Helper()
	resp, err := p.relay.Do(t.Context(), p.target, provider.Call{Path: "/chat/completions", Body: []byte(`{}`), Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	first := make([]byte, 9)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	return resp
}

// round runs one probe round: the clock moves to it, and, for a frozen
// replica, on until its probes time out.
func (p *probeRig) round(t *testing.T) {
	t.Helper()
	if p.healthy.Load() {
		// Exactly to the round: the probe answers before its bound.
		p.fc.Advance(2 * time.Second)
		<-p.rounds
		return
	}
	done := make(chan struct{})
	go func() { <-p.rounds; close(done) }()
	if !p.fc.AdvanceUntil(done, 500*time.Millisecond, time.Minute, 10*time.Second) {
		t.Fatal("a probe round never ended")
	}
}

// TestRelayCutsASilentReplica: while a relayed run lasts, its replica is
// probed; one that answers its probes keeps the run however long the
// answer is silent, one that stops answering (frozen, cut off) has the
// run cut after ProbeMisses probes, as a timeout.
func TestRelayCutsASilentReplica(t *testing.T) {
	t.Parallel()
	p, _ := newProbeRig(t, nil)
	resp := p.start(t)
	read := make(chan *provider.Error, 1)
	go func() { read <- readBrokenErr(resp) }()
	for range 5 {
		p.round(t)
	}
	select {
	case pe := <-read:
		t.Fatalf("a run on a replica that answers was cut: %v", pe)
	default:
	}
	p.healthy.Store(false)
	for i := range 2 {
		p.round(t)
		select {
		case pe := <-read:
			t.Fatalf("cut after %d unanswered probes: %v; want 3", i+1, pe)
		default:
		}
	}
	p.round(t)
	select {
	case pe := <-read:
		if pe == nil || !pe.Timeout || !strings.Contains(pe.Error(), "answers nothing") {
			t.Fatalf("the cut run's error: %v", pe)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("three unanswered probes did not cut the run")
	}
}

// TestRelayKeepsARunThatProgresses: a replica whose probes go unanswered
// (its API overloaded, say) but whose runs still send keeps them.
func TestRelayKeepsARunThatProgresses(t *testing.T) {
	t.Parallel()
	p, _ := newProbeRig(t, nil)
	resp := p.start(t)
	p.healthy.Store(false)
	chunk := make([]byte, 9)
	for range 5 {
		select {
		case p.more <- "data: 2\n\n":
		case <-time.After(10 * time.Second):
			t.Fatal("the run's answer ended: it was cut")
		}
		if _, err := io.ReadFull(resp.Body, chunk); err != nil {
			t.Fatalf("a run that progresses was cut: %v", err)
		}
		p.round(t)
	}
	close(p.more)
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("the run's end: %q, %v", rest, err)
	}
}

// TestRelayKeepsTheRunsOfAStoppingReplica: a replica that refuses new
// connections (its listener closed: it stops, and drains what it has)
// is not silent; its runs go on to their end.
func TestRelayKeepsTheRunsOfAStoppingReplica(t *testing.T) {
	t.Parallel()
	// The run's connection is the first dial; each probe dials anew (the
	// listener is closed before the first).
	var dials atomic.Int64
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	p, srv := newProbeRig(t, client)
	resp := p.start(t)
	srv.Listener.Close() // refuses from now on; the run's connection stays
	for range 5 {
		p.round(t)
	}
	if n := dials.Load(); n != 6 {
		t.Fatalf("%d dials; want the run's and five refused probes", n)
	}
	close(p.more)
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("the run of a stopping replica: %q, %v; want its end", rest, err)
	}
}
