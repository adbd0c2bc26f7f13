package serve

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/fleet"
	"github.com/weir-gateway/weir/metrics"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/sqlite"
	"github.com/weir-gateway/weir/task"
)

// store is what the commands use of storage: keys, usage, budgets,
// tasks, nodes, overrides and response bindings.
type store interface {
	weir.Store
	weir.TaskStore
	weir.NodeStore
	weir.OverrideStore
	weir.ResponseStore
	weir.SpendStore
}

// Storage is the database the config names, open: the one place that
// knows the drivers apart. It is every store the commands use
// (weir.Store, weir.TaskStore, weir.NodeStore, weir.OverrideStore,
// weir.ResponseStore).
type Storage struct {
	store
	// Driver is the config's storage.driver; Where says where the
	// database is, for logs: the SQLite file, or the PostgreSQL DSN
	// without its password.
	Driver, Where string
	// SoleRunner says this process alone runs the store's jobs
	// (task.Config.SoleRunner): true on the embedded SQLite file, which
	// serve locks; false on PostgreSQL, where other replicas may run
	// them.
	SoleRunner bool
	// Fleet is what a fleet's replicas share in the store: PostgreSQL's;
	// nil on SQLite, where one process serves alone.
	Fleet FleetStore
	// newTasks builds the task service on the store, in the store's own
	// transaction type.
	newTasks func(task.Config, taskDeps) (*task.Service, error)
	unlock   func()
}

// FleetStore is what the replicas of a fleet coordinate on: the
// election and liveness, the board of edge nodes, the catalog's
// versions, and a ping for /readyz.
type FleetStore interface {
	fleet.Coordination
	fleet.NodeBoard
	weir.CatalogStore
	Ping(ctx context.Context) error
}

// taskDeps are task.Deps less the store, which storage gives.
type taskDeps struct {
	Engine     admission.Engine
	Planner    task.Planner
	Webhooks   task.Webhooks
	Leadership admission.Leadership
	Logger     *slog.Logger
	Ended      func(weir.Task)
	Tracing    trace.TracerProvider
}

// StorageOptions say what a command opens storage for.
type StorageOptions struct {
	// Serve: the process runs the gateway. On SQLite it first takes the
	// database's lock, which keeps a second serve off the file; other
	// commands (keys) work beside a running serve without it.
	Serve bool
	// Logger says that serve waits for the lock; default none.
	Logger *slog.Logger
}

// OpenStorage opens the database cfg names and brings its schema up to
// date.
func OpenStorage(ctx context.Context, cfg config.Storage, o StorageOptions) (*Storage, error) {
	switch cfg.Driver {
	case "sqlite":
		unlock := func() {}
		if o.Serve {
			var err error
			if unlock, err = lockStorage(ctx, lockOptions{Path: cfg.Path, Logger: o.Logger}); err != nil {
				return nil, err
			}
		}
		db, err := sqlite.Open(ctx, cfg.Path)
		if err != nil {
			unlock()
			return nil, fmt.Errorf("open storage: %w", err)
		}
		return &Storage{store: db, Driver: cfg.Driver, Where: cfg.Path, SoleRunner: true,
			newTasks: tasksOn(db), unlock: unlock}, nil
	case "postgres":
		// No lock: replicas share the database by design.
		db, err := postgres.OpenConfig(ctx, postgres.Config{DSN: cfg.DSN, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("open storage: %w", err)
		}
		return &Storage{store: db, Driver: cfg.Driver, Where: postgres.Describe(cfg.DSN), SoleRunner: false,
			Fleet: db, newTasks: tasksOn(db), unlock: func() {}}, nil
	}
	// config.Validate refuses any other driver; this is for a Config
	// built in code.
	return nil, fmt.Errorf("open storage: unknown driver %q: want sqlite or postgres", cfg.Driver)
}

// pool returns how to read the store's connection pool for the metrics;
// nil on SQLite, whose connections are not pooled so.
func (s *Storage) pool() func() metrics.PoolState {
	db, ok := s.store.(*postgres.DB)
	if !ok {
		return nil
	}
	return func() metrics.PoolState {
		st := db.Pool().Stat()
		return metrics.PoolState{MaxConns: int(st.MaxConns()), Acquired: int(st.AcquiredConns()), Idle: int(st.IdleConns()),
			Acquires: uint64(st.AcquireCount()), EmptyAcquires: uint64(st.EmptyAcquireCount()),
			CanceledAcquires: uint64(st.CanceledAcquireCount()), AcquireWait: st.AcquireDuration()}
	}
}

// tasksOn returns how to build the task service on st.
func tasksOn[TTx any](st task.Store[TTx]) func(task.Config, taskDeps) (*task.Service, error) {
	return func(cfg task.Config, d taskDeps) (*task.Service, error) {
		return task.New(cfg, task.Deps[TTx]{Store: st, Engine: d.Engine, Planner: d.Planner, Webhooks: d.Webhooks,
			Leadership: d.Leadership, Logger: d.Logger, Ended: d.Ended, Tracing: d.Tracing})
	}
}

// Close closes the store, then lets another serve have it.
func (s *Storage) Close() error {
	err := s.store.Close()
	s.unlock()
	return err
}
