package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/console"
	"github.com/weir-gateway/weir/edge"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/httpapi"
	"github.com/weir-gateway/weir/internal/jsonlog"
	"github.com/weir-gateway/weir/internal/lifecycle"
	"github.com/weir-gateway/weir/metrics"
	"github.com/weir-gateway/weir/router"
	"github.com/weir-gateway/weir/task"
	"github.com/weir-gateway/weir/tracing"
	"github.com/weir-gateway/weir/usage"
	"github.com/weir-gateway/weir/webhook"
)

// Main wires the gateway's services together from Config: every piece
// it assembles lives in its own package. ConfigPath is the file Reload
// reads again; Logger defaults to NewLogger at server.log_level.
type Main struct {
	ConfigPath string
	Config     *config.Config
	Logger     *slog.Logger

	DB     *Storage
	Engine admission.Engine
	// Member is this replica's membership of its fleet, on PostgreSQL;
	// nil on SQLite.
	Member  *fleet.Member
	Metrics *metrics.Metrics
	Usage   *usage.Recorder
	Gateway *gateway.Service
	API     *httpapi.Server
	Tasks   *task.Service
	HTTP    *http.Server
	// Hub serves the edge nodes; nil without an edge listener.
	Hub *edge.Hub
	// Relay, in a fleet, is the fleet's nodes for this replica's gateway
	// (its own and the other replicas'); Board is where the replicas
	// publish them. Both nil on SQLite.
	Relay *edge.Relay
	Board *fleet.Board
	// Console is the web console; Recorder feeds its charts from the
	// request path.
	Console  *console.Console
	Recorder *console.Recorder
	// catalog is this replica's part in its fleet's one catalog; nil on
	// SQLite, and for a Config built in code (no file to publish).
	catalog *fleetCatalog
	// Tracing exports the request path's spans, if the OTEL_* environment
	// asks for traces (tracing.New), or if the caller sets it before
	// Start; Stop shuts it down. nil: off.
	Tracing *tracing.Provider
	ln      net.Listener
	edgeLn  net.Listener

	// parts are the long-lived parts, in the order they start; Stop
	// stops them in reverse.
	parts    lifecycle.List
	stopOnce sync.Once
	stopErr  error
}

// Start opens storage and assembles the parts (assemble), then starts
// them in order: once it returns, the gateway serves.
func (m *Main) Start(ctx context.Context) error {
	if m.Logger == nil {
		m.Logger = NewLogger(m.Config.Server.LogLevel)
	}
	if err := m.assemble(ctx); err != nil {
		return err
	}
	if err := m.parts.Start(ctx); err != nil {
		return err
	}
	attrs := []any{"addr", m.Addr(), "driver", m.DB.Driver, "storage", m.DB.Where}
	if m.edgeLn != nil {
		m.Logger.Info("edge nodes dial in", "edge_addr", m.EdgeAddr(), "tls", m.Config.Edge.TLSCert != "")
	}
	if m.Member != nil {
		attrs = append(attrs, "replica", m.Member.Replica(), "fleet_addr", m.Member.Addr())
	}
	m.Logger.Info("weir serving", attrs...)
	return nil
}

// assemble builds every part from the config, and lists those that run
// in the order they start: the store first, then what serves on it, the
// HTTP server and the fleet's board of nodes last. It only builds; what
// it opens (the store, the listeners) the list closes.
func (m *Main) assemble(ctx context.Context) error {
	cfg := m.Config
	if err := m.newTracing(ctx); err != nil {
		return err
	}
	db, err := OpenStorage(ctx, cfg.Storage, StorageOptions{Serve: true, Logger: m.Logger})
	if err != nil {
		return err
	}
	m.DB = db
	m.parts.Add("storage", lifecycle.Closer(db.Close))
	if err := m.listen(); err != nil {
		return err
	}
	m.Metrics = metrics.New(func(ctx context.Context) []admission.ScopeStats { return m.Engine.Scopes(ctx) })
	m.Metrics.SetSpendByKey(cfg.Server.MetricsSpendByKey)
	if pool := db.pool(); pool != nil {
		m.Metrics.WatchPool(pool)
	}
	m.Recorder = console.NewRecorder()
	if err := m.newEngine(ctx); err != nil {
		return err
	}
	uc := usageConfig(cfg)
	m.Usage = usage.New(uc, usage.Deps{Store: db, Logger: m.Logger, Dropped: m.Metrics.UsageDropped})
	m.parts.Add("usage", m.Usage)
	m.parts.Add("spend recovery", m.spendRecovery(uc))
	if err := m.newNodes(); err != nil {
		return err
	}
	m.Gateway = gateway.New(m.gatewayConfig(), gateway.Deps{
		Engine: m.Engine, Keys: db, Nodes: m.nodes(), Logger: m.Logger, Overrides: db, Responses: db,
		Budgets: db, Events: operatorEvents{m}, Journal: m.Usage, Affinity: m.affinity(),
		LeaderPlansNewKinds: m.leaderPlansNewKinds(),
		Router:              router.New(router.Options{Failures: cfg.Server.Cooldown.Failures, Cooldown: cfg.Server.Cooldown.Duration}),
		Metrics:             consoleMetrics{Metrics: m.Metrics, rec: m.Recorder}, GenAI: m.Metrics,
	})
	m.watchBudgets(m.Gateway)
	if m.Member != nil {
		// While this replica leads, it resolves the other replicas'
		// waiters to the nodes that connected after they arrived.
		m.Member.Engine().OnResolve(m.Gateway.ResolveSpec)
	}
	begin, err := m.newCatalog()
	if err != nil {
		return err
	}
	// The catalog first; then drains, run-time limits and pauses set
	// through other replicas.
	m.parts.Add("gateway", lifecycle.Funcs{
		OnStart: func(ctx context.Context) error {
			if err := begin(ctx); err != nil {
				return err
			}
			return m.Gateway.Start(ctx)
		},
		OnStop: m.Gateway.Stop,
	})
	if m.catalog != nil {
		m.parts.Add("catalog", m.catalog)
	}
	if m.Member != nil {
		// Its Stop resigns a term it leads and closes its engine.
		m.parts.Add("fleet", m.Member)
	}
	if m.Hub != nil {
		m.parts.Add("edge", m.Hub.ServeOn(m.edgeLn))
	}
	if err := m.newTasks(); err != nil {
		return err
	}
	m.parts.Add("tasks", m.Tasks)
	m.newFront()
	m.parts.Add("console", m.Console)
	if m.Relay != nil {
		m.parts.Add("relay probes", m.Relay)
	}
	m.parts.Add("http", m.serveHTTP())
	if m.Board != nil {
		// Started last, stopped first: the other replicas stop relaying
		// runs here before the API drains.
		m.parts.Add("board", m.Board)
	}
	return nil
}

// newEngine makes the admission engine: the fleet's on PostgreSQL (this
// process a replica of it), one in memory on SQLite. Its events feed the
// metrics, the console's recorder, and the shadow limits' log (a summed
// line per scope a minute at most).
func (m *Main) newEngine(ctx context.Context) error {
	shadowLog := gateway.NewShadowLog(gateway.ShadowLogConfig{Logger: m.Logger})
	opts := admission.Options{Observer: admission.ObserverFunc(func(e admission.Event) {
		m.Metrics.Observe(e)
		m.Recorder.Observe(e)
		shadowLog.Observe(e)
	})}
	if m.DB.Fleet == nil {
		mem := admission.NewMemory(opts)
		m.Engine = mem
		m.parts.Add("engine", lifecycle.Closer(func() error { mem.Close(); return nil }))
		return nil
	}
	member, err := m.joinFleet(ctx, m.DB.Fleet, opts)
	if err != nil {
		return err
	}
	m.Member, m.Engine = member, member.Engine()
	// What the member holds before it starts; after, its Stop lets go.
	m.parts.Add("fleet listener", lifecycle.Closer(member.Discard))
	m.Metrics.WatchFleet(m.fleetState)
	return nil
}

// newTasks makes the task service on the store; in a fleet it follows
// what this replica leads.
func (m *Main) newTasks() error {
	hooks, err := webhooks(m.Config.Tasks, m.Config.Spend)
	if err != nil {
		return err
	}
	tc := taskConfig(m.Config)
	tc.SoleRunner, tc.Metrics = m.DB.SoleRunner, m.Metrics
	tc.RiverLogger = riverLogger(m.Logger, m.Config.Server.LogLevel)
	deps := taskDeps{Engine: m.Engine, Planner: m.Gateway, Webhooks: hooks, Logger: m.Logger, Ended: m.taskEnded}
	if m.Member != nil {
		tc.Replica, deps.Leadership = m.Member.Replica(), m.Member
		// A job the leader admitted to a platform model of a catalog
		// version this replica has not taken yet waits for it: each
		// replica takes a version on its notice, or at its poll.
		tc.TargetWait = 2 * m.Config.Fleet.Poll
	}
	if m.Tracing != nil {
		deps.Tracing = m.Tracing.TracerProvider()
	}
	m.Tasks, err = m.DB.newTasks(tc, deps)
	return err
}

// newFront makes what the clients and operators reach: the console and
// the HTTP API, which reach tasks through the gateway's task front.
func (m *Main) newFront() {
	cfg := m.Config
	tasks := gateway.NewTasks(m.Gateway, m.Tasks)
	var nodeViews func(context.Context) []weir.NodeView
	if m.Hub != nil {
		nodeViews = m.Hub.Nodes
	}
	if m.Board != nil {
		nodeViews = m.fleetNodes
	}
	var fleetView func(context.Context) *httpapi.FleetView
	var fleetAny func(context.Context) any
	if m.Member != nil {
		fleetView = m.fleetView
		fleetAny = func(ctx context.Context) any { return m.fleetView(ctx) }
	}
	m.Console = console.New(consoleConfig(cfg), console.Deps{Gateway: m.Gateway, Operator: m.Gateway, Tasks: tasks, Keys: m.DB,
		Spend: m.DB, Budgets: m.Gateway, Nodes: nodeViews, Fleet: fleetAny, Recorder: m.Recorder, Metrics: m.Metrics, Logger: m.Logger})
	deps := httpapi.Deps{Gateway: m.Gateway, Queues: m.Gateway, Responses: m.Gateway, Logger: m.Logger, Metrics: m.Metrics,
		MetricsHandler: m.Metrics.Handler(), Ready: m.ready, ReadyNotes: m.readyNotes, Tasks: tasks, Fleet: fleetView, Nodes: nodeViews,
		RelayPath: edge.RelayPath, Console: m.Console.Handler(), Spend: m.DB, Budgets: m.DB,
		Usage: m.recordUsage,
	}
	if m.catalog != nil {
		by := "admin api (" + m.Member.Replica() + ")"
		deps.PublishCatalog = func(ctx context.Context, file []byte) (weir.CatalogVersion, bool, error) {
			return m.catalog.PublishFile(ctx, file, by)
		}
	}
	switch {
	case m.Relay != nil:
		deps.ForgetNode = m.Relay.Forget
	case m.Hub != nil:
		deps.ForgetNode = m.Hub.Forget
	}
	if m.Relay != nil && m.Hub != nil {
		deps.Relay = m.Relay.Handler()
		deps.RelayForget, deps.RelayForgetPath = m.Relay.ForgetHandler(), edge.ForgetPath
	}
	if m.Tracing != nil {
		deps.Tracing = m.Tracing.TracerProvider()
	}
	m.API = httpapi.New(apiConfig(cfg), deps)
	m.HTTP = m.API.HTTPServer()
	m.HTTP.ErrorLog = slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn)
}

// listen takes the API's address, and the edge listener's if there is
// one, before anything starts: a port in use fails the start before
// anything runs, and the fleet's board offers the address it got.
func (m *Main) listen() error {
	ln, err := net.Listen("tcp", m.Config.Server.Listen)
	if err != nil {
		return listenError(m.Config.Server.Listen, err)
	}
	m.ln = ln
	m.parts.Add("listener", closeListener(ln))
	if a := m.Config.Edge.Listen; a != "" {
		if m.edgeLn, err = net.Listen("tcp", a); err != nil {
			return fmt.Errorf("edge.listen: %w", listenError(a, err))
		}
		m.parts.Add("edge listener", closeListener(m.edgeLn))
	}
	return nil
}

// closeListener closes ln at the end, if its server has not.
func closeListener(ln net.Listener) lifecycle.Service {
	return lifecycle.Closer(func() error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})
}

// serveHTTP is the HTTP server as a part: Stop drains the requests in
// flight for up to server.shutdown_timeout.
func (m *Main) serveHTTP() lifecycle.Service {
	var loop lifecycle.Loop
	return lifecycle.Funcs{
		OnStart: func(context.Context) error {
			loop.Go(func(context.Context) error {
				err := m.HTTP.Serve(m.ln)
				if err != nil && !errors.Is(err, http.ErrServerClosed) {
					m.Logger.Error("http server stopped", "error", err)
					return err
				}
				return nil
			})
			return nil
		},
		OnStop: func(ctx context.Context) error {
			sctx, cancel := context.WithTimeout(ctx, m.Config.Server.ShutdownTimeout)
			defer cancel()
			return errors.Join(m.HTTP.Shutdown(sctx), loop.Stop(ctx))
		},
	}
}

// ready is /readyz's answer beyond the store: on a fleet, this replica
// must have synced with a leader.
func (m *Main) ready() error {
	if m.Member == nil {
		return nil
	}
	return m.fleetReady()
}

// apply serves cfg's catalog; forget says the run-time limits go, as at
// an operator's apply (gateway.Service.Apply; Take keeps them).
func (m *Main) apply(ctx context.Context, cfg *config.Config, forget bool) error {
	cat, err := cfg.Catalog()
	if err != nil {
		return err
	}
	if len(cat.Models) == 0 {
		m.Logger.Warn("the catalog has no models: every model request will get 404 until platforms, platform_models and models are configured (examples/weir.yaml shows them)",
			"config", m.ConfigPath)
	}
	if forget {
		return m.Gateway.Apply(ctx, cat, cfg.DefaultGroup)
	}
	return m.Gateway.Take(ctx, cat, cfg.DefaultGroup)
}

// Addr is where the gateway listens.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Reload reads the config file again and applies its catalog; in a
// fleet it publishes it first, if it differs from the fleet's (every
// replica then takes it). Server and storage settings need a restart; a
// reload changes the catalog only.
func (m *Main) Reload(ctx context.Context) error {
	cfg, err := LoadConfig(m.ConfigPath)
	if err != nil {
		return err
	}
	if m.catalog == nil {
		if err := m.apply(ctx, cfg, true); err != nil {
			return err
		}
		// Queued tasks follow the new catalog as new ones do.
		m.Logger.Info("catalog reloaded", "config", m.ConfigPath, "queued_tasks_moved", m.replan(ctx))
		return nil
	}
	data, err := os.ReadFile(m.ConfigPath)
	if err != nil {
		return err
	}
	// Every replica takes the version (and moves its queued tasks, as
	// each take does: the leader's are the ones queued).
	v, published, err := m.catalog.Publish(ctx, data)
	if err != nil {
		return err
	}
	m.Logger.Info("catalog reloaded", "config", m.ConfigPath, "version", v.Version, "published", published)
	return nil
}

// replan moves the queued tasks to the catalog served, and says how many
// moved.
func (m *Main) replan(ctx context.Context) int {
	if m.Tasks == nil {
		return 0
	}
	return m.Tasks.Replan(ctx)
}

// newCatalog makes the fleet's catalog for this replica (fleetCatalog),
// on PostgreSQL with a config file; it returns how the start applies the
// catalog: the fleet's, or on SQLite (or a Config built in code) the
// config's own.
func (m *Main) newCatalog() (func(context.Context) error, error) {
	if m.DB.Fleet == nil || m.ConfigPath == "" {
		return func(ctx context.Context) error { return m.apply(ctx, m.Config, true) }, nil
	}
	data, err := os.ReadFile(m.ConfigPath)
	if err != nil {
		return nil, err
	}
	m.catalog = newFleetCatalog(catalogDeps{store: m.DB.Fleet, by: m.Member.Replica(), poll: m.Config.Fleet.Poll,
		logger: m.Logger, base: m.Config, left: m.Gateway,
		apply: func(ctx context.Context, cfg *config.Config, forget bool) error {
			if err := m.apply(ctx, cfg, forget); err != nil {
				return err
			}
			if moved := m.replan(ctx); moved > 0 {
				m.Logger.Info("queued tasks moved to the catalog taken", "queued_tasks_moved", moved)
			}
			return nil
		}})
	m.Metrics.WatchCatalog(func() metrics.CatalogState {
		st := m.catalog.State()
		return metrics.CatalogState{Version: st.Version, Drift: st.Drift}
	})
	return func(ctx context.Context) error { return m.catalog.Begin(ctx, data) }, nil
}

// Stop stops the parts in the reverse of their start: the board, the
// HTTP server (draining in-flight requests up to the shutdown timeout),
// …, usage (flushed), the engine, the storage. Stopping again returns
// the first Stop's result.
func (m *Main) Stop(ctx context.Context) error {
	m.stopOnce.Do(func() { m.stopErr = m.stop(ctx) })
	return m.stopErr
}

func (m *Main) stop(ctx context.Context) error { return m.parts.Stop(ctx) }

// Run starts, serves until SIGINT/SIGTERM (reloading on SIGHUP) and stops.
func (m *Main) Run(ctx context.Context) error {
	if err := m.Start(ctx); err != nil {
		_ = m.Stop(ctx)
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// A replica that the fleet fenced (it lapsed, and its leases and
	// jobs were given away) must not go on serving.
	var fleetEnded <-chan struct{}
	if m.Member != nil {
		fleetEnded = m.Member.Done()
	}
	for {
		select {
		case <-ctx.Done():
			return m.Stop(context.Background())
		case <-fleetEnded:
			err := m.Member.Err()
			if errors.Is(err, fleet.ErrFenced) {
				err = fmt.Errorf("this replica was fenced by the fleet (its heartbeats lapsed, and what it held was given to the others); it stops and may be started again: %w", err)
			}
			m.Logger.Error("stopping", "error", err)
			if errors.Is(err, fleet.ErrFenced) && m.HTTP != nil {
				// What this replica's calls held may have been given to
				// the others: cut them now (closing their connections
				// cancels them) rather than let them finish.
				_ = m.HTTP.Close()
			}
			return errors.Join(err, m.Stop(context.Background()))
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				if err := m.Reload(ctx); err != nil {
					m.Logger.Error("reload failed; keeping the running catalog", "error", err)
				}
				continue
			}
			m.Logger.Info("shutting down", "signal", sig.String())
			return m.Stop(context.Background())
		}
	}
}

// webhooks builds callback delivery from the tasks config: a sender that
// refuses internal addresses (unless allowed) and, with a secret, a signer.
func webhooks(cfg config.Tasks, spend config.Spend) (task.Webhooks, error) {
	hooks := task.Webhooks{Sender: webhook.NewSender(webhook.Config{
		AllowLoopback: cfg.WebhookAllowLoopback,
		AllowPrivate:  cfg.WebhookAllowPrivate,
	}), PerKey: cfg.WebhookPerKey}
	if cfg.WebhookSecret != "" {
		signer, err := webhook.NewSigner(cfg.WebhookSecret)
		if err != nil {
			return hooks, fmt.Errorf("tasks.webhook_secret: %w", err)
		}
		hooks.Signer = signer
	}
	if spend.AlertsURL != "" {
		signer, err := webhook.NewSigner(spend.AlertsSecret)
		if err != nil {
			return hooks, fmt.Errorf("spend.alerts_secret: %w", err)
		}
		// The operator's own receiver: wherever the operator put it.
		hooks.OperatorURL, hooks.OperatorSigner = spend.AlertsURL, signer
		hooks.OperatorSender = webhook.NewSender(webhook.Config{AllowLoopback: true, AllowPrivate: true})
	}
	if cfg.DefaultCallbackURL != "" {
		// The operator's receiver too, signed as tasks' callbacks are.
		hooks.DefaultURL = cfg.DefaultCallbackURL
		if hooks.OperatorSender == nil {
			hooks.OperatorSender = webhook.NewSender(webhook.Config{AllowLoopback: true, AllowPrivate: true})
		}
	}
	return hooks, nil
}

// operatorEvents sends the gateway's operator events through the task
// service, which is made after the gateway.
type operatorEvents struct{ m *Main }

func (o operatorEvents) SendOperatorEvent(ctx context.Context, ev task.OperatorEvent) error {
	if o.m.Tasks == nil {
		return errors.New("the task service, which sends operator events, is not running")
	}
	return o.m.Tasks.SendOperatorEvent(ctx, ev)
}

// listenError says what to do about an address that cannot be had: most
// often another process (another weir serve, a demo) has the port.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: the address is in use by another process: stop it, or give weir another address with --listen 127.0.0.1:8081 (or server.listen in the config, or WEIR_SERVER_LISTEN): %w", addr, err)
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}

// riverLogger is the logger River's client gets: its routine lines
// (client started, producer job counts) are noise beside the gateway's,
// so it logs warnings and errors only, unless the level is debug.
func riverLogger(logger *slog.Logger, level string) *slog.Logger {
	if strings.EqualFold(level, "debug") {
		return logger
	}
	return slog.New(minLevel{Handler: logger.Handler(), min: slog.LevelWarn})
}

// minLevel passes on the records of its level and above.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

// NewLogger is the process's logger: JSON lines on stderr at level
// (debug, info, warn or error; default info).
func NewLogger(level string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(jsonlog.New(os.Stderr, l))
}

// publicHost is the host (and port) of server.public_url, "" for none.
func publicHost(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// consoleMetrics is the gateway's metrics, with each admission's wait
// also counted for the console's charts.
type consoleMetrics struct {
	*metrics.Metrics
	rec *console.Recorder
}

func (c consoleMetrics) ObserveQueueWait(model string, d time.Duration) {
	c.Metrics.ObserveQueueWait(model, d)
	c.rec.ObserveQueueWait(model, d)
}
