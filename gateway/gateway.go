package gateway

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/router"
)

// Config tunes the service.
type Config struct {
	// UpstreamTimeout bounds the wait for an upstream's response headers
	// when its platform sets none. Default 120s; negative: no bound.
	UpstreamTimeout time.Duration
	// UpstreamIdleTimeout bounds each wait for more of an upstream's
	// answer once its headers are in (the gap between a stream's chunks)
	// when its platform sets none. Default 120s; negative: no bound.
	UpstreamIdleTimeout time.Duration
	// UpstreamCallTimeout bounds one upstream call whole, body included,
	// when its platform sets none. Default 10m; negative: no bound.
	UpstreamCallTimeout time.Duration
	// RetryBudget is the most upstream attempts one request makes across
	// its candidates. Default 3.
	RetryBudget int
	// MaxResponseBytes bounds an upstream answer the gateway reads whole
	// (JSON; streams and other bodies pass through as they arrive): past
	// it the client gets upstream_error. Default 64 MiB.
	MaxResponseBytes int64
	// KeyCacheTTL is how long a looked-up key is trusted before the store
	// is asked again (a revocation takes effect within it). Default 2s.
	KeyCacheTTL time.Duration
	// OverridePoll is how often a started service reads the overrides
	// (drains, run-time limits, upstream pauses) other replicas may have
	// set (operator.go). Default 2s.
	OverridePoll time.Duration
	// MaxEndUserBudgets bounds the end users whose budgets of every end
	// user ("user:*") this process keeps a scope of (endusers.go).
	// Default 10000.
	MaxEndUserBudgets int
	// CaptureContent records the messages of each traced upstream call
	// on its span (gen_ai.input.messages, gen_ai.output.messages,
	// gen_ai.system_instructions), each attribute bounded
	// (tracecontent.go). Default false: no prompt or completion is
	// recorded.
	CaptureContent bool
	// RetireLater keeps configured the scopes a catalog applied leaves
	// (those of its platform models, their acceptance copies and its
	// groups) until RetireLeft retires them: a fleet's replica retires
	// them only once every replica serves a catalog without them, so
	// that a request still waiting on one at a replica that has not
	// taken the catalog yet is moved there rather than failed
	// (retire.go). Default false: Apply retires them, once it has moved
	// the requests waiting here.
	RetireLater bool
}

// The defaults of Config's upstream bounds.
const (
	DefaultUpstreamTimeout     = 120 * time.Second
	DefaultUpstreamIdleTimeout = 120 * time.Second
	DefaultUpstreamCallTimeout = 10 * time.Minute
)

func (c *Config) defaults() {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.UpstreamTimeout, DefaultUpstreamTimeout},
		{&c.UpstreamIdleTimeout, DefaultUpstreamIdleTimeout},
		{&c.UpstreamCallTimeout, DefaultUpstreamCallTimeout},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			*d.v = 0 // no bound
		}
	}
	if c.RetryBudget <= 0 {
		c.RetryBudget = 3
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = 64 << 20
	}
	if c.KeyCacheTTL <= 0 {
		c.KeyCacheTTL = 2 * time.Second
	}
	if c.MaxEndUserBudgets <= 0 {
		c.MaxEndUserBudgets = 10000
	}
	if c.OverridePoll <= 0 {
		c.OverridePoll = 2 * time.Second
	}
}

// Metrics receives the service's measurements. metrics.Metrics
// implements it.
type Metrics interface {
	ObserveUpstream(platformModel, outcome string, d time.Duration)
	ObserveQueueWait(model string, d time.Duration)
	// DroppedError counts an error the service could only log: op names
	// what failed ("release", "remove_scope", "key_lookup").
	DroppedError(op string)
	// UpstreamPaused says a platform model's admissions paused (an
	// upstream's 429 with Retry-After) or resumed.
	UpstreamPaused(platformModel string, paused bool)
	// Affinity counts a served request of a model with affinity on by
	// result: hit (served where its affinity said), miss, or new.
	Affinity(model, result string)
	// BudgetAlert counts a budget threshold crossed, by the budget's
	// mode, and whether this replica sent its event (claimed) or another
	// had.
	BudgetAlert(mode string, claimed bool)
	// TaskCandidateSkipped counts a candidate a task was planned
	// without, by reason: cooldown, paused, capability.
	TaskCandidateSkipped(reason string)
}

type noMetrics struct{}

func (noMetrics) ObserveUpstream(string, string, time.Duration) {}
func (noMetrics) ObserveQueueWait(string, time.Duration)        {}
func (noMetrics) DroppedError(string)                           {}
func (noMetrics) UpstreamPaused(string, bool)                   {}
func (noMetrics) Affinity(string, string)                       {}
func (noMetrics) BudgetAlert(string, bool)                      {}
func (noMetrics) TaskCandidateSkipped(string)                   {}

// Deps are what the service is built on.
type Deps struct {
	Engine admission.Engine
	// Keys finds keys: by the hash of a secret (authentication) and by
	// id (a task's key), through a short cache.
	Keys   KeyStore
	Router *router.Router
	// Nodes are the edge nodes' providers; nil: none.
	Nodes  Nodes
	Logger *slog.Logger
	// Metrics defaults to none.
	Metrics Metrics
	// GenAI receives the upstream calls measured in the GenAI semantic
	// conventions' terms; nil: none.
	GenAI GenAIMetrics
	// HTTPClient talks to upstreams; default a pooled client that follows
	// no redirect of a call with a body (provider.CheckRedirect).
	HTTPClient *http.Client
	// Clock measures waits and latencies; default clock.Real.
	Clock clock.Clock
	// Overrides keeps the drains, run-time limits and upstream pauses
	// for every replica (operator.go); the stores implement it. Default:
	// kept in this process only.
	Overrides weir.OverrideStore
	// Responses keeps which platform holds each response a platform
	// speaking the Responses API made (responses.go); the stores
	// implement it. nil: none is kept, and a response's later calls are
	// not found.
	Responses weir.ResponseStore
	// Budgets are the budgets the stores keep, and what they record as
	// spent (budgets.go). nil: only the catalog's budgets, whose spend
	// before this process is not known.
	Budgets BudgetSource
	// Journal records what requests reserved against budgets until
	// their usage is written (budgets.go); nil: nothing is recorded, and
	// a crash forgets what was in flight.
	Journal Journal
	// Events sends the operator events of budget alerts
	// (budget_alerts.go); nil: none is sent.
	Events OperatorEvents
	// Affinity shares the cache-affinity table with a fleet's other
	// replicas (affinity.go); nil: it is this process's alone.
	Affinity AffinityShare
	// LeaderPlansNewKinds, in a fleet, reports whether its leader plans
	// tasks of the kinds older builds cannot (newTaskKinds): false while
	// this replica's session with it is of a fleet protocol before
	// fleet.ProtocolTaskKinds, when such a task would be ended with no
	// candidate. Nil: it does (one process).
	LeaderPlansNewKinds func() bool
}

// Service is one request's way through the gateway. Apply a catalog
// before serving.
type Service struct {
	cfg   Config
	deps  Deps
	state atomic.Pointer[Snapshot]
	keys  keyCache

	applyMu   sync.Mutex
	keyScopes sync.Map // key id → struct{}: scopes already configured
	// runs are the acceptance runs alive; acceptCopies, the platform
	// models whose acceptance copy is made (name → struct{}), changed
	// under applyMu (acceptance.go).
	runs         runs
	acceptCopies sync.Map
	// leaving are the platform models and groups whose scopes wait for
	// RetireLeft (Config.RetireLater), with the catalogs the platform
	// models were last in, for Target (retire.go).
	leaving leavingScopes

	pauseMu sync.Mutex
	pauses  map[string]*pause // platform models paused, by name

	ops operatorState // drains and run-time limits (operator.go)
	// pollMu guards poll, Start's timer, and stopped; a read of the
	// overrides holds it (operator.go).
	pollMu  sync.Mutex
	poll    clock.Timer
	stopped bool

	affinity affinityTable

	// waits are the sync requests queued now, which a new catalog moves
	// (requeue.go).
	waits waitRegistry

	// newAdapters makes a platform's adapters: provider.New, but for
	// tests that count what a reload builds.
	newAdapters func(provider.Platform) (provider.Adapters, error)

	budgets  budgetState
	alerts   alertState
	endUsers endUserScopes
}

// New returns a Service.
func New(cfg Config, deps Deps) *Service {
	cfg.defaults()
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = noMetrics{}
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real
	}
	if deps.HTTPClient == nil {
		deps.HTTPClient = &http.Client{Transport: NewUpstreamTransport(), CheckRedirect: provider.CheckRedirect}
	}
	if deps.Overrides == nil {
		deps.Overrides = &memOverrides{}
	}
	if deps.Router == nil {
		deps.Router = router.New(router.Options{Clock: deps.Clock})
	}
	s := &Service{cfg: cfg, deps: deps, pauses: make(map[string]*pause), newAdapters: provider.New}
	if deps.Affinity != nil {
		deps.Affinity.OnAffinity(s.learnAffinity)
	}
	s.keys.ttl = cfg.KeyCacheTTL
	s.keys.clock = deps.Clock
	return s
}

// NewUpstreamTransport is the transport the gateway reaches upstreams
// with unless Deps.HTTPClient says otherwise: connections kept for a busy
// gateway's concurrency.
func NewUpstreamTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		// A platform that does not answer a connect is a failed attempt
		// (the next candidate is tried), not a wait as long as the
		// header timeout.
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
}
