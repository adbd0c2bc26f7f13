package edge

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/apierror"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/internal/lifecycle"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Directory is where a replica of a fleet finds the nodes that dialed
// the other replicas: what they serve, and where to send their runs.
// fleet.Board implements it.
type Directory interface {
	// Serving lists the providers of the other replicas' nodes that serve
	// the public model. It must not call the engine (see gateway.Nodes).
	Serving(model string) []weir.NodeTarget
	// Where is the base URL of the replica that node's session of
	// generation gen dialed.
	Where(node string, gen uint64) (string, bool)
}

// RelayPath is where a replica takes the runs of its nodes that another
// replica admitted.
const RelayPath = "/internal/edge/runs"

// The relay's request and answer headers.
const (
	headerTarget = "Weir-Relay-Target"
	headerPath   = "Weir-Relay-Path"
	headerStream = "Weir-Relay-Stream"
	// headerRelay says what the body is: "answer", the node's answer as
	// it came; "error", a relayError.
	headerRelay = "Weir-Relay"
	// trailerEnd ends an answer: "ok" once it came whole, else the
	// relayError that cut it. An answer that ends without it was cut.
	trailerEnd = "Weir-Relay-End"
)

// relayedHeaders are the headers of a node's answer that cross the
// relay: what describes the body (gateway.Head's), never how it is
// framed, which is the relay's own.
var relayedHeaders = []string{"Content-Type", "Content-Disposition", "Cache-Control"}

// relayedCallHeaders are the client's headers of a call (provider.Call's
// Header) that cross the relay.
var relayedCallHeaders = []string{"Accept", "User-Agent"}

// errRelayStalled and errRelayNoAnswer are why a relayed run was cut
// short on the relaying replica's side.
var (
	errRelayNoAnswer = errors.New("no answer began")
	errRelayStalled  = errors.New("nothing more of the answer came")
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Secret authenticates the fleet's replicas to each other; a relay
	// without one forwards nothing and takes nothing.
	Secret string
	// MaxBodyBytes bounds a relayed request's body (0: 16 MiB).
	MaxBodyBytes int64
	// Client sends relayed runs; nil: one made for it.
	Client *http.Client
	// HeaderTimeout bounds the wait for a relayed run's answer to begin,
	// IdleTimeout each wait for more of it: they end a run whose replica
	// froze or was cut off, which its own bounds cannot. Default 130s
	// each, past the Hub's defaults (Config.RunHeaderTimeout,
	// RunIdleTimeout); negative: none.
	HeaderTimeout, IdleTimeout time.Duration
	// ProbeInterval is how often Run probes a replica this Relay has runs
	// on (default 2s); ProbeMisses how many probes in a row it may miss
	// before its runs are cut (default 3).
	ProbeInterval time.Duration
	ProbeMisses   int
	// Clock runs the bounds and the probes; nil: clock.Real.
	Clock clock.Clock
}

// RelayDeps are what a Relay works with.
type RelayDeps struct {
	// Hub is this replica's; nil: it has no edge listener.
	Hub *Hub
	// Directory has the other replicas' nodes; nil: none.
	Directory Directory
	// Metrics counts relayed runs; nil: none.
	Metrics RelayMetrics
	Logger  *slog.Logger
}

// RelayMetrics receives a Relay's counts. metrics.Metrics implements it.
type RelayMetrics interface {
	// Relayed counts one relayed run: direction "sent" (to the replica
	// its node dialed) or "taken" (from another replica), and its outcome:
	// "answer", "error" (the node's or runtime's), "refused" (by the
	// replica taking it: a wrong secret, bad input) or, sent only,
	// "unreachable".
	Relayed(direction, outcome string)
}

// Relay is a fleet's nodes for one replica's gateway (gateway.Nodes):
// those that dialed this replica (its Hub, nil if it has no edge
// listener) and those that dialed the others (a Directory). A run for a
// node of another replica goes to that replica over HTTP (RelayPath),
// which runs it on its Hub and streams the answer back; the slots are
// the fleet's scopes, so the admission that chose the node holds
// whichever replica admitted.
type Relay struct {
	hub  *Hub
	dir  Directory
	cfg  RelayConfig
	deps RelayDeps

	// refusals counts the refusals since the last logged; loggedAt is
	// when that was (unix nanoseconds by the Clock).
	refusals, loggedAt atomic.Int64

	probes lifecycle.Loop // Start's Run

	mu   sync.Mutex
	runs map[*inflight]struct{} // relayed runs under way, for the probes
	// roundDone, if set (by tests), runs after each probe round, once
	// the next is due.
	roundDone func()
}

// logRefusal reports whether a refusal may be logged now: the first,
// then one a minute.
func (r *Relay) logRefusal() bool {
	now := r.cfg.Clock.Now().UnixNano()
	last := r.loggedAt.Load()
	return (last == 0 || now-last >= int64(time.Minute)) && r.loggedAt.CompareAndSwap(last, now)
}

var relayBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// NewRelay returns a Relay.
func NewRelay(cfg RelayConfig, deps RelayDeps) *Relay {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	for _, d := range []*time.Duration{&cfg.HeaderTimeout, &cfg.IdleTimeout} {
		if *d == 0 {
			*d = 130 * time.Second
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 2 * time.Second
	}
	if cfg.ProbeMisses <= 0 {
		cfg.ProbeMisses = 3
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 5 * time.Second,
		}}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{hub: deps.Hub, dir: deps.Directory, cfg: cfg, deps: deps, runs: make(map[*inflight]struct{})}
}

func (r *Relay) count(direction, outcome string) {
	if r.deps.Metrics != nil {
		r.deps.Metrics.Relayed(direction, outcome)
	}
}

// Serving lists this replica's node providers serving the public model,
// and the other replicas', by node and provider id. A node seen here
// and on another replica is this replica's: the Hub knows its newest
// session, the directory may lag.
func (r *Relay) Serving(model string) []weir.NodeTarget {
	var out []weir.NodeTarget
	if r.hub != nil {
		out = r.hub.Serving(model)
	}
	if r.dir == nil || r.cfg.Secret == "" {
		return out
	}
	local := len(out)
	for _, t := range r.dir.Serving(model) {
		if !slices.ContainsFunc(out[:local], func(l weir.NodeTarget) bool { return l.Node == t.Node }) {
			out = append(out, t)
		}
	}
	if len(out) > local {
		sortTargets(out)
	}
	return out
}

// Do runs c on t's provider: through the replica t's session dialed, if
// the directory has it there, else through this replica's Hub (a
// session's generation is one replica's alone). Errors are as Hub.Do's.
func (r *Relay) Do(ctx context.Context, t weir.NodeTarget, c provider.Call) (*http.Response, error) {
	if r.dir != nil && r.cfg.Secret != "" {
		if base, ok := r.dir.Where(t.Node, t.Gen); ok {
			return r.forward(ctx, base, t, c)
		}
	}
	if r.hub == nil {
		return nil, &provider.Error{Err: fmt.Errorf("node %s (generation %d): %w", t.Node, t.Gen, weir.ErrNodeGone)}
	}
	return r.hub.Do(ctx, t, c)
}

// forward sends c for t to the replica at base.
func (r *Relay) forward(ctx context.Context, base string, t weir.NodeTarget, c provider.Call) (*http.Response, error) {
	target, err := json.Marshal(t)
	if err != nil {
		return nil, &provider.Error{Err: err}
	}
	// Ending rctx (cancel(nil) once the run is over) also forgets the run.
	rctx, cancel := context.WithCancelCause(ctx)
	run := r.track(rctx, base, cancel)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimSuffix(base, "/")+RelayPath, bytes.NewReader(c.Body))
	if err != nil {
		cancel(nil)
		return nil, &provider.Error{Err: fmt.Errorf("relay to %s: %w", base, err)}
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.Secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerTarget, string(target))
	req.Header.Set(headerPath, c.Path)
	if c.Stream {
		req.Header.Set(headerStream, "true")
	}
	for _, h := range relayedCallHeaders {
		if v := c.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	// The other replica's server span joins the call's trace.
	tracing.Inject(ctx, req.Header)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("weir.relay.replica", base))
	}
	head := clock.NewWatch(r.cfg.Clock, r.cfg.HeaderTimeout, func() { cancel(errRelayNoAnswer) })
	head.Arm()
	resp, err := r.cfg.Client.Do(req)
	head.Stop()
	if err != nil {
		defer cancel(nil)
		switch cause := context.Cause(rctx); {
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case isDialError(err):
			// The replica the node dialed is out of reach: so is the node.
			r.count("sent", "unreachable")
			return nil, &provider.Error{Err: fmt.Errorf("node %s (generation %d) by way of %s: %w: %v", t.Node, t.Gen, base, weir.ErrNodeGone, err)}
		case cause == errRelayNoAnswer:
			r.count("sent", "error")
			return nil, &provider.Error{Timeout: true, Err: fmt.Errorf("relay to %s: %w within %s", base, cause, r.cfg.HeaderTimeout)}
		case cause == errRelaySilent:
			r.count("sent", "error")
			return nil, &provider.Error{Timeout: true, Err: fmt.Errorf("relay to %s: %w", base, cause)}
		default:
			r.count("sent", "unreachable")
			return nil, &provider.Error{Err: fmt.Errorf("relay to %s: %w", base, err)}
		}
	}
	switch resp.Header.Get(headerRelay) {
	case "answer":
		r.count("sent", "answer")
		resp.Header.Del(headerRelay)
		b := &relayBody{rc: resp.Body, resp: resp, ctx: ctx, rctx: rctx, cancel: cancel, base: base, run: run}
		b.idle = clock.NewWatch(r.cfg.Clock, r.cfg.IdleTimeout, func() { cancel(errRelayStalled) })
		b.idleFor = r.cfg.IdleTimeout
		resp.Body = b
		return resp, nil
	case "error":
		r.count("sent", "error")
		defer cancel(nil)
		defer drain(resp.Body)
		var e relayError
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e); err != nil {
			return nil, &provider.Error{Err: fmt.Errorf("relay to %s: unreadable error: %w", base, err)}
		}
		return nil, e.providerError(t)
	default:
		r.count("sent", "refused")
		defer cancel(nil)
		defer drain(resp.Body)
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, &provider.Error{Err: fmt.Errorf("relay to %s refused the run: %d %s", base, resp.StatusCode, bytes.TrimSpace(msg))}
	}
}

// isDialError reports whether err is a failure to connect: the request
// never left.
func isDialError(err error) bool {
	oe, ok := errors.AsType[*net.OpError](err)
	return ok && oe.Op == "dial"
}

// drain reads a little of what is left of rc, so that its connection
// can carry the next relayed run, and closes it.
func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, 64<<10))
	_ = rc.Close()
}

// relayBody is a relayed answer's body. It reads as an adapter's does: a
// failure while its caller is still there is the upstream's (a
// *provider.Error), and so is an answer that ends without the relay's
// end trailer (it was cut), or with the error that cut it on the other
// replica, as that replica classified it.
type relayBody struct {
	rc        io.ReadCloser
	resp      *http.Response
	ctx, rctx context.Context
	cancel    context.CancelCauseFunc
	base      string
	run       *inflight
	idle      *clock.Watch
	idleFor   time.Duration
}

func (b *relayBody) Read(p []byte) (int, error) {
	b.idle.Arm()
	n, err := b.rc.Read(p)
	b.idle.Disarm()
	if n > 0 {
		b.run.progressed.Store(true)
	}
	switch {
	case err == nil:
		return n, nil
	case b.ctx.Err() != nil:
		return n, context.Cause(b.ctx)
	case context.Cause(b.rctx) == errRelayStalled:
		return n, &provider.Error{Timeout: true, Err: fmt.Errorf("the answer relayed from %s: %w for %s", b.base, errRelayStalled, b.idleFor)}
	case context.Cause(b.rctx) == errRelaySilent:
		return n, &provider.Error{Timeout: true, Err: fmt.Errorf("the answer relayed from %s: %w", b.base, errRelaySilent)}
	case err != io.EOF:
		return n, &provider.Error{Err: fmt.Errorf("the answer relayed from %s broke: %w", b.base, err)}
	}
	switch end := b.resp.Trailer.Get(trailerEnd); end {
	case "ok":
		return n, io.EOF
	case "":
		return n, &provider.Error{Err: fmt.Errorf("the answer relayed from %s was cut short", b.base)}
	default:
		var e relayError
		if json.Unmarshal([]byte(end), &e) != nil {
			return n, &provider.Error{Err: fmt.Errorf("the answer relayed from %s broke: %s", b.base, end)}
		}
		pe := e.providerError(weir.NodeTarget{})
		pe.Err = fmt.Errorf("the answer relayed from %s broke: %w", b.base, pe.Err)
		return n, pe
	}
}

func (b *relayBody) Close() error {
	b.idle.Stop()
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// relayError is a *provider.Error on the relay's wire.
type relayError struct {
	Status       int    `json:"status,omitempty"`
	Body         []byte `json:"body,omitempty"`
	RetryAfterMs int64  `json:"retry_after_ms,omitempty"`
	Timeout      bool   `json:"timeout,omitempty"`
	Credential   bool   `json:"credential,omitempty"`
	// Gone: the run never reached the node (weir.ErrNodeGone).
	Gone bool `json:"gone,omitempty"`
	// Stalled: the node's run stalled (weir.ErrNodeStalled).
	Stalled bool   `json:"stalled,omitempty"`
	Message string `json:"message"`
}

func newRelayError(err error) relayError {
	e := relayError{Message: err.Error(), Gone: errors.Is(err, weir.ErrNodeGone), Stalled: errors.Is(err, weir.ErrNodeStalled)}
	var pe *provider.Error
	if errors.As(err, &pe) {
		e.Status, e.Body, e.Timeout, e.Credential = pe.Status, pe.Body, pe.Timeout, pe.Credential
		e.RetryAfterMs = pe.RetryAfter.Milliseconds()
		if pe.Err != nil {
			e.Message = pe.Err.Error()
		}
	}
	return e
}

func (e relayError) providerError(t weir.NodeTarget) *provider.Error {
	var err error = errors.New(e.Message)
	switch {
	case e.Gone:
		err = fmt.Errorf("node %s (generation %d): %w", t.Node, t.Gen, weir.ErrNodeGone)
	case e.Stalled:
		err = markedError{msg: e.Message, mark: weir.ErrNodeStalled}
	}
	return &provider.Error{Status: e.Status, Body: e.Body, RetryAfter: time.Duration(e.RetryAfterMs) * time.Millisecond,
		Timeout: e.Timeout, Credential: e.Credential, Err: err}
}

// markedError is an error's message as it came over the relay, marked
// as what it was (errors.Is).
type markedError struct {
	msg  string
	mark error
}

func (e markedError) Error() string { return e.msg }
func (e markedError) Unwrap() error { return e.mark }

// Handler takes the runs other replicas relay to this replica's nodes:
// authenticated by the fleet's secret, run on the Hub, the answer
// streamed back as it comes. A relay without a Hub or a secret refuses
// every run.
func (r *Relay) Handler() http.Handler {
	return http.HandlerFunc(r.serveRelay)
}

func (r *Relay) serveRelay(w http.ResponseWriter, req *http.Request) {
	token, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if r.hub == nil || r.cfg.Secret == "" || subtle.ConstantTimeCompare([]byte(token), []byte(r.cfg.Secret)) != 1 {
		r.refuse(w, req, http.StatusUnauthorized, "relay_unauthorized", "a relayed run needs the fleet's secret")
		return
	}
	var t weir.NodeTarget
	if err := json.Unmarshal([]byte(req.Header.Get(headerTarget)), &t); err != nil {
		r.refuse(w, req, http.StatusBadRequest, "invalid_relay_target", headerTarget+" is not a node target: "+err.Error())
		return
	}
	path := req.Header.Get(headerPath)
	switch {
	case t.Node == "" || len(t.Node) > 128 || t.Gen == 0 || t.Provider == "":
		r.refuse(w, req, http.StatusBadRequest, "invalid_relay_target", headerTarget+" needs a node id, a generation and a provider")
		return
	case !validRelayPath(path):
		r.refuse(w, req, http.StatusBadRequest, "invalid_relay_path", headerPath+" must be an absolute path of at most 256 bytes of a-z, 0-9, '/', '-' and '_'")
		return
	}
	// The relaying replica bounded the client's body; what it relays may
	// be a little longer (the model's name rewritten to the runtime's).
	limit := r.cfg.MaxBodyBytes + relayBodySlack
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			r.refuse(w, req, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("a relayed body is at most %d bytes", limit))
			return
		}
		r.refuse(w, req, http.StatusBadRequest, "invalid_body", "read body: "+err.Error())
		return
	}
	c := provider.Call{Path: path, Body: body, Stream: req.Header.Get(headerStream) == "true", Header: http.Header{}}
	for _, h := range relayedCallHeaders {
		if v := req.Header.Get(h); v != "" {
			c.Header.Set(h, v)
		}
	}
	// The run joins the relaying replica's trace: through this
	// replica's server span if it traces, else directly.
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = tracing.Extract(ctx, req.Header)
	}
	resp, err := r.hub.Do(ctx, t, c)
	if err != nil {
		r.count("taken", "error")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(headerRelay, "error")
		w.WriteHeader(http.StatusBadGateway)
		_ = json.NewEncoder(w).Encode(newRelayError(err))
		return
	}
	r.count("taken", "answer")
	defer resp.Body.Close()
	for _, h := range relayedHeaders {
		if vs := resp.Header.Values(h); len(vs) > 0 {
			w.Header()[h] = vs
		}
	}
	w.Header().Set(headerRelay, "answer")
	w.Header().Set("Trailer", trailerEnd)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	bp := relayBufs.Get().(*[]byte)
	defer relayBufs.Put(bp)
	for {
		n, err := resp.Body.Read(*bp)
		if n > 0 {
			if _, werr := w.Write((*bp)[:n]); werr != nil {
				return // the relaying replica is gone; closing the body cancels the run
			}
			_ = rc.Flush()
		}
		if err == io.EOF {
			w.Header().Set(trailerEnd, "ok")
			return
		}
		if err != nil {
			// The answer is cut: its end says why, as the Hub classified
			// it, for the relaying replica to report as its own.
			end, _ := json.Marshal(newRelayError(err))
			w.Header().Set(trailerEnd, string(end))
			return
		}
	}
}

// relayBodySlack is how much longer than MaxBodyBytes a relayed body may
// be.
const relayBodySlack = 64 << 10

// validRelayPath reports whether path is one an adapter's call would
// have: absolute, short, lowercase letters, digits, '/', '-' and '_'.
func validRelayPath(path string) bool {
	if !strings.HasPrefix(path, "/") || len(path) > 256 {
		return false
	}
	for i := range len(path) {
		if c := path[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '/' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// refuse answers a relay request it will not run, in the API's error
// shape with the relay's own code (the protocol between replicas, not the
// API's), and says so in the log, once a minute at most (a port that
// anyone can reach must not flood it): a replica sending what this one
// refuses has another secret or another version.
func (r *Relay) refuse(w http.ResponseWriter, req *http.Request, status int, code, msg string) {
	r.count("taken", "refused")
	if n := r.refusals.Add(1); r.logRefusal() {
		r.deps.Logger.Warn("edge: a relayed run refused", "remote", req.RemoteAddr, "status", status, "code", code, "reason", msg,
			"refused_since_last_line", n)
		r.refusals.Store(0)
	}
	apierror.Write(w, &apierror.Answer{Code: weir.Code(code), Status: status, Message: msg})
}
