package node

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
)

// Provider is one local runtime the node serves.
type Provider struct {
	// ID names the provider within the node. Required.
	ID string
	// Adapter is the runtime's protocol. Default "openai".
	Adapter string
	// URL is the runtime's base URL, without a trailing slash
	// (http://127.0.0.1:8000/v1); it is the provider's target. Required.
	URL string
	// Slots is how many requests the runtime serves at once. Required.
	Slots int
	// LongSlots and LongPromptTokens are the long-context slots and the
	// prompt size that needs one. Default 0: none.
	LongSlots        int
	LongPromptTokens int64
	// Models are the models it serves. Required.
	Models []Model
}

// Model is one model of a provider: its public name and the runtime's.
type Model struct {
	Name    string
	Runtime string
}

// Config configures an Agent.
type Config struct {
	// Gateway is the host:port of the gateway's edge listener. Required.
	Gateway string
	// Token is the node's token ("wn-…"). Required.
	Token string
	// TLS, if set, dials the gateway over TLS; nil: plaintext.
	TLS *tls.Config
	// Version is the node's build, sent in Register (cut to 128 bytes,
	// the gateway's bound). Default "unknown".
	Version string
	// Providers are the node's runtimes. Required: at least one.
	Providers []Provider
	// StallTimeout is how long a run may wait for a byte of the runtime's
	// answer before it is ended as stalled. Default 60s.
	StallTimeout time.Duration
	// ProbeTimeout bounds one health probe of a runtime. Default 5s.
	ProbeTimeout time.Duration
	// DrainTimeout is how long runs may finish after Run's context ends
	// before they are cancelled. Default 30s; negative: none.
	DrainTimeout time.Duration
	// MaxBodyBytes bounds a run's request body; a larger one ends the run
	// with ERROR. Default 16 MiB.
	MaxBodyBytes int64
	// ReadBufferBytes is the most of the runtime's answer read, and sent
	// as one Chunk, at a time. Default 32 KiB.
	ReadBufferBytes int
	// BackoffMin and BackoffMax bound the wait before dialing again after
	// a failed attempt or a session's end; it doubles from the minimum
	// with each failure, jittered. Default 100ms and 10s.
	BackoffMin, BackoffMax time.Duration
	// WelcomeTimeout bounds the wait for Welcome after Register.
	// Default 30s.
	WelcomeTimeout time.Duration
	// ConflictBackoff is the wait before registering again after the
	// gateway refused the node because another process holds a live
	// session with its token (token_in_use) twice in a row; after the
	// first refusal the agent waits as long as the gateway says.
	// Default 1m.
	ConflictBackoff time.Duration
}

func (c *Config) defaults() {
	if c.Version == "" {
		c.Version = "unknown"
	}
	if len(c.Version) > maxVersionBytes {
		c.Version = c.Version[:maxVersionBytes]
	}
	for i := range c.Providers {
		if c.Providers[i].Adapter == "" {
			c.Providers[i].Adapter = "openai"
		}
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 60 * time.Second
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = 5 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 16 << 20
	}
	if c.ReadBufferBytes <= 0 {
		c.ReadBufferBytes = 32 << 10
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 100 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(10*time.Second, c.BackoffMin)
	}
	if c.WelcomeTimeout <= 0 {
		c.WelcomeTimeout = 30 * time.Second
	}
	if c.ConflictBackoff <= 0 {
		c.ConflictBackoff = time.Minute
	}
}

// maxVersionBytes is the gateway's bound on Register.version.
const maxVersionBytes = 128

// Deps are what an Agent is built on.
type Deps struct {
	// Clock times heartbeats, stalls, probes and backoff. Default
	// clock.Real.
	Clock clock.Clock
	// Logger logs sessions and runs. Default: discard.
	Logger *slog.Logger
	// HTTP calls the runtimes. It must set no overall timeout: a stream
	// lasts as long as the runtime generates, and stalls are the agent's
	// to detect. Default: a client with no timeout that keeps as many
	// idle connections to each runtime as its providers have slots
	// (runtimeTransport).
	HTTP *http.Client
	// DialOptions are added to the agent's own when it dials the gateway
	// (a test's dialer, say).
	DialOptions []grpc.DialOption
	// Tracing, if set, traces the runs whose gateway call is traced
	// (Offer.traceparent): the node's span of each joins the gateway's
	// trace, and the runtime is sent the run's trace context. Default
	// nil: none.
	Tracing trace.TracerProvider
}

// Agent is an edge node's agent: see the package doc.
type Agent struct {
	cfg  Config
	deps Deps
	// instance names this agent (its process) to the gateway, the same
	// on each of its sessions (Register.instance): a session of another
	// process with the node's token is refused while this one's lives.
	instance string
	// providers are cfg.Providers by id.
	providers map[string]*Provider
	// bufs are read buffers of ReadBufferBytes for runtime answers, kept
	// between runs rather than made for each.
	bufs sync.Pool
}

// New returns an Agent; it checks only what the agent cannot run without
// (the config file's own validation is package config's).
func New(cfg Config, deps Deps) (*Agent, error) {
	cfg.defaults()
	switch {
	case cfg.Gateway == "":
		return nil, errors.New("node: no gateway address")
	case cfg.Token == "":
		return nil, errors.New("node: no token")
	case len(cfg.Providers) == 0:
		return nil, errors.New("node: no providers")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.HTTP == nil {
		deps.HTTP = &http.Client{Transport: runtimeTransport(cfg.Providers)}
	}
	a := &Agent{cfg: cfg, deps: deps, instance: rand.Text(), providers: make(map[string]*Provider, len(cfg.Providers))}
	a.bufs.New = func() any {
		b := make([]byte, cfg.ReadBufferBytes)
		return &b
	}
	for i := range a.cfg.Providers {
		p := &a.cfg.Providers[i]
		if a.providers[p.ID] != nil {
			return nil, fmt.Errorf("node: provider %q twice", p.ID)
		}
		a.providers[p.ID] = p
	}
	return a, nil
}

// runtimeTransport is the default client's transport: http.DefaultTransport's
// settings, keeping as many idle connections to each runtime's host as
// the providers there have slots. http.DefaultTransport keeps 2 a host,
// so a runtime serving more runs at once was dialled anew for most of
// them, and each connection closed after one run.
func runtimeTransport(ps []Provider) *http.Transport {
	t := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t = dt.Clone()
	}
	slots := map[string]int{}
	total := 0
	for _, p := range ps {
		host := p.URL
		if u, err := url.Parse(p.URL); err == nil {
			host = u.Host
		}
		slots[host] += p.Slots
		total += p.Slots
	}
	for _, n := range slots {
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, n)
	}
	t.MaxIdleConns = max(t.MaxIdleConns, total)
	return t
}

// Run keeps a session with the gateway, dialing again whenever one ends,
// until ctx ends; then it drains (see the package doc) and returns nil.
func (a *Agent) Run(ctx context.Context) error {
	// hard ends sessions and runs: DrainTimeout after ctx, or at once
	// when there is nothing to drain.
	hard, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-hard.Done():
			return
		}
		if a.cfg.DrainTimeout < 0 {
			stop()
			return
		}
		t := a.deps.Clock.AfterFunc(a.cfg.DrainTimeout, stop)
		<-hard.Done()
		t.Stop()
	}()

	backoff := a.cfg.BackoffMin
	conflicts := 0 // token_in_use refusals since the last session
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return nil
		}
		s := newSession(a)
		started := a.deps.Clock.Now()
		err := s.run(hard, ctx.Done())
		if ctx.Err() != nil {
			return nil
		}
		if s.gen != 0 {
			conflicts = 0
		}
		var r *refusedError
		if errors.As(err, &r) && r.code == codeTokenInUse {
			// Another process serves as this node. The first refusal
			// may be a restart of this node whose old session the gateway
			// has not yet found gone: wait as long as the gateway says.
			// After that, the other process is alive: retry seldom.
			conflicts++
			wait := max(r.retryAfter, a.cfg.BackoffMin)
			if conflicts > 1 {
				wait = a.cfg.ConflictBackoff
			}
			logged := func() {
				a.deps.Logger.Error("node: the gateway refuses this process: another weir node process is connected with this node's token, "+
					"and a token serves one process at a time; give each process its own token (weir nodes create), or stop the other",
					"gateway", a.cfg.Gateway, "refusal", r.message, "retry_in", wait.String())
			}
			if !a.sleep(ctx, wait, logged) {
				return nil
			}
			continue
		}
		lived := s.gen != 0 && a.deps.Clock.Now().Sub(started) >= a.cfg.BackoffMax
		if lived {
			backoff, attempt = a.cfg.BackoffMin, 1
		}
		wait := jitter(backoff)
		logged := func() {
			if s.gen == 0 {
				a.deps.Logger.Warn("node: could not open a session with the gateway; retrying",
					"gateway", a.cfg.Gateway, "attempt", attempt, "backoff", wait.String(), "error", err)
			} else {
				a.deps.Logger.Info("node: dialing the gateway again", "backoff", wait.String())
			}
		}
		if !a.sleep(ctx, wait, logged) {
			return nil
		}
		backoff = min(2*backoff, a.cfg.BackoffMax)
	}
}

// jitter is d spread over [d/2, d], so that nodes dropped together do not
// dial back together.
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + mrand.N(d-half+1)
}

// sleep waits d on the clock; false if ctx ended first. It calls logged
// once the wait is armed: whoever reads the log may move the clock, and
// the wait ends with it.
func (a *Agent) sleep(ctx context.Context, d time.Duration, logged func()) bool {
	done := make(chan struct{})
	t := a.deps.Clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	logged()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// dial makes a session's connection to the gateway: TLS if configured,
// keepalive, and the token on every stream.
func (a *Agent) dial() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if a.cfg.TLS != nil {
		creds = credentials.NewTLS(a.cfg.TLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearer{token: a.cfg.Token, secure: a.cfg.TLS != nil}),
		// Within the gateway's enforcement (pings no more often than 5s):
		// a dead path to the gateway is found in about 40s even when no
		// run is sending.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithInitialWindowSize(edgepb.BodyWindow),
		grpc.WithInitialConnWindowSize(edgepb.ConnWindow),
	}
	opts = append(opts, a.deps.DialOptions...)
	conn, err := grpc.NewClient(a.cfg.Gateway, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", a.cfg.Gateway, err)
	}
	return conn, nil
}

// register is the node's Register.
func (a *Agent) register() *edgepb.Register {
	r := &edgepb.Register{Version: a.cfg.Version, InlineBodies: true, Instance: a.instance}
	for _, p := range a.cfg.Providers {
		pp := &edgepb.Provider{Id: p.ID, Adapter: p.Adapter, Target: p.URL, Slots: int32(p.Slots),
			LongSlots: int32(p.LongSlots), LongPromptTokens: p.LongPromptTokens}
		for _, m := range p.Models {
			pp.Models = append(pp.Models, &edgepb.ModelRoute{Name: m.Name, Runtime: m.Runtime})
		}
		r.Providers = append(r.Providers, pp)
	}
	return r
}

// bearer puts the node's token on every stream.
type bearer struct {
	token  string
	secure bool
}

var _ credentials.PerRPCCredentials = bearer{}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is true over TLS, so that the token is never
// sent in the clear by a connection that was meant to be secure; a
// plaintext config sends it as configured.
func (b bearer) RequireTransportSecurity() bool { return b.secure }
