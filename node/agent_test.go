package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/provider/mock"
)

const (
	testToken = "wn-test"
	stall     = 60 * time.Second
)

type testBundle struct {
	agent *Agent
	gw    *fakeGateway
	clock *clock.Fake
	logs  *logRecorder
	// mock is provider "mock": the mock provider.
	mock *mock.Server
	// rt is provider "rt": an httptest server whose handler a test sets.
	rt      *httptest.Server
	handler atomic.Pointer[http.HandlerFunc]
	// dead is provider "dead": a listener that accepts connections and
	// never answers; closeDead closes it, and the address refuses them.
	dead     net.Listener
	deadConn chan net.Conn
	// stop ends the agent's Run; stopped is closed when it has returned.
	stop    context.CancelFunc
	stopped chan struct{}
}

// setup starts a fake gateway, the runtimes and an agent serving them,
// with edit applied to the agent's config.
func setup(t *testing.T, edit ...func(*Config)) *testBundle {
	t.Helper()
	return setupWith(t, func(*fakeGateway) {}, edit...)
}

// setupWith is setup with gw applied to the fake gateway first.
func setupWith(t *testing.T, gw func(*fakeGateway), edit ...func(*Config)) *testBundle {
	t.Helper()
	b := &testBundle{gw: newFakeGateway(), clock: clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		logs: newLogRecorder(), mock: mock.New(mock.Config{}), deadConn: make(chan net.Conn, 4), stopped: make(chan struct{})}
	gw(b.gw)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	edgepb.RegisterEdgeServer(srv, b.gw)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	mockSrv := httptest.NewServer(b.mock)
	t.Cleanup(mockSrv.Close)
	b.rt = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := b.handler.Load(); h != nil {
			(*h)(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(b.rt.Close)
	b.dead, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.dead.Close() })
	go func() {
		for {
			c, err := b.dead.Accept()
			if err != nil {
				return
			}
			b.deadConn <- c
			t.Cleanup(func() { c.Close() })
		}
	}()

	cfg := Config{
		Gateway: ln.Addr().String(),
		Token:   testToken,
		Version: "weir test",
		Providers: []Provider{
			{ID: "mock", URL: mockSrv.URL + "/v1", Slots: 4, LongSlots: 1, LongPromptTokens: 8000,
				Models: []Model{{Name: "gpt-4o-mini", Runtime: "gpt-4o-mini"}}},
			{ID: "rt", URL: b.rt.URL + "/v1", Slots: 2, Models: []Model{{Name: "llama", Runtime: "meta/llama"}}},
			{ID: "dead", URL: "http://" + b.dead.Addr().String() + "/v1", Slots: 1, Models: []Model{{Name: "gone", Runtime: "gone"}}},
		},
		StallTimeout: stall,
		// Probes must not time out while a test moves the clock on.
		ProbeTimeout: time.Hour,
		DrainTimeout: -1,
	}
	for _, e := range edit {
		e(&cfg)
	}
	a, err := New(cfg, Deps{Clock: b.clock, Logger: slog.New(b.logs)})
	if err != nil {
		t.Fatal(err)
	}
	b.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	go func() {
		defer close(b.stopped)
		_ = a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.stopped:
		case <-time.After(within):
			t.Error("the agent did not stop")
		}
	})
	return b
}

// setHandler makes h provider rt's runtime.
func (b *testBundle) setHandler(h http.HandlerFunc) { b.handler.Store(&h) }

// closeDead closes provider dead's listener: its address refuses
// connections from then on.
func (b *testBundle) closeDead() { b.dead.Close() }

// advanceUntil moves the clock on by step until done is closed.
func (b *testBundle) advanceUntil(t *testing.T, done <-chan struct{}, step, limit time.Duration) {
	t.Helper()
	if !b.clock.AdvanceUntil(done, step, limit, within) {
		t.Fatal("it did not happen as the clock moved on")
	}
}

func TestRegisterFromConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fs := b.gw.session(t)
	if fs.auth != "Bearer "+testToken {
		t.Errorf("authorization = %q", fs.auth)
	}
	if len(b.agent.instance) < 16 {
		t.Errorf("instance %q; want a random id of the process", b.agent.instance)
	}
	want := &edgepb.Register{Version: "weir test", InlineBodies: true, Instance: b.agent.instance, Providers: []*edgepb.Provider{
		{Id: "mock", Adapter: "openai", Target: b.agent.cfg.Providers[0].URL, Slots: 4, LongSlots: 1, LongPromptTokens: 8000,
			Models: []*edgepb.ModelRoute{{Name: "gpt-4o-mini", Runtime: "gpt-4o-mini"}}},
		{Id: "rt", Adapter: "openai", Target: b.rt.URL + "/v1", Slots: 2,
			Models: []*edgepb.ModelRoute{{Name: "llama", Runtime: "meta/llama"}}},
		{Id: "dead", Adapter: "openai", Target: "http://" + b.dead.Addr().String() + "/v1", Slots: 1,
			Models: []*edgepb.ModelRoute{{Name: "gone", Runtime: "gone"}}},
	}}
	if !proto.Equal(fs.reg, want) {
		t.Errorf("register =\n%v\nwant\n%v", fs.reg, want)
	}
	_, attrs := b.logs.wait(t, "node: session started")
	if attrs["heartbeat"] != "1s" {
		t.Errorf("session start logged %v", attrs)
	}
}

func TestHeartbeatsCarryGenerationAndSeq(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fs := b.gw.session(t)
	var beats []*edgepb.Heartbeat
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(beats) < 3 {
			beats = append(beats, (<-fs.in).GetHeartbeat())
		}
	}()
	b.advanceUntil(t, done, time.Second, time.Minute)
	for i, hb := range beats {
		if hb == nil {
			t.Fatalf("message %d is not a heartbeat", i)
		}
		if hb.Generation != fs.welcome.Generation || hb.Seq != uint64(i+1) {
			t.Errorf("heartbeat %d: generation %d seq %d; want %d, %d", i, hb.Generation, hb.Seq, fs.welcome.Generation, i+1)
		}
		var ids []string
		for _, s := range hb.Slots {
			ids = append(ids, s.Provider)
			if s.Busy != 0 {
				t.Errorf("provider %s busy %d with no runs", s.Provider, s.Busy)
			}
		}
		if !slices.Equal(ids, []string{"mock", "rt", "dead"}) {
			t.Errorf("slots of %v", ids)
		}
	}
}

// chatBody is a chat completion request as the gateway forwards it.
func chatBody(stream bool) []byte {
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": "say something"}}})
	return body
}

func TestRunAgainstTheMock(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			fs := b.gw.session(t)
			fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "mock", Model: "gpt-4o-mini", Path: "/chat/completions", Stream: stream})
			fr := b.gw.run(t)
			if fr.open.RunId != "run-1" || fr.open.Generation != fs.welcome.Generation || fr.auth != "Bearer "+testToken {
				t.Fatalf("open %v auth %q", fr.open, fr.auth)
			}
			fr.sendBody(chatBody(stream), 7)
			a := fr.result()
			if a.end.Kind != edgepb.RunEnd_COMPLETE || a.head.Status != 200 {
				t.Fatalf("head %v end %v", a.head, a.end)
			}
			if stream {
				if ct := a.head.Headers["Content-Type"]; !strings.HasPrefix(ct, "text/event-stream") {
					t.Errorf("content type %q", ct)
				}
				if !strings.HasPrefix(string(a.body), "data: {") || !strings.HasSuffix(string(a.body), "data: [DONE]\n\n") {
					t.Errorf("stream body %q", a.body)
				}
			} else {
				var v struct{ Object string }
				if err := json.Unmarshal(a.body, &v); err != nil || v.Object != "chat.completion" {
					t.Errorf("body %q: %v", a.body, err)
				}
			}
		})
	}
}

func TestRunRoundTripsBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ReadBufferBytes = 1024 })
	// The answer: SSE events flushed one by one, and a body larger than
	// the read buffer.
	events := [][]byte{[]byte("data: {\"a\":1}\n\n"), bytes.Repeat([]byte("x"), 5000), []byte("\ndata: [DONE]\n\n")}
	type call struct {
		method, path, ct string
		body             []byte
	}
	calls := make(chan call, 1)
	b.setHandler(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		calls <- call{r.Method, r.URL.Path, r.Header.Get("Content-Type"), body}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Runtime", "yes")
		w.WriteHeader(200)
		for _, e := range events {
			w.Write(e)
			w.(http.Flusher).Flush()
		}
	})
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "rt", Model: "meta/llama", Path: "/chat/completions", Stream: true})
	fr := b.gw.run(t)
	req := bytes.Repeat([]byte(`{"model":"meta/llama","stream":true}`), 3000) // past one chunk
	fr.sendBody(req, 4096)
	a := fr.result()
	got := <-calls
	if got.method != http.MethodPost || got.path != "/v1/chat/completions" || got.ct != "application/json" || !bytes.Equal(got.body, req) {
		t.Errorf("the runtime got %s %s %q and %d bytes; want the body as sent (%d bytes)", got.method, got.path, got.ct, len(got.body), len(req))
	}
	if want := bytes.Join(events, nil); !bytes.Equal(a.body, want) {
		t.Errorf("answer %q; want %q", a.body, want)
	}
	if a.chunks < 5 {
		t.Errorf("%d chunks; a 1 KiB read buffer makes at least 5", a.chunks)
	}
	if a.head.Headers["Content-Type"] != "text/event-stream" || a.head.Headers["X-Runtime"] != "yes" || a.end.Kind != edgepb.RunEnd_COMPLETE {
		t.Errorf("head %v end %v", a.head, a.end)
	}
	if _, ok := a.head.Headers["Content-Length"]; ok {
		t.Error("Content-Length passed on")
	}
}

func TestRuntimeErrorStatusPassesThrough(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const body = `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`
	b.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, body)
	})
	fs := b.gw.session(t)
	fs.offer(&edgepb.Offer{RunId: "run-1", Provider: "rt", Path: "/chat/completions"})
	fr := b.gw.run(t)
	fr.sendBody(chatBody(false), 1<<10)
	a := fr.result()
	if a.head.Status != 429 || a.head.Headers["Retry-After"] != "2" || string(a.body) != body || a.end.Kind != edgepb.RunEnd_COMPLETE {
		t.Errorf("head %v body %q end %v; want the runtime's answer as it is", a.head, a.body, a.end)
	}
}

// TestRuntimeTransportKeepsItsSlots: runs that filled a runtime's slots
// leave their connections idle for the next ones, instead of all but
// two being closed and dialled again.
func TestRuntimeTransportKeepsItsSlots(t *testing.T) {
	t.Parallel()
	const slots = 8
	var (
		dialled atomic.Int64
		arrived = make(chan struct{}, slots)
		release = make(chan struct{})
	)
	rt := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "ok")
	}))
	rt.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	rt.Start()
	t.Cleanup(rt.Close)
	// Two providers of one runtime share its slots.
	c := &http.Client{Transport: runtimeTransport([]Provider{{ID: "a", URL: rt.URL + "/v1", Slots: slots / 2}, {ID: "b", URL: rt.URL + "/v2", Slots: slots / 2}})}
	t.Cleanup(c.CloseIdleConnections)
	// wave sends slots requests, all in flight at once, and returns how
	// many connections they dialled.
	wave := func() int64 {
		before := dialled.Load()
		errs := make(chan error, slots)
		for range slots {
			go func() {
				resp, err := c.Get(rt.URL + "/v1/models")
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				errs <- err
			}()
		}
		for range slots {
			<-arrived
		}
		for range slots {
			release <- struct{}{}
		}
		for range slots {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		return dialled.Load() - before
	}
	if n := wave(); n != slots {
		t.Fatalf("the first %d runs at once dialled %d connections, want %d", slots, n, slots)
	}
	// http.DefaultTransport would have kept 2 and dialled at least 6.
	if n := wave(); n > 2 {
		t.Errorf("the next %d runs at once dialled %d connections, want the %d idle ones reused", slots, n, slots)
	}
}
