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
	"github.com/weir-gateway/weir/metrics"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/router"
	"github.com/weir-gateway/weir/task"
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
	ln       net.Listener
	edgeLn   net.Listener

	closeEngine func()
	stopFleet   func()
	stopEdge    func()
	stopBoard   func()
	stopProbes  func()
	// failed carries an error that must end the process (the fleet
	// fenced this replica).
	failed   chan error
	stopOnce sync.Once
	stopErr  error
}

// Start opens storage, builds the engine and API, applies the catalog and
// starts listening.
func (m *Main) Start(ctx context.Context) error {
	cfg := m.Config
	if m.Logger == nil {
		m.Logger = NewLogger(cfg.Server.LogLevel)
	}
	db, err := OpenStorage(ctx, cfg.Storage, StorageOptions{Serve: true, Logger: m.Logger})
	if err != nil {
		return err
	}
	m.DB = db
	m.failed = make(chan error, 1)
	var eng admission.Engine
	m.Metrics = metrics.New(func(ctx context.Context) []admission.ScopeStats { return eng.Scopes(ctx) })
	m.Recorder = console.NewRecorder()
	// The engine's events feed the metrics, the console's recorder, and
	// the shadow limits' log (a summed line per scope a minute at most).
	shadowLog := gateway.NewShadowLog(gateway.ShadowLogConfig{Logger: m.Logger})
	opts := admission.Options{Observer: admission.ObserverFunc(func(e admission.Event) {
		m.Metrics.Observe(e)
		m.Recorder.Observe(e)
		shadowLog.Observe(e)
	})}
	tuneTasks := func(*task.Config) {}
	if pg, ok := db.store.(*postgres.DB); ok {
		member, err := m.joinFleet(ctx, pg, opts)
		if err != nil {
			return err
		}
		m.Member, eng, m.closeEngine = member, member.Engine(), member.Engine().Close
		if m.Board, err = fleet.NewBoard(pg, fleet.BoardConfig{Replica: member.Replica(), Logger: m.Logger}); err != nil {
			return err
		}
		m.Metrics.WatchFleet(m.fleetState)
		tuneTasks = fleetTasks(member)
	} else {
		mem := admission.NewMemory(opts)
		eng, m.closeEngine = mem, mem.Close
	}
	m.Engine = eng
	m.Usage = usage.New(usage.Config{Interval: cfg.Server.UsageFlushInterval}, usage.Deps{Store: db, Logger: m.Logger, Dropped: m.Metrics.UsageDropped})
	if err := m.Usage.Start(ctx); err != nil {
		return fmt.Errorf("start usage: %w", err)
	}
	hooks, err := webhooks(cfg.Tasks)
	if err != nil {
		return err
	}
	// The config's 0 is "no bound"; the services' is "the default".
	unbounded := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	if m.Hub, err = m.newHub(); err != nil {
		return err
	}
	var nodes gateway.Nodes
	if m.Hub != nil {
		nodes = m.Hub
	}
	if m.Member != nil {
		m.Relay = edge.NewRelay(edge.RelayConfig{Secret: m.Member.Secret(), MaxBodyBytes: cfg.Server.MaxBodyBytes},
			edge.RelayDeps{Hub: m.Hub, Directory: m.Board, Metrics: m.Metrics, Logger: m.Logger})
		nodes = m.Relay
	}
	m.Gateway = gateway.New(gateway.Config{
		UpstreamTimeout:     unbounded(cfg.Server.UpstreamTimeout),
		UpstreamIdleTimeout: unbounded(cfg.Server.UpstreamIdleTimeout),
		UpstreamCallTimeout: unbounded(cfg.Server.UpstreamCallTimeout),
		RetryBudget:         cfg.Server.RetryBudget,
		MaxResponseBytes:    cfg.Server.MaxResponseBytes,
		KeyCacheTTL:         cfg.Server.KeyCacheTTL,
	}, gateway.Deps{
		Engine:    eng,
		Keys:      db,
		Router:    router.New(router.Options{Failures: cfg.Server.Cooldown.Failures, Cooldown: cfg.Server.Cooldown.Duration}),
		Nodes:     nodes,
		Logger:    m.Logger,
		Metrics:   consoleMetrics{Metrics: m.Metrics, rec: m.Recorder},
		Overrides: db,
	})
	if err := m.apply(ctx, cfg); err != nil {
		return err
	}
	// Drains, run-time limits and pauses set through other replicas.
	if err := m.Gateway.Start(ctx); err != nil {
		return fmt.Errorf("start gateway: %w", err)
	}
	// The gateway plans tasks; the API serves both.
	taskCfg := task.Config{
		Workers:     cfg.Tasks.Workers,
		MaxWait:     cfg.Tasks.MaxWait,
		PollMin:     cfg.Tasks.PollMin,
		PollMax:     cfg.Tasks.PollMax,
		MaxAttempts: cfg.Tasks.MaxAttempts,
		LeaseTTL:    cfg.Tasks.LeaseTTL,
		RescueAfter: cfg.Tasks.RescueAfter,
		Retention:   cfg.Tasks.Retention,
		SoleRunner:  db.SoleRunner,
		Metrics:     m.Metrics,
		RiverLogger: riverLogger(m.Logger, cfg.Server.LogLevel),
	}
	tuneTasks(&taskCfg)
	m.Tasks, err = db.newTasks(taskCfg, taskDeps{Engine: eng, Planner: m.Gateway, Webhooks: hooks, Logger: m.Logger})
	if err != nil {
		return err
	}
	// The transports reach tasks through the gateway's task front.
	taskFront := gateway.NewTasks(m.Gateway, m.Tasks)
	var nodeViews func(context.Context) []weir.NodeView
	if m.Hub != nil {
		nodeViews = m.Hub.Nodes
	}
	if m.Board != nil {
		nodeViews = m.fleetNodes
	}
	var relay http.Handler
	if m.Relay != nil && m.Hub != nil {
		relay = m.Relay.Handler()
	}
	var fleetView func(context.Context) *httpapi.FleetView
	if m.Member != nil {
		fleetView = m.fleetView
	}
	var fleetAny func(context.Context) any
	if m.Member != nil {
		fleetAny = func(ctx context.Context) any { return m.fleetView(ctx) }
	}
	m.Console = console.New(console.Config{
		AdminToken:   cfg.Server.AdminToken,
		Loopback:     cfg.Server.AdminLoopbackTrusted(),
		DefaultGroup: cfg.DefaultGroup,
		PublicURL:    cfg.Server.PublicURL,
	}, console.Deps{Gateway: m.Gateway, Operator: m.Gateway, Tasks: taskFront, Keys: db, Nodes: nodeViews, Fleet: fleetAny, Recorder: m.Recorder,
		Metrics: m.Metrics, Logger: m.Logger})
	m.API = httpapi.New(httpapi.Config{
		MaxBodyBytes:       cfg.Server.MaxBodyBytes,
		DefaultMaxWait:     unbounded(cfg.Server.DefaultMaxWait),
		StreamWriteTimeout: unbounded(cfg.Server.StreamWriteTimeout),
		AdminToken:         cfg.Server.AdminToken,
		AdminLoopback:      cfg.Server.AdminLoopbackTrusted(),
		PublicHost:         publicHost(cfg.Server.PublicURL),
		MetricsAuth:        cfg.Server.MetricsAuth,
		ReadHeaderTimeout:  cfg.Server.ReadHeaderTimeout,
		BodyTimeout:        cfg.Server.BodyTimeout,
		IdleTimeout:        cfg.Server.IdleTimeout,
	}, httpapi.Deps{
		Gateway:        m.Gateway,
		Queues:         m.Gateway,
		Logger:         m.Logger,
		Metrics:        m.Metrics,
		MetricsHandler: m.Metrics.Handler(),
		Usage: func(u weir.Usage) {
			m.Usage.Record(u)
			m.Recorder.Usage(u)
		},
		Ready:     m.ready,
		Tasks:     taskFront,
		Fleet:     fleetView,
		Nodes:     nodeViews,
		Relay:     relay,
		RelayPath: edge.RelayPath,
		Console:   m.Console.Handler(),
	})
	if err := m.Tasks.Start(ctx); err != nil {
		return fmt.Errorf("start tasks: %w", err)
	}
	if m.Member != nil {
		m.runFleet()
	}
	if err := m.Console.Start(ctx); err != nil {
		return fmt.Errorf("start console: %w", err)
	}
	if err := m.startEdge(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return listenError(cfg.Server.Listen, err)
	}
	m.ln = ln
	m.HTTP = m.API.HTTPServer()
	m.HTTP.ErrorLog = slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn)
	go func() {
		if err := m.HTTP.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("http server stopped", "error", err)
		}
	}()
	if m.Board != nil {
		m.startBoard()
	}
	if m.edgeLn != nil {
		m.Logger.Info("edge nodes dial in", "edge_addr", m.edgeLn.Addr().String(), "tls", cfg.Edge.TLSCert != "")
	}
	if m.Member != nil {
		m.Logger.Info("weir serving", "addr", ln.Addr().String(), "driver", db.Driver, "storage", db.Where,
			"replica", m.Member.Replica(), "fleet_addr", m.Member.Addr())
	} else {
		m.Logger.Info("weir serving", "addr", ln.Addr().String(), "driver", db.Driver, "storage", db.Where)
	}
	return nil
}

// ready is /readyz's answer beyond the store: on a fleet, this replica
// must have synced with a leader.
func (m *Main) ready() error {
	if m.Member == nil {
		return nil
	}
	return m.fleetReady()
}

// fail ends Run with err: something the process cannot serve past.
func (m *Main) fail(err error) {
	select {
	case m.failed <- err:
	default:
	}
}

func (m *Main) apply(ctx context.Context, cfg *config.Config) error {
	cat, err := cfg.Catalog()
	if err != nil {
		return err
	}
	if len(cat.Models) == 0 {
		m.Logger.Warn("the catalog has no models: every model request will get 404 until platforms, platform_models and models are configured (examples/weir.yaml shows them)",
			"config", m.ConfigPath)
	}
	return m.Gateway.Apply(ctx, cat, cfg.DefaultGroup)
}

// Addr is where the gateway listens.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Reload reads the config file again and applies its catalog. Server and
// storage settings need a restart; a reload changes the catalog only.
func (m *Main) Reload(ctx context.Context) error {
	cfg, err := LoadConfig(m.ConfigPath)
	if err != nil {
		return err
	}
	if err := m.apply(ctx, cfg); err != nil {
		return err
	}
	// Queued tasks follow the new catalog as new ones do; in a fleet the
	// leader's do, so the replicas are reloaded with one config.
	moved := 0
	if m.Tasks != nil {
		moved = m.Tasks.Replan(ctx)
	}
	m.Logger.Info("catalog reloaded", "config", m.ConfigPath, "queued_tasks_moved", moved)
	return nil
}

// Stop drains in-flight requests (up to the shutdown timeout), then flushes
// usage and closes the engine and storage. Stopping again returns the
// first Stop's result.
func (m *Main) Stop(ctx context.Context) error {
	m.stopOnce.Do(func() { m.stopErr = m.stop(ctx) })
	return m.stopErr
}

func (m *Main) stop(ctx context.Context) error {
	var errs []error
	if m.stopBoard != nil {
		// The other replicas stop relaying runs here first.
		m.stopBoard()
	}
	if m.HTTP != nil {
		sctx, cancel := context.WithTimeout(ctx, m.Config.Server.ShutdownTimeout)
		errs = append(errs, m.HTTP.Shutdown(sctx))
		cancel()
	}
	if m.stopProbes != nil {
		m.stopProbes()
	}
	if m.Console != nil {
		m.Console.Stop()
	}
	if m.Gateway != nil {
		m.Gateway.Stop()
	}
	if m.Tasks != nil {
		errs = append(errs, m.Tasks.Stop(ctx))
	}
	if m.stopEdge != nil {
		m.stopEdge()
	}
	if m.stopFleet != nil {
		// Leaves the fleet: resigns a term it leads, and the others stop
		// counting it as alive at once.
		m.stopFleet()
	}
	if m.closeEngine != nil {
		m.closeEngine()
	}
	if m.Usage != nil {
		errs = append(errs, m.Usage.Stop(ctx))
	}
	if m.DB != nil {
		errs = append(errs, m.DB.Close())
	}
	return errors.Join(errs...)
}

// Run starts, serves until SIGINT/SIGTERM (reloading on SIGHUP) and stops.
func (m *Main) Run(ctx context.Context) error {
	if err := m.Start(ctx); err != nil {
		_ = m.Stop(ctx)
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	for {
		select {
		case <-ctx.Done():
			return m.Stop(context.Background())
		case err := <-m.failed:
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
func webhooks(cfg config.Tasks) (task.Webhooks, error) {
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
	return hooks, nil
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
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
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
