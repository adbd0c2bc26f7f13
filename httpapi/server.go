// Package httpapi is Weir's HTTP face: the OpenAI-compatible API (chat
// completions with streaming, embeddings, images, speech, models), the
// admin API (queues), health and metrics endpoints. Every model request is
// admitted through the engine against three scopes — the key's, its
// group's and the chosen platform model's — so a burst waits in a fair
// queue instead of bouncing off a provider's 429.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/router"
	"github.com/weir-gateway/weir/task"
	"github.com/weir-gateway/weir/webhook"
)

// Config tunes the API.
type Config struct {
	// MaxBodyBytes bounds request bodies; larger ones get 413 before they
	// are parsed. Default 10 MiB.
	MaxBodyBytes int64
	// DefaultMaxWait is how long a request may queue unless its scopes or
	// its X-Weir-Max-Wait header say less. Default 30s.
	DefaultMaxWait time.Duration
	// RetryBudget is the most upstream attempts one request makes across
	// its candidates. Default 3.
	RetryBudget int
	// UpstreamTimeout bounds the wait for an upstream's response headers
	// when its platform sets none. Default 120s.
	UpstreamTimeout time.Duration
	// AdminToken guards /admin; empty means loopback clients only.
	AdminToken string
	// KeyCacheTTL is how long a looked-up key is trusted before the store
	// is asked again (a revocation takes effect within it). Default 2s.
	KeyCacheTTL time.Duration
}

func (c *Config) defaults() {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 10 << 20
	}
	if c.DefaultMaxWait <= 0 {
		c.DefaultMaxWait = 30 * time.Second
	}
	if c.RetryBudget <= 0 {
		c.RetryBudget = 3
	}
	if c.UpstreamTimeout <= 0 {
		c.UpstreamTimeout = 120 * time.Second
	}
	if c.KeyCacheTTL <= 0 {
		c.KeyCacheTTL = 2 * time.Second
	}
}

// Metrics receives the API's measurements. metrics.Metrics implements it.
type Metrics interface {
	ObserveHTTP(endpoint string, status int, d time.Duration)
	ObserveUpstream(platformModel, outcome string, d time.Duration)
	ObserveQueueWait(model string, d time.Duration)
}

type noMetrics struct{}

func (noMetrics) ObserveHTTP(string, int, time.Duration)        {}
func (noMetrics) ObserveUpstream(string, string, time.Duration) {}
func (noMetrics) ObserveQueueWait(string, time.Duration)        {}

// Deps are the services the API is built on.
type Deps struct {
	Engine admission.Engine
	Store  weir.Store
	Router *router.Router
	Logger *slog.Logger
	// Metrics defaults to none; MetricsHandler serves /metrics if set.
	Metrics        Metrics
	MetricsHandler http.Handler
	// Usage receives one record per model request; it must not block.
	Usage func(weir.Usage)
	// HTTPClient talks to upstreams; default a pooled client.
	HTTPClient *http.Client
	// Clock measures waits and latencies; default clock.Real.
	Clock clock.Clock
	// Ready reports whether the gateway should take traffic (/readyz).
	Ready func() error
	// Tasks runs durable tasks (the video and task APIs); nil disables
	// them. Webhooks checks callback URLs.
	Tasks    *task.Service
	Webhooks *webhook.Sender
}

// Server is the HTTP API. Apply a catalog before serving.
type Server struct {
	cfg   Config
	deps  Deps
	state atomic.Pointer[state]
	keys  keyCache

	applyMu   sync.Mutex
	keyScopes sync.Map // key id → struct{}: scopes already configured
	ids       idSource
}

// state is one catalog, resolved for lookups. It is replaced whole on
// reload, so a request sees one consistent catalog from start to end.
type state struct {
	models       map[string]weir.Model
	modelNames   []string
	pms          map[string]weir.PlatformModel
	groups       map[string]weir.Group
	adapters     map[string]provider.Adapter
	async        map[string]provider.AsyncAdapter
	defaultGroup string
}

// New returns a Server.
func New(cfg Config, deps Deps) *Server {
	cfg.defaults()
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = noMetrics{}
	}
	if deps.Usage == nil {
		deps.Usage = func(weir.Usage) {}
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real
	}
	if deps.Webhooks == nil {
		deps.Webhooks = webhook.NewSender(webhook.Config{})
	}
	if deps.HTTPClient == nil {
		deps.HTTPClient = &http.Client{Transport: NewUpstreamTransport()}
	}
	s := &Server{cfg: cfg, deps: deps}
	s.keys.ttl = cfg.KeyCacheTTL
	s.keys.clock = deps.Clock
	s.ids = newIDSource()
	return s
}

// NewUpstreamTransport is the transport the gateway reaches upstreams
// with unless Deps.HTTPClient says otherwise: connections kept for a busy
// gateway's concurrency.
func NewUpstreamTransport() *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
}

// SetTasks attaches the task service (built after the Server, since it
// plans tasks through it). Call it before serving.
func (s *Server) SetTasks(t *task.Service) { s.deps.Tasks = t }

// Scope names. Each request needs one of each.

func limitsScope(l weir.Limits) admission.ScopeConfig {
	return admission.ScopeConfig{
		Limit:          l.Concurrency,
		QueueLimit:     l.QueueLimit,
		MaxWait:        l.MaxWait,
		LeaseTTL:       l.LeaseTTL,
		FairnessWindow: l.FairnessWindow,
		RPM:            l.RPM,
		TPM:            l.TPM,
	}
}

// Apply makes cat the served catalog: it configures the scopes of its
// platform models and groups (a lowered limit stops admissions until usage
// is below it; nothing in flight is revoked), retires scopes that left the
// catalog, and swaps the lookup state in one step.
func (s *Server) Apply(ctx context.Context, cat weir.Catalog, defaultGroup string) error {
	if err := cat.Validate(); err != nil {
		return err
	}
	if defaultGroup == "" {
		defaultGroup = "default"
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	next := &state{
		models:       make(map[string]weir.Model, len(cat.Models)),
		pms:          make(map[string]weir.PlatformModel, len(cat.PlatformModels)),
		groups:       make(map[string]weir.Group, len(cat.Groups)+1),
		adapters:     make(map[string]provider.Adapter, len(cat.Platforms)),
		async:        make(map[string]provider.AsyncAdapter, len(cat.Platforms)),
		defaultGroup: defaultGroup,
	}
	for _, p := range cat.Platforms {
		timeout := p.Timeout
		if timeout <= 0 {
			timeout = s.cfg.UpstreamTimeout
		}
		next.adapters[p.Name] = &provider.OpenAI{BaseURL: p.BaseURL, APIKey: p.APIKey, Client: s.deps.HTTPClient, Timeout: timeout}
		next.async[p.Name] = &provider.OpenAIVideo{BaseURL: p.BaseURL, APIKey: p.APIKey, Client: s.deps.HTTPClient, Timeout: timeout}
	}
	for _, m := range cat.Models {
		next.models[m.Name] = m
		next.modelNames = append(next.modelNames, m.Name)
	}
	for _, pm := range cat.PlatformModels {
		next.pms[pm.Name] = pm
	}
	for _, g := range cat.Groups {
		next.groups[g.Name] = g
	}
	if _, ok := next.groups[defaultGroup]; !ok {
		next.groups[defaultGroup] = weir.Group{Name: defaultGroup}
	}
	for _, pm := range next.pms {
		// A platform model is where tenants meet: keys of the same
		// priority take turns there (FIFO within a key), so one key with a
		// thousand queued requests does not stall everyone else.
		cfg := limitsScope(pm.Limits)
		cfg.RoundRobin = true
		if err := s.deps.Engine.SetScope(ctx, weir.PlatformModelScope(pm.Name), cfg); err != nil {
			return fmt.Errorf("platform model %s: %w", pm.Name, err)
		}
	}
	for _, g := range next.groups {
		cfg := limitsScope(g.Limits)
		cfg.LeaseTTL = 0
		cfg.RoundRobin = g.RoundRobin
		if err := s.deps.Engine.SetScope(ctx, weir.GroupScope(g.Name), cfg); err != nil {
			return fmt.Errorf("group %s: %w", g.Name, err)
		}
	}
	if prev := s.state.Load(); prev != nil {
		for name := range prev.pms {
			if _, ok := next.pms[name]; !ok {
				_ = s.deps.Engine.RemoveScope(ctx, weir.PlatformModelScope(name))
			}
		}
		for name := range prev.groups {
			if _, ok := next.groups[name]; !ok {
				_ = s.deps.Engine.RemoveScope(ctx, weir.GroupScope(name))
			}
		}
	}
	s.state.Store(next)
	return nil
}

// ensureKeyScope configures a key's own scope the first time it is used.
func (s *Server) ensureKeyScope(ctx context.Context, k weir.APIKey) error {
	if _, ok := s.keyScopes.Load(k.ID); ok {
		return nil
	}
	cfg := limitsScope(k.Limits)
	cfg.LeaseTTL = 0
	if err := s.deps.Engine.SetScope(ctx, weir.KeyScope(k.ID), cfg); err != nil {
		return err
	}
	s.keyScopes.Store(k.ID, struct{}{})
	return nil
}

// Handler returns the HTTP handler for everything the gateway serves.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", s.model(epChat))
	mux.Handle("POST /v1/embeddings", s.model(epEmbeddings))
	mux.Handle("POST /v1/images/generations", s.model(epImages))
	mux.Handle("POST /v1/audio/speech", s.model(epSpeech))
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{model...}", s.getModel)
	mux.HandleFunc("POST /v1/videos", s.createVideo)
	mux.HandleFunc("GET /v1/videos", s.listVideos)
	mux.HandleFunc("GET /v1/videos/{id}", s.getVideo)
	mux.HandleFunc("GET /v1/videos/{id}/content", s.videoContent)
	mux.HandleFunc("DELETE /v1/videos/{id}", s.deleteVideo)
	mux.HandleFunc("POST /v1/tasks", s.createTask)
	mux.HandleFunc("GET /v1/tasks", s.listTasks)
	mux.HandleFunc("GET /v1/tasks/{id}", s.getTask)
	mux.HandleFunc("POST /v1/tasks/{id}/cancel", s.cancelTask)
	mux.HandleFunc("DELETE /v1/tasks/{id}", s.deleteTask)
	mux.HandleFunc("GET /admin/queues", s.admin(s.queues))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.deps.MetricsHandler != nil {
		mux.Handle("GET /metrics", s.deps.MetricsHandler)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(CodeNotFound, "", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)))
	})
	return s.middleware(mux)
}

type ctxKey int

const reqInfoKey ctxKey = 0

// reqInfo travels with a request through the handlers.
type reqInfo struct {
	id, clientID string
	base, logger *slog.Logger
}

// log is the request's logger, with its ids on every line. It is made on
// first use: most requests log nothing at the default level.
func (ri *reqInfo) log() *slog.Logger {
	if ri.logger == nil {
		attrs := []any{slog.String("request_id", ri.id)}
		if ri.clientID != "" {
			attrs = append(attrs, slog.String("client_request_id", ri.clientID))
		}
		ri.logger = ri.base.With(attrs...)
	}
	return ri.logger
}

func info(ctx context.Context) *reqInfo {
	if ri, ok := ctx.Value(reqInfoKey).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{id: "-", base: slog.New(slog.DiscardHandler)}
}

// middleware gives every request an id (echoed in X-Request-Id and on
// every log line), recovers panics into a 500 in the API's error shape, and
// logs the request.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := &reqInfo{id: s.ids.next(), base: s.deps.Logger}
		if cid := r.Header.Get("X-Request-Id"); cid != "" && len(cid) <= 128 {
			ri.clientID = cid
		}
		rw := &statusWriter{ResponseWriter: w, id: ri.id}
		start := s.deps.Clock.Now()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				ri.log().Error("panic serving request", "panic", fmt.Sprint(p), "path", r.URL.Path)
				if !rw.wrote {
					writeError(rw, errorf(CodeInternal, "", "internal error"))
				}
			}
			if !rw.wrote {
				// net/http writes the headers of a handler that wrote
				// nothing once it returns.
				rw.setID()
			}
			if s.deps.Logger.Enabled(r.Context(), slog.LevelDebug) {
				ri.log().Debug("request", "method", r.Method, "path", r.URL.Path, "status", rw.status(), "duration", s.deps.Clock.Now().Sub(start))
			}
		}()
		next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), reqInfoKey, ri)))
	})
}

// statusWriter remembers the status written, for logs and metrics, and
// keeps http.ResponseController working through Unwrap. It adds the
// X-Request-Id header as the answer starts, not before: a request that
// waits in the queue holds no header map until it has something to say.
type statusWriter struct {
	http.ResponseWriter
	id    string
	code  int
	wrote bool
}

func (w *statusWriter) setID() { w.Header().Set("X-Request-Id", w.id) }

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
		w.setID()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
		w.setID()
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.code
}

// idSource makes request ids: a random process prefix and a counter, so
// they are unique without a syscall per request.
type idSource struct {
	prefix string
	n      atomic.Uint64
}

func newIDSource() idSource {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return idSource{prefix: "req_" + hex.EncodeToString(b[:]) + "_"}
}

func (s *idSource) next() string {
	return s.prefix + strconv.FormatUint(s.n.Add(1), 10)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.state.Load() == nil {
		http.Error(w, "no catalog applied", http.StatusServiceUnavailable)
		return
	}
	if s.deps.Ready != nil {
		if err := s.deps.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = w.Write([]byte("ready\n"))
}

// admin guards the admin API: a bearer token if one is configured,
// otherwise loopback clients only.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AdminToken != "" {
			if bearer(r) != s.cfg.AdminToken {
				writeError(w, errorf(CodeUnauthorized, "", "admin token required"))
				return
			}
		} else if !isLoopback(r.RemoteAddr) {
			writeError(w, errorf(CodeForbidden, "", "the admin API answers loopback clients only unless an admin token is set"))
			return
		}
		h(w, r)
	}
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// errClientGone marks a request whose client disconnected.
var errClientGone = errors.New("client disconnected")
