// Package httpapi is Weir's HTTP face: the OpenAI-compatible API (chat
// completions with streaming, embeddings, images and their edits and
// variations, speech, transcriptions and translations, models, videos
// and tasks), the admin API (queues, nodes, spend), health and metrics
// endpoints. It reads and validates a request's headers and body, has
// the gateway find its key and decide what the key may ask
// (gateway.Authenticate and Prepare), hands the request to the gateway
// to serve (admission against
// the key's, the group's and a platform model's scopes, the upstream
// call, release) or a task to the gateway's task front, and encodes the
// answer — headers, write deadlines, stream framing and the one mapping
// from errors to the API's codes stay here. What it calls it declares by
// role in services.go.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/adminauth"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/internal/header"
	"github.com/weir-gateway/weir/tracing"
	"go.opentelemetry.io/otel/trace"
)

// Config tunes the API.
type Config struct {
	// MaxBodyBytes bounds request bodies; larger ones get 413 before they
	// are parsed. Default 10 MiB.
	MaxBodyBytes int64
	// MaxUploadBytes bounds a multipart upload (image edits and
	// variations, transcriptions, translations), the form whole: one
	// declared larger gets 413 before it is read, one that grows past it
	// 413 when it does. Default DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// DefaultMaxWait is how long a request may queue unless its scopes or
	// its X-Weir-Max-Wait header say less. Default 30s; negative: no cap
	// (the request waits until its scopes' max_wait or its client gives
	// up).
	DefaultMaxWait time.Duration
	// StreamWriteTimeout is how long one write of an answer to the client
	// may block (each chunk of a stream, each piece of a body): a client
	// that stops reading loses its answer after it, and its upstream call
	// and lease are let go. Default 30s; negative: no bound.
	StreamWriteTimeout time.Duration
	// AdminToken guards /admin (and /metrics with MetricsAuth): when set,
	// only a request bearing it gets in, from anywhere. Default "".
	AdminToken string
	// AdminLoopback, when AdminToken is empty, lets loopback clients use
	// the admin API without a token; otherwise it is closed (403). Behind
	// a reverse proxy on the same host every client is a loopback client,
	// so this is for a gateway that only loopback clients can reach.
	// Default false.
	AdminLoopback bool
	// PublicHost is the host clients reach the gateway by, from
	// server.public_url (with or without a port); "" for none. While
	// AdminLoopback alone lets a client in, the request's Host must be a
	// loopback name or this one (adminauth.TrustedHost). Default "".
	PublicHost string
	// MetricsAuth puts /metrics behind the admin API's guard. Default
	// false: /metrics is open to whoever can reach it.
	MetricsAuth bool
	// ReadHeaderTimeout bounds the reading of a request's headers
	// (HTTPServer). Default 30s.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request's body, from the
	// handler's first read of it to its end; a body slower than that is
	// cut off with 408. It does not bound the answer: a long stream runs
	// as long as it runs. Default 60s.
	BodyTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request before it is closed (HTTPServer). Default 120s.
	IdleTimeout time.Duration
	// NoAccessLog turns off the access log: one line per request, at
	// info (a probe's or a scrape's at debug), written once it is
	// answered (logAccess). Default false: the line is logged.
	NoAccessLog bool
}

// The defaults of Config's bounds on a request's wait and on a write
// to its client.
const (
	DefaultMaxWait            = 30 * time.Second
	DefaultStreamWriteTimeout = 30 * time.Second
	// DefaultMaxUploadBytes holds a 25 MB file, OpenAI's bound on audio
	// uploads, and its form's fields.
	DefaultMaxUploadBytes = 26 << 20
)

func (c *Config) defaults() {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 10 << 20
	}
	if c.MaxUploadBytes <= 0 {
		c.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if c.DefaultMaxWait == 0 {
		c.DefaultMaxWait = DefaultMaxWait
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.StreamWriteTimeout, DefaultStreamWriteTimeout},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			*d.v = 0 // no bound
		}
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 30 * time.Second
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = 60 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
}

// Metrics receives the API's measurements. metrics.Metrics implements it.
type Metrics interface {
	ObserveHTTP(endpoint string, status int, d time.Duration)
}

type noMetrics struct{}

func (noMetrics) ObserveHTTP(string, int, time.Duration) {}

// Deps are the services the API is built on.
type Deps struct {
	// Gateway is one request's way: keys, what a key may ask, the
	// candidates, admission and the upstream call (gateway.Service).
	Gateway Gateway
	// Queues are the scopes /admin/queues shows (gateway.Service).
	Queues Queues
	// Responses binds the responses that platforms speaking the
	// Responses API keep to them, and passes the calls that follow a
	// response there (gateway.Service); nil: none is bound, and those
	// calls are not found.
	Responses Responses
	Logger    *slog.Logger
	// Metrics defaults to none; MetricsHandler serves /metrics if set.
	Metrics        Metrics
	MetricsHandler http.Handler
	// Usage receives one record per model request; it must not block.
	Usage func(weir.Usage)
	// Clock measures waits and latencies; default clock.Real.
	Clock clock.Clock
	// Ready reports whether the gateway should take traffic (/readyz).
	Ready func() error
	// ReadyNotes are lines /readyz adds to its body when ready, for what
	// does not stop traffic but an operator should see (a fleet
	// replica's catalog drift); nil for none.
	ReadyNotes func() []string
	// Tasks is the task front of the video and task APIs (gateway.Tasks);
	// nil disables them.
	Tasks Tasks
	// Fleet reports the fleet this replica is in, for /admin/queues; nil
	// outside a fleet.
	Fleet func(ctx context.Context) *FleetView
	// Nodes lists the edge nodes for /admin/nodes (edge.Hub.Nodes); nil:
	// the gateway has no edge listener, and /admin/nodes answers an empty
	// list.
	Nodes func(ctx context.Context) []weir.NodeView
	// ForgetNode forgets a gone edge node, by id or name, at once, for
	// POST /admin/nodes/{node}/forget (edge.Hub.Forget, or in a fleet
	// edge.Relay.Forget): an error matching weir.ErrNotFound for a node
	// it does not know, weir.ErrConflict for a connected one. nil: the
	// gateway has no edge listener, and the route answers not_found.
	ForgetNode func(ctx context.Context, node string) (weir.ForgottenNode, error)
	// Relay takes the runs the fleet's other replicas relay to this
	// replica's nodes (edge.Relay.Handler) at RelayPath (edge.RelayPath);
	// nil: none (outside a fleet, or without an edge listener).
	Relay     http.Handler
	RelayPath string
	// RelayForget forgets, for the other replicas, the gone nodes whose
	// sessions this replica held (edge.Relay.ForgetHandler), at
	// RelayForgetPath (edge.ForgetPath); nil: none.
	RelayForget     http.Handler
	RelayForgetPath string
	// PublishCatalog publishes a catalog for POST /admin/catalog (a
	// fleet's replica on PostgreSQL); nil: the route refuses, as `weir
	// apply` does on SQLite.
	PublishCatalog CatalogPublisher
	// Budgets keeps the budgets of /admin/budgets (the store); nil:
	// those routes are not served.
	Budgets Budgets
	// Console serves the web console at GET / and under /console/; nil:
	// none (GET / is a 404).
	Console http.Handler
	// Spend reports spend for /admin/spend (the store); nil: it answers
	// 404.
	Spend Spend
	// Tracing, if set, starts a server span for each request, below the
	// trace context its client sent, and the gateway's spans below it
	// (the tracing package); nil: tracing is off, and costs nothing.
	Tracing trace.TracerProvider
}

// Server is the HTTP API. Apply a catalog before serving.
type Server struct {
	cfg  Config
	deps Deps

	// adminToken is cfg.AdminToken.
	adminToken adminauth.Token

	ids idSource

	// tracer is Deps.Tracing's, nil if tracing is off.
	tracer trace.Tracer
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
	s := &Server{cfg: cfg, deps: deps, adminToken: adminauth.NewToken(cfg.AdminToken)}
	s.ids = newIDSource()
	s.tracer = tracing.Tracer(deps.Tracing)
	return s
}

// Handler returns the HTTP handler for everything the gateway serves.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", s.model(epChat))
	mux.Handle("POST /v1/embeddings", s.model(epEmbeddings))
	mux.Handle("POST /v1/images/generations", s.model(epImages))
	mux.Handle("POST /v1/audio/speech", s.model(epSpeech))
	mux.Handle("POST /v1/images/edits", s.upload(epImageEdits))
	mux.Handle("POST /v1/images/variations", s.upload(epImageVariations))
	mux.Handle("POST /v1/audio/transcriptions", s.upload(epTranscriptions))
	mux.Handle("POST /v1/audio/translations", s.upload(epTranslations))
	mux.HandleFunc("POST /v1/responses", s.createResponse)
	mux.HandleFunc("POST /v1/messages", s.createMessage)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.countTokens)
	mux.HandleFunc("GET /v1/responses/{id}", s.handle(s.responseCall))
	mux.HandleFunc("DELETE /v1/responses/{id}", s.handle(s.responseCall))
	mux.HandleFunc("POST /v1/responses/{id}/cancel", s.handle(s.responseCall))
	mux.HandleFunc("GET /v1/responses/{id}/input_items", s.handle(s.responseCall))
	mux.HandleFunc("GET /v1/models", s.handle(s.listModels))
	mux.HandleFunc("GET /v1/models/{model...}", s.handle(s.getModel))
	mux.HandleFunc("POST /v1/videos", s.handle(s.createVideo))
	mux.HandleFunc("GET /v1/videos", s.handle(s.listVideos))
	mux.HandleFunc("GET /v1/videos/{id}", s.handle(s.getVideo))
	mux.HandleFunc("GET /v1/videos/{id}/content", s.handle(s.videoContent))
	mux.HandleFunc("DELETE /v1/videos/{id}", s.handle(s.deleteVideo))
	mux.HandleFunc("POST /v1/tasks", s.handle(s.createTask))
	mux.HandleFunc("GET /v1/tasks", s.handle(s.listTasks))
	mux.HandleFunc("GET /v1/tasks/{id}", s.handle(s.getTask))
	mux.HandleFunc("POST /v1/tasks/{id}/cancel", s.handle(s.cancelTask))
	mux.HandleFunc("DELETE /v1/tasks/{id}", s.handle(s.deleteTask))
	mux.HandleFunc("GET /admin/queues", s.admin(s.queues))
	mux.HandleFunc("GET /admin/nodes", s.admin(s.nodes))
	mux.HandleFunc("POST /admin/nodes/{node}/forget", s.admin(s.handle(s.forgetNode)))
	mux.HandleFunc("GET /admin/spend", s.admin(s.spend))
	mux.HandleFunc("POST /admin/catalog", s.admin(s.handle(s.publishCatalog)))
	if s.deps.Budgets != nil {
		mux.HandleFunc("GET /admin/budgets", s.admin(s.handle(s.listBudgets)))
		mux.HandleFunc("POST /admin/budgets", s.admin(s.handle(s.createBudget)))
		mux.HandleFunc("GET /admin/budgets/{id}", s.admin(s.handle(s.getBudget)))
		mux.HandleFunc("PATCH /admin/budgets/{id}", s.admin(s.handle(s.updateBudget)))
		mux.HandleFunc("DELETE /admin/budgets/{id}", s.admin(s.handle(s.deleteBudget)))
	}
	if s.deps.Relay != nil {
		mux.Handle("POST "+s.deps.RelayPath, s.deps.Relay)
	}
	if s.deps.RelayForget != nil {
		mux.Handle("POST "+s.deps.RelayForgetPath, s.deps.RelayForget)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.readyz)
	if h := s.deps.MetricsHandler; h != nil {
		if s.cfg.MetricsAuth {
			h = s.admin(h.ServeHTTP)
		}
		mux.Handle("GET /metrics", h)
	}
	if h := s.deps.Console; h != nil {
		mux.Handle("GET /{$}", h)
		mux.Handle("/console/", h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeErr(w, r, errorf(weir.CodeNotFound, "", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)))
	})
	return s.middleware(mux)
}

// HTTPServer returns an http.Server for Handler with the configured
// timeouts: ReadHeaderTimeout, IdleTimeout (an idle keep-alive connection
// is closed) and, per request in the handler, BodyTimeout. It sets no
// ReadTimeout or WriteTimeout, which would bound the whole exchange and
// so cut off long streamed answers.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
	}
}

// reqInfo travels with a request through the handlers.
type reqInfo struct {
	id, clientID string
	base, logger *slog.Logger
	// body is the request's body, nil if it has none.
	body *requestBody
	// access is what the handlers tell the access log line.
	access access
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

// infoOf is the reqInfo of the request that w answers: the middleware's
// writer carries it (rather than the request's context, which would
// cost a copy of the request that a waiting request holds).
func infoOf(w http.ResponseWriter) *reqInfo {
	if sw, ok := w.(*statusWriter); ok && sw.ri != nil {
		return sw.ri
	}
	return &reqInfo{id: "-", base: slog.New(slog.DiscardHandler)}
}

// streams reports whether ri's request is a call served as a stream,
// whose access log line times its first byte.
func (ri *reqInfo) streams() bool {
	return ri != nil && ri.access.call != nil && ri.access.call.Stream
}

// middleware gives every request an id (echoed in X-Request-Id and on
// every log line), recovers panics into a 500 in the API's error shape, and
// logs the request's access log line.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What a request carries through the handlers, made at once: it
		// lives as long as the request, in one allocation.
		all := &struct {
			ri   reqInfo
			rw   statusWriter
			body requestBody
		}{}
		ri, rw := &all.ri, &all.rw
		*ri = reqInfo{id: s.ids.next(), base: s.deps.Logger}
		if cid := header.Get(r.Header, "X-Request-Id"); cid != "" && len(cid) <= 128 {
			ri.clientID = cid
		}
		// The request's context changes only for a traced request: its
		// info travels on the writer (infoOf), so that an untraced one
		// costs no copy of the request.
		ctx, span := s.startSpan(r.Context(), r)
		if span != nil {
			r = r.WithContext(ctx)
		}
		*rw = statusWriter{ResponseWriter: w, ri: ri, id: ri.id}
		if !s.cfg.NoAccessLog {
			rw.clock = s.deps.Clock
		}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			all.body = requestBody{ReadCloser: r.Body, w: w, timeout: s.cfg.BodyTimeout}
			ri.body = &all.body
			r.Body = ri.body
			// Connection: close means nothing in HTTP/2, where Go's server
			// takes it as a request to shut the whole connection down.
			rw.body = ri.body
			rw.closeUnread = r.ProtoMajor == 1
		}
		start := s.deps.Clock.Now()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				ri.log().Error("panic serving request", "panic", fmt.Sprint(p), "path", r.URL.Path)
				if !rw.wrote {
					ri.access.code = weir.CodeInternal
					writeError(rw, errorf(weir.CodeInternal, "", "internal error"))
				}
			}
			if !rw.wrote {
				// net/http writes the headers of a handler that wrote
				// nothing once it returns.
				rw.setID()
			}
			if span != nil {
				endSpan(span, r, ri.id, rw.status(), ri.access.call)
			}
			if !s.cfg.NoAccessLog {
				s.logAccess(r, ri, rw, start)
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// statusWriter remembers the status written, for logs and metrics, and
// keeps http.ResponseController working through Unwrap. An answer to a
// request whose body was not read to its end (refused before it was read,
// or cut off) closes the connection: the server then neither waits for
// the rest of the body nor parses it as the next request.
// It adds the X-Request-Id header as the answer starts, not before: a
// request that waits in the queue holds no header map until it has
// something to say.
type statusWriter struct {
	http.ResponseWriter
	// ri is the request's (infoOf).
	ri    *reqInfo
	id    string
	idv   [1]string // backs the X-Request-Id header's value
	code  int
	wrote bool
	// clock, if set, times the answer's start (at), for the access log's
	// ttfb_ms, which a stream's line has alone.
	clock clock.Clock
	at    time.Time
	// body is the request's body, nil if it has none.
	body        *requestBody
	closeUnread bool
}

func (w *statusWriter) setID() {
	w.idv[0] = w.id
	w.Header()["X-Request-Id"] = w.idv[:]
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
		if w.clock != nil && w.ri.streams() {
			w.at = w.clock.Now()
		}
		if w.closeUnread && w.body.unread() {
			w.Header().Set("Connection", "close")
		}
		w.setID()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
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
	var b [48]byte
	return string(strconv.AppendUint(append(b[:0], s.prefix...), s.n.Add(1), 10))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.deps.Gateway.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if s.deps.Ready != nil {
		if err := s.deps.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	body := "ready\n"
	if s.deps.ReadyNotes != nil {
		for _, n := range s.deps.ReadyNotes() {
			body += n + "\n"
		}
	}
	_, _ = w.Write([]byte(body))
}

// admin guards the admin API: the admin token if one is configured, else
// loopback clients if AdminLoopback trusts them, else nobody. A client
// trusted for being on loopback must also name a loopback host (or the
// public one): a page of another site that has its name resolve to
// 127.0.0.1 (DNS rebinding) names its own, and is refused before
// anything is read.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.cfg.AdminToken != "":
			if !s.adminToken.Is(adminauth.Bearer(r)) {
				s.writeErr(w, r, errorf(weir.CodeUnauthorized, "", "admin token required"))
				return
			}
		case !s.cfg.AdminLoopback:
			s.writeErr(w, r, errorf(weir.CodeForbidden, "", "the admin API is off: set server.admin_token (then send it as a bearer token), "+
				"or server.admin_loopback: true to let loopback clients in without one"))
			return
		case !adminauth.IsLoopback(r.RemoteAddr):
			s.writeErr(w, r, errorf(weir.CodeForbidden, "", "the admin API answers loopback clients only unless an admin token is set"))
			return
		case !adminauth.TrustedHost(r.Host, s.cfg.PublicHost):
			s.writeErr(w, r, errorf(weir.CodeForbidden, "", adminauth.HostRefusal(r.Host)))
			return
		}
		h(w, r)
	}
}
