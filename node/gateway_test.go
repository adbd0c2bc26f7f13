package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir/edge/edgepb"
)

// within bounds every wait for something that should come at once.
const within = 10 * time.Second

// fakeGateway is the gateway's side of the protocol as a test drives it:
// it records each session's Register and hands out a Welcome (or the
// Refusal in refuse), and hands each Run stream to the test.
type fakeGateway struct {
	edgepb.UnimplementedEdgeServer
	gen    atomic.Uint64
	refuse atomic.Pointer[edgepb.Refusal]
	// ready and wholeHeads are what its Welcome allows (ready_runs,
	// whole_heads).
	ready      atomic.Int32
	wholeHeads atomic.Bool
	sessions   chan *fakeSession
	runs       chan *fakeRun
}

func newFakeGateway() *fakeGateway {
	return &fakeGateway{sessions: make(chan *fakeSession, 16), runs: make(chan *fakeRun, 16)}
}

var _ edgepb.EdgeServer = (*fakeGateway)(nil)

// fakeSession is one Control stream as the gateway sees it.
type fakeSession struct {
	t       *testing.T
	auth    string
	reg     *edgepb.Register
	welcome *edgepb.Welcome
	in      chan *edgepb.NodeMessage // what the node sent after Register
	out     chan *edgepb.GatewayMessage
	drop    chan error // ends the session with the error
}

func bearerOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return strings.Join(md.Get("authorization"), ",")
}

func (g *fakeGateway) Control(stream edgepb.Edge_ControlServer) error {
	ctx := stream.Context()
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	fs := &fakeSession{auth: bearerOf(ctx), reg: m.GetRegister(), in: make(chan *edgepb.NodeMessage, 64),
		out: make(chan *edgepb.GatewayMessage, 64), drop: make(chan error, 1)}
	if r := g.refuse.Load(); r != nil {
		_ = stream.Send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Refusal{Refusal: r}})
		g.sessions <- fs
		return status.Error(codes.InvalidArgument, r.Message)
	}
	fs.welcome = &edgepb.Welcome{NodeId: "node_1", Generation: 1000 + g.gen.Add(1), HeartbeatIntervalMs: 1000, HeartbeatTimeoutMs: 3000,
		ReadyRuns: g.ready.Load(), WholeHeads: g.wholeHeads.Load()}
	if err := stream.Send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Welcome{Welcome: fs.welcome}}); err != nil {
		return err
	}
	g.sessions <- fs
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			select {
			case fs.in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case m := <-fs.out:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-fs.drop:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// session waits for the node's next session.
func (g *fakeGateway) session(t *testing.T) *fakeSession {
	t.Helper()
	select {
	case fs := <-g.sessions:
		fs.t = t
		return fs
	case <-time.After(within):
		t.Fatal("the node opened no session")
		return nil
	}
}

// send sends m to the node on the session.
func (fs *fakeSession) send(m *edgepb.GatewayMessage) { fs.out <- m }

func (fs *fakeSession) offer(o *edgepb.Offer) {
	fs.send(&edgepb.GatewayMessage{Msg: &edgepb.GatewayMessage_Offer{Offer: o}})
}

// next waits for the node's next message that match takes.
func (fs *fakeSession) next(match func(*edgepb.NodeMessage) bool) *edgepb.NodeMessage {
	fs.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m := <-fs.in:
			if match(m) {
				return m
			}
		case <-deadline:
			fs.t.Fatal("no such message from the node")
			return nil
		}
	}
}

func isHeartbeat(m *edgepb.NodeMessage) bool { return m.GetHeartbeat() != nil }
func isEvidence(m *edgepb.NodeMessage) bool  { return m.GetEvidence() != nil }

// fakeRun is one Run stream as the gateway sees it; its handler returns
// when the test is done with it (release) or the stream ends.
type fakeRun struct {
	t       *testing.T
	auth    string
	open    *edgepb.RunOpen
	stream  edgepb.Edge_RunServer
	release chan struct{}
	once    sync.Once
}

func (g *fakeGateway) Run(stream edgepb.Edge_RunServer) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	fr := &fakeRun{auth: bearerOf(stream.Context()), open: m.GetOpen(), stream: stream, release: make(chan struct{})}
	g.runs <- fr
	select {
	case <-fr.release:
	case <-stream.Context().Done():
	}
	return nil
}

// run waits for the node's next Run stream.
func (g *fakeGateway) run(t *testing.T) *fakeRun {
	t.Helper()
	select {
	case fr := <-g.runs:
		fr.t = t
		t.Cleanup(fr.done)
		return fr
	case <-time.After(within):
		t.Fatal("the node opened no run stream")
		return nil
	}
}

// done ends the Run stream from the gateway's side.
func (fr *fakeRun) done() { fr.once.Do(func() { close(fr.release) }) }

// sendBody sends data in chunks of at most size bytes, then BodyEnd.
func (fr *fakeRun) sendBody(data []byte, size int) {
	fr.t.Helper()
	for len(data) > 0 {
		n := min(size, len(data))
		if err := fr.stream.Send(&edgepb.RunDown{Msg: &edgepb.RunDown_Chunk{Chunk: &edgepb.Chunk{Data: data[:n]}}}); err != nil {
			fr.t.Fatalf("send body: %v", err)
		}
		data = data[n:]
	}
	if err := fr.stream.Send(&edgepb.RunDown{Msg: &edgepb.RunDown_BodyEnd{BodyEnd: &edgepb.BodyEnd{}}}); err != nil {
		fr.t.Fatalf("send body end: %v", err)
	}
}

// answer is what the node sent up a Run stream: up to its RunEnd, or a
// head that says it is complete.
type answer struct {
	head     *edgepb.RunHead
	body     []byte
	chunks   int
	end      *edgepb.RunEnd
	complete bool
}

// result reads the node's answer and ends the stream.
func (fr *fakeRun) result() answer {
	fr.t.Helper()
	a := fr.answer()
	fr.done()
	return a
}

// answer reads the node's answer, leaving the stream open.
func (fr *fakeRun) answer() answer {
	fr.t.Helper()
	type got struct {
		a   answer
		err error
	}
	ch := make(chan got, 1)
	go func() {
		var a answer
		var body bytes.Buffer
		for {
			m, err := fr.stream.Recv()
			if err != nil {
				ch <- got{a, err}
				return
			}
			switch msg := m.Msg.(type) {
			case *edgepb.RunUp_Head:
				if a.head != nil || a.chunks > 0 {
					ch <- got{a, errors.New("a second head, or a head after chunks")}
					return
				}
				a.head = msg.Head
				body.Write(msg.Head.Body)
				if msg.Head.Complete {
					a.complete, a.body = true, body.Bytes()
					ch <- got{a, nil}
					return
				}
			case *edgepb.RunUp_Chunk:
				if a.head == nil {
					ch <- got{a, errors.New("a chunk before the head")}
					return
				}
				a.chunks++
				body.Write(msg.Chunk.Data)
			case *edgepb.RunUp_End:
				a.end, a.body = msg.End, body.Bytes()
				ch <- got{a, nil}
				return
			default:
				ch <- got{a, errors.New("an unexpected message")}
				return
			}
		}
	}()
	select {
	case g := <-ch:
		if g.err != nil && !errors.Is(g.err, io.EOF) {
			fr.t.Fatalf("read the answer: %v", g.err)
		}
		if g.a.end == nil && !g.a.complete {
			fr.t.Fatal("the run stream ended without RunEnd")
		}
		return g.a
	case <-time.After(within):
		fr.t.Fatal("no RunEnd from the node")
		return answer{}
	}
}

// logRecorder keeps the agent's log records for tests to wait on.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	changed chan struct{} // closed and replaced on every record
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs(as []slog.Attr) slog.Handler    { return withAttrs{l, as} }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

// withAttrs is a logRecorder under slog.Logger.With.
type withAttrs struct {
	*logRecorder
	attrs []slog.Attr
}

func (w withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return withAttrs{w.logRecorder, append(slices.Clip(w.attrs), as...)}
}

func (w withAttrs) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(w.attrs...)
	return w.logRecorder.Handle(ctx, r)
}

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// wait waits for a record whose message is msg and returns its
// attributes.
func (l *logRecorder) wait(t *testing.T, msg string) (slog.Level, map[string]string) {
	t.Helper()
	return l.waitNth(t, msg, 1)
}

// waitNth waits for the nth record whose message is msg and returns its
// attributes.
func (l *logRecorder) waitNth(t *testing.T, msg string, nth int) (slog.Level, map[string]string) {
	t.Helper()
	deadline := time.After(within)
	seen, found := 0, 0
	for {
		l.mu.Lock()
		for ; seen < len(l.records); seen++ {
			if r := l.records[seen]; r.Message == msg {
				if found++; found < nth {
					continue
				}
				attrs := map[string]string{}
				r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
				l.mu.Unlock()
				return r.Level, attrs
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no log %q", msg)
		}
	}
}
