package edge

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/edge/edgepb"
	"github.com/weir-gateway/weir/internal/lifecycle"
)

// Config tunes the Hub.
type Config struct {
	// HeartbeatInterval is how often nodes are told to heartbeat.
	// Default 2s.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a session may go without a heartbeat
	// before its node is declared gone. Default 3 × HeartbeatInterval.
	HeartbeatTimeout time.Duration
	// RegisterTimeout bounds the wait for a new session's Register.
	// Default 10s.
	RegisterTimeout time.Duration
	// RunHeaderTimeout bounds the wait from a run's offer to its
	// answer's head; RunIdleTimeout each wait for more of the answer.
	// Default 120s each; the node's own stall timeout usually ends a
	// stuck run first, with evidence.
	RunHeaderTimeout time.Duration
	RunIdleTimeout   time.Duration
	// ProbeInterval is how often an unavailable provider is probed.
	// Default 5s.
	ProbeInterval time.Duration
	// MaxMessageBytes bounds one message a node sends. Default 4 MiB.
	MaxMessageBytes int
	// TokenCacheTTL is how long a token Authenticate accepted is taken
	// as good for Run streams without asking again: a node opens one per
	// request, and a store lookup each time would be the tunnel's largest
	// cost. A revoked token's Run streams are refused within it; a
	// session's Control stream is always checked. Default 2s, as
	// server.key_cache_ttl is for API keys; negative: every Run stream
	// is checked.
	TokenCacheTTL time.Duration
	// TokenRecheck is how often a live session's token is checked again,
	// so that revoking a node's token (weir nodes revoke, from any
	// process) ends its session within it. Default 30s.
	TokenRecheck time.Duration
	// AuthTimeout is how long a connection to a guarded listener (Guard)
	// may take to open a stream with an accepted token before it is
	// closed; MaxUnauthenticated how many connections that have not are
	// held at once (more are closed as they come). Default 10s and 128.
	AuthTimeout        time.Duration
	MaxUnauthenticated int
	// ForgetAfter is how long after a node's session ended, with no
	// newer one, its scopes are retired and the node forgotten (forget.go).
	// Default 24h; negative: never.
	ForgetAfter time.Duration
	// TLS, if set, is the server's TLS configuration; nil: plaintext
	// (for loopback and private networks).
	TLS *tls.Config
	// Clock measures heartbeats; default clock.Real (monotonic).
	Clock clock.Clock
}

func (c *Config) defaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = 3 * c.HeartbeatInterval
	}
	if c.RegisterTimeout <= 0 {
		c.RegisterTimeout = 10 * time.Second
	}
	if c.RunHeaderTimeout <= 0 {
		c.RunHeaderTimeout = 120 * time.Second
	}
	if c.RunIdleTimeout <= 0 {
		c.RunIdleTimeout = 120 * time.Second
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = 5 * time.Second
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 4 << 20
	}
	if c.TokenCacheTTL == 0 {
		c.TokenCacheTTL = 2 * time.Second
	}
	if c.TokenRecheck <= 0 {
		c.TokenRecheck = 30 * time.Second
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = 10 * time.Second
	}
	if c.MaxUnauthenticated <= 0 {
		c.MaxUnauthenticated = 128
	}
	if c.ForgetAfter == 0 {
		c.ForgetAfter = 24 * time.Hour
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
}

// Identity is the node a token authenticates.
type Identity struct {
	ID   string
	Name string
}

// ErrUnauthenticated is an Authenticate's answer to a token it does not
// accept (unknown or revoked).
var ErrUnauthenticated = errors.New("edge: the node's token is not accepted")

// Deps are what the Hub is built on.
type Deps struct {
	Engine admission.Engine
	// Authenticate finds the node a token belongs to: ErrUnauthenticated
	// for an unknown or revoked one, another error when it cannot tell.
	Authenticate func(ctx context.Context, token string) (Identity, error)
	Logger       *slog.Logger
	// Metrics counts the Hub's decisions; nil: none.
	Metrics Metrics
}

// Metrics receives the Hub's decisions. metrics.Metrics implements it.
type Metrics interface {
	// Evidence counts one piece of health evidence: its source ("stall",
	// "probe") and the decision ("applied", "rejected_stale",
	// "rejected_binding", "rejected_ambiguous", "rejected_invalid").
	Evidence(source, decision string)
	// TokenConflict counts one registration refused because another
	// process of the node holds a live session (token_in_use).
	TokenConflict()
}

// Hub serves the edge protocol to nodes and keeps their sessions.
type Hub struct {
	edgepb.UnimplementedEdgeServer

	cfg  Config
	deps Deps

	mu       sync.Mutex
	nodes    map[string]*node // by node id
	probeSeq uint64

	// changes has a value when what the Hub serves may have changed
	// since it was last taken (see Changes).
	changes chan struct{}

	// tokens are the tokens Authenticate accepted, by their SHA-256, with
	// when; guarded by tokensMu.
	tokensMu sync.Mutex
	tokens   map[[sha256.Size]byte]acceptedToken

	// guard bounds the connections of guarded listeners that have not
	// authenticated (guard.go).
	guard guard
}

type acceptedToken struct {
	id Identity
	at time.Time
}

// maxAcceptedTokens bounds Hub.tokens: only tokens of stored nodes get
// in, but a store of many nodes must not grow it without end.
const maxAcceptedTokens = 4096

// node is one node the Hub has seen: its newest generation and its
// session while one is live.
type node struct {
	// attaching serializes the sessions' configuration of the node's
	// scopes, so that an older session's settings never land after a
	// newer one's. Taken before Hub.mu.
	attaching sync.Mutex

	id, name string
	gen      uint64
	sess     *session
	// providers are the newest session's, kept after it ends so that its
	// scopes can be retired or taken over by the next session.
	providers map[string]*edgepb.Provider
	lastSeen  time.Time
	// forgetTimer forgets the node ForgetAfter after its session ended;
	// nil while a session lives. Guarded by Hub.mu.
	forgetTimer clock.Timer
}

// New returns a Hub.
func New(cfg Config, deps Deps) *Hub {
	cfg.defaults()
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{cfg: cfg, deps: deps, nodes: make(map[string]*node), changes: make(chan struct{}, 1)}
}

var _ edgepb.EdgeServer = (*Hub)(nil)

// Server returns a gRPC server serving the Hub, with the Config's message
// bound, keepalive and TLS; serve it on a listener Guard bounds.
func (h *Hub) Server() *grpc.Server {
	opts := []grpc.ServerOption{
		// The connection's handshake (TLS, HTTP/2's preface) within the
		// time it has to authenticate.
		grpc.ConnectionTimeout(h.cfg.AuthTimeout),
		grpc.MaxRecvMsgSize(h.cfg.MaxMessageBytes),
		grpc.InitialWindowSize(edgepb.AnswerWindow),
		grpc.InitialConnWindowSize(edgepb.ConnWindow),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	if h.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(h.cfg.TLS)))
	}
	s := grpc.NewServer(opts...)
	edgepb.RegisterEdgeServer(s, h)
	return s
}

// Serve serves nodes on ln, guarded, until the server stops.
func (h *Hub) Serve(ln net.Listener) error { return h.Server().Serve(h.Guard(ln)) }

// ServeOn is the Hub serving nodes on ln, guarded, as a service: Start
// serves, Stop ends the nodes' sessions at once (their streams never
// end by themselves) and closes ln.
func (h *Hub) ServeOn(ln net.Listener) lifecycle.Service {
	srv := h.Server()
	var loop lifecycle.Loop
	return lifecycle.Funcs{
		OnStart: func(context.Context) error {
			loop.Go(func(context.Context) error { return srv.Serve(h.Guard(ln)) })
			return nil
		},
		OnStop: func(ctx context.Context) error {
			srv.Stop()
			return loop.Stop(ctx)
		},
	}
}

// authenticate reads the bearer token of a stream's metadata and checks
// it with Authenticate, or, for a Run stream (run true), against the
// tokens accepted within TokenCacheTTL.
func (h *Hub) authenticate(ctx context.Context, run bool) (Identity, error) {
	token, err := bearerToken(ctx)
	if err != nil {
		return Identity{}, err
	}
	key := sha256.Sum256([]byte(token))
	now := h.cfg.Clock.Now()
	if run && h.cfg.TokenCacheTTL > 0 {
		h.tokensMu.Lock()
		t, ok := h.tokens[key]
		h.tokensMu.Unlock()
		if ok && now.Sub(t.at) < h.cfg.TokenCacheTTL {
			h.guard.authenticated(ctx)
			return t.id, nil
		}
	}
	id, err := h.deps.Authenticate(ctx, token)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		h.tokensMu.Lock()
		delete(h.tokens, key)
		h.tokensMu.Unlock()
		return Identity{}, status.Error(codes.Unauthenticated, "the node's token is unknown or revoked")
	case err != nil:
		h.deps.Logger.Warn("edge: could not check a node's token", "error", err)
		return Identity{}, status.Error(codes.Unavailable, "the gateway cannot check tokens right now; retry")
	}
	h.tokensMu.Lock()
	if h.tokens == nil || len(h.tokens) >= maxAcceptedTokens {
		h.tokens = make(map[[sha256.Size]byte]acceptedToken)
	}
	h.tokens[key] = acceptedToken{id: id, at: now}
	h.tokensMu.Unlock()
	h.guard.authenticated(ctx)
	return id, nil
}

// bearerToken is the bearer token of a stream's metadata.
func bearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	if len(auth) != 1 {
		return "", status.Error(codes.Unauthenticated, "a node authenticates with one header: authorization: Bearer <token>")
	}
	token, ok := strings.CutPrefix(auth[0], "Bearer ")
	if !ok || token == "" {
		return "", status.Error(codes.Unauthenticated, "the authorization header is not a bearer token")
	}
	return token, nil
}

// recheck checks s's token again every TokenRecheck while s lives: a
// token revoked since (or now another node's) ends the session, as a
// disconnect does; a store that cannot answer changes nothing until the
// next check.
func (h *Hub) recheck(s *session, token string) {
	t := h.cfg.Clock.AfterFunc(h.cfg.TokenRecheck, func() {
		if s.ended() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.TokenRecheck)
		id, err := h.deps.Authenticate(ctx, token)
		cancel()
		switch {
		case errors.Is(err, ErrUnauthenticated), err == nil && id.ID != s.node.id:
			h.tokensMu.Lock()
			delete(h.tokens, sha256.Sum256([]byte(token)))
			h.tokensMu.Unlock()
			h.deps.Logger.Warn("edge: a node's token was revoked; its session ends", "node", s.node.id, "generation", s.gen)
			s.end(errRevoked)
			return
		case err != nil:
			h.deps.Logger.Warn("edge: could not check a live node's token; it keeps its session until the next check", "node", s.node.id, "error", err)
		}
		h.recheck(s, token)
	})
	s.mu.Lock()
	s.rechecks = t
	s.mu.Unlock()
}

// nextGenLocked gives n a generation greater than any it had, and not
// below the clock's microseconds, so that a generation also grows across
// restarts of the gateway.
func (h *Hub) nextGenLocked(n *node) uint64 {
	n.gen = max(n.gen+1, uint64(h.cfg.Clock.Now().UnixMicro()))
	return n.gen
}

// tokenInUseError refuses a registration of another process of a node
// whose session is live (edgepb.Register.instance).
type tokenInUseError struct {
	// live is the live session: its process and where it connects from.
	live, from string
	// retryAfter is when the live session would be declared gone if it
	// fell silent now, and a heartbeat interval more.
	retryAfter time.Duration
}

func (e *tokenInUseError) Error() string {
	return fmt.Sprintf("another process of the node (instance %s, from %s) has a live session", e.live, e.from)
}

// attach starts a session of id with its registration: a newer
// generation, the session it supersedes ended and fenced, the node's
// scopes configured and activated at the new generation. A live session
// of another process of the node is not superseded: attach returns a
// *tokenInUseError and changes nothing.
func (h *Hub) attach(ctx context.Context, id Identity, reg *edgepb.Register, s *session) error {
	h.mu.Lock()
	n := h.nodes[id.ID]
	if n == nil {
		n = &node{id: id.ID}
		h.nodes[id.ID] = n
	}
	h.mu.Unlock()
	n.attaching.Lock()
	defer n.attaching.Unlock()
	h.mu.Lock()
	if old := n.sess; old != nil && !old.ended() && old.instance != "" && s.instance != "" && old.instance != s.instance {
		// A session ends when it misses its heartbeats (its watchdog), so
		// one not ended is live, or at most that long from being gone.
		left := max(h.cfg.HeartbeatTimeout-h.cfg.Clock.Now().Sub(n.lastSeen), 0)
		h.mu.Unlock()
		return &tokenInUseError{live: old.instance, from: old.remote, retryAfter: left + h.cfg.HeartbeatInterval}
	}
	n.name = id.Name
	old := n.sess
	gen := h.nextGenLocked(n)
	prev := n.providers
	n.sess, n.providers, n.lastSeen = s, providerMap(reg.Providers), h.cfg.Clock.Now()
	stopTimer(&n.forgetTimer)
	s.node, s.gen = n, gen
	h.mu.Unlock()

	owner := weir.NodeOwner(id.ID)
	if old != nil {
		old.end(errSuperseded)
	}
	// Fence every older generation before the new one is activated: what
	// the old session held goes back, and its waiters re-resolve.
	if err := h.deps.Engine.Fence(ctx, owner, gen-1); err != nil {
		return fmt.Errorf("fence the node's older sessions: %w", err)
	}
	for _, p := range reg.Providers {
		cfg := slotsConfig(id.ID, gen, p, false)
		if err := h.deps.Engine.SetScope(ctx, weir.NodeScope(id.ID, p.Id), cfg); err != nil {
			return fmt.Errorf("provider %s: %w", p.Id, err)
		}
		long := weir.NodeLongScope(id.ID, p.Id)
		if p.LongSlots > 0 {
			cfg.Limit = int64(p.LongSlots)
			if err := h.deps.Engine.SetScope(ctx, long, cfg); err != nil {
				return fmt.Errorf("provider %s's long-context slots: %w", p.Id, err)
			}
		} else if old := prev[p.Id]; old != nil && old.LongSlots > 0 {
			h.removeScope(ctx, long)
		}
	}
	for pid, p := range prev {
		if _, ok := n.providers[pid]; ok {
			continue
		}
		h.removeScope(ctx, weir.NodeScope(id.ID, pid))
		if p.LongSlots > 0 {
			h.removeScope(ctx, weir.NodeLongScope(id.ID, pid))
		}
	}
	// Serving lists the session before its activation re-resolves the
	// waiters, so that they gain its providers: until then its scopes
	// are orphaned (a returning node's) or new, and a request that
	// resolves to them meanwhile waits for them as for any.
	h.mu.Lock()
	s.serving = true
	h.mu.Unlock()
	if err := h.deps.Engine.Activate(ctx, owner, gen); err != nil {
		h.mu.Lock()
		s.serving = false
		h.mu.Unlock()
		return fmt.Errorf("activate the node's scopes: %w", err)
	}
	h.changed()
	return nil
}

// slotsConfig is the scope of provider p's slots on node id's session of
// generation gen; paused, it admits nothing (p unavailable, or the node
// draining).
func slotsConfig(id string, gen uint64, p *edgepb.Provider, paused bool) admission.ScopeConfig {
	return admission.ScopeConfig{Limit: int64(p.Slots), Owner: weir.NodeOwner(id), OwnerGen: gen, Paused: paused}
}

// repause pauses the slots of s's provider p while it is unavailable or
// the node drains, and resumes them otherwise; a failure is only logged
// (Serving leaves the provider out all the same).
func (h *Hub) repause(s *session, p *edgepb.Provider) {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	h.mu.Lock()
	paused := s.draining || s.unavailableLocked(p.Id)
	h.mu.Unlock()
	if err := h.deps.Engine.SetScope(context.Background(), weir.NodeScope(s.node.id, p.Id), slotsConfig(s.node.id, s.gen, p, paused)); err != nil {
		h.deps.Logger.Warn("edge: could not pause or resume a provider's slots", "node", s.node.id, "provider", p.Id, "paused", paused, "error", err)
	}
	h.changed()
}

// drain takes s's Drain: nothing more is offered to it, and the requests
// waiting for its slots go elsewhere (their resolvers no longer see it),
// while its runs in flight finish. The session's end fences it as ever.
func (h *Hub) drain(s *session) {
	h.mu.Lock()
	if s.draining || s.node.sess != s {
		h.mu.Unlock()
		return
	}
	s.draining = true
	providers := sortedProviders(s.node.providers)
	h.mu.Unlock()
	s.mu.Lock()
	runs := len(s.runs)
	s.mu.Unlock()
	h.deps.Logger.Info("edge: node draining", "node", s.node.id, "generation", s.gen, "runs", runs)
	for _, p := range providers {
		h.repause(s, p)
	}
}

// Serving lists the providers of live sessions that serve the public
// model, by node and provider id. It takes only the Hub's lock (the
// engine calls it, through a waiter's Resolve, under its own).
func (h *Hub) Serving(model string) []weir.NodeTarget {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []weir.NodeTarget
	h.eachServingLocked(func(m string, t weir.NodeTarget) {
		if m == model {
			out = append(out, t)
		}
	})
	sortTargets(out)
	return out
}

// Served is every public model the Hub's live sessions serve, with the
// providers serving it, as Serving gives them.
func (h *Hub) Served() map[string][]weir.NodeTarget {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]weir.NodeTarget)
	h.eachServingLocked(func(m string, t weir.NodeTarget) { out[m] = append(out[m], t) })
	for _, ts := range out {
		sortTargets(ts)
	}
	return out
}

// Changes has a value once what Served gives may have changed since the
// value was last taken: a session began serving or ended, a provider's
// health or a node's draining changed.
func (h *Hub) Changes() <-chan struct{} { return h.changes }

func (h *Hub) changed() {
	select {
	case h.changes <- struct{}{}:
	default:
	}
}

// eachServingLocked calls f with each public model a provider of a live
// session serves, and the provider.
func (h *Hub) eachServingLocked(f func(model string, t weir.NodeTarget)) {
	for _, n := range h.nodes {
		if n.sess == nil || !n.sess.serving || n.sess.draining {
			continue
		}
		for _, p := range n.providers {
			if n.sess.unavailableLocked(p.Id) {
				continue
			}
			for _, m := range p.Models {
				f(m.Name, weir.NodeTarget{Node: n.id, Gen: n.sess.gen, Provider: p.Id, Runtime: m.Runtime,
					LongPromptTokens: p.LongPromptTokens})
			}
		}
	}
}

func sortTargets(ts []weir.NodeTarget) { slices.SortFunc(ts, weir.CompareNodeTargets) }

// removeScope retires a scope of a provider the node no longer has; a
// failure leaves it configured (and orphaned) and is only logged.
func (h *Hub) removeScope(ctx context.Context, scope string) {
	if err := h.deps.Engine.RemoveScope(ctx, scope); err != nil && !errors.Is(err, admission.ErrUnknownScope) {
		h.deps.Logger.Warn("edge: could not retire a provider's scope", "scope", scope, "error", err)
	}
}

// detach ends s's part in its node: if s is still the node's session,
// the node's owner is fenced at s's generation, which releases its
// leases and orphans its scopes. A superseded session changes nothing.
func (h *Hub) detach(s *session, cause error) {
	h.mu.Lock()
	n := s.node
	current := n != nil && n.sess == s
	if current {
		n.sess = nil
		h.forgetLaterLocked(n, s.gen, h.cfg.ForgetAfter)
	}
	h.mu.Unlock()
	if current {
		h.changed()
	}
	if n == nil {
		return
	}
	if !current {
		h.deps.Logger.Info("edge: a superseded session ended", "node", n.id, "generation", s.gen, "cause", cause)
		return
	}
	h.deps.Logger.Warn("edge: node gone; its leases are released and its scopes orphaned", "node", n.id, "name", n.name,
		"generation", s.gen, "cause", cause)
	if err := h.deps.Engine.Fence(context.Background(), weir.NodeOwner(n.id), s.gen); err != nil {
		h.deps.Logger.Error("edge: could not fence a gone node", "node", n.id, "generation", s.gen, "error", err)
	}
}

// beat records a heartbeat of s.
func (h *Hub) beat(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.node != nil && s.node.sess == s {
		s.node.lastSeen = h.cfg.Clock.Now()
	}
}

func providerMap(ps []*edgepb.Provider) map[string]*edgepb.Provider {
	m := make(map[string]*edgepb.Provider, len(ps))
	for _, p := range ps {
		m[p.Id] = p
	}
	return m
}

// sortedProviders are a node's providers by id.
func sortedProviders(m map[string]*edgepb.Provider) []*edgepb.Provider {
	ps := make([]*edgepb.Provider, 0, len(m))
	for _, p := range m {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *edgepb.Provider) int { return strings.Compare(a.Id, b.Id) })
	return ps
}
