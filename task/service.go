package task

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/internal/lifecycle"
	"github.com/weir-gateway/weir/provider"
	"github.com/weir-gateway/weir/riverjob"
	"github.com/weir-gateway/weir/tracing"
	"github.com/weir-gateway/weir/webhook"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// WorkersScope is the global worker-capacity scope every task needs.
const WorkersScope = "global:tasks"

// AcceptanceWorkersScope is the acceptance runs' share of the workers:
// a task of the acceptance run mode needs it beside WorkersScope, so the
// runs together hold at most acceptanceWorkers of the pool and
// production's tasks always find the rest.
var AcceptanceWorkersScope = weir.AcceptanceScope(WorkersScope)

// acceptanceWorkers is the acceptance runs' share of a pool of n
// workers: a quarter, so that trying a platform moves at a useful pace
// while three quarters of the pool stay production's; at least one, so
// that runs move at all, which with a pool of one is the whole pool.
func acceptanceWorkers(n int) int { return max(n/4, 1) }

// queueWebhooks is the River queue webhook deliveries run on, with
// webhookWorkers workers; tasks' jobs run on River's default queue, or
// on the queue their Planner names (Queuer).
const queueWebhooks = "webhooks"

// QueueRunV2 is the River queue of the jobs of tasks of kinds that older
// builds would run wrongly (a transcription task, which the builds before
// it hand to a video adapter): only builds that know them work this
// queue, so that while a fleet is upgraded no older replica takes their
// jobs (docs/upgrades.md). Every other task's job
// runs on River's default queue, which every build works.
const QueueRunV2 = "weir_run_v2"

// idleAfter is Config.IdleAfter's default.
const idleAfter = 5 * time.Second

// inProcessFetchPoll is Config.FetchPollInterval's default on a store
// whose River driver notifies in the process.
const inProcessFetchPoll = 5 * time.Second

const (
	webhookWorkers = 32
	webhookPerKey  = webhookWorkers / 4
	// webhookShared bounds the deliveries in flight beyond each key's
	// first (webhook.LimiterConfig.Shared), so that half the workers are
	// kept for keys with nothing in flight.
	webhookShared = webhookWorkers / 2
	webhookPoll   = 250 * time.Millisecond
)

// Target is where one candidate of a task runs.
type Target struct {
	PlatformModel string
	// Upstream is the model name sent to the platform.
	Upstream string
	Adapter  provider.AsyncAdapter
	// Simulated: Adapter is the platform model's simulator (the task's
	// run mode is simulation); its answers say nothing of the platform's
	// health and pause nothing.
	Simulated bool
	// Retired: the platform model left the catalog (in a fleet: every
	// replica's), and is kept only for the tasks started on it upstream,
	// which follow their jobs there to the end. A task not submitted yet
	// is not started there: it queues again, for its model's candidates
	// now. So is a target found by where the task was submitted
	// (SiteTargeter) rather than by its platform model as the catalog has
	// it now.
	Retired bool
	// Site identifies the platform Adapter calls: who and where (kind,
	// base URL, account or credential), never a secret. A submit records
	// it on the task (weir.Task.UpstreamSite), for its job to be followed
	// there; empty for a simulated target.
	Site string
	// Unscoped: the platform model has no scope here (it left the
	// catalog before this process knew it), so a task followed there
	// holds no lease: none can be restored, and nothing new is admitted
	// to it.
	Unscoped bool
}

// Planner knows the catalog: which candidates a task has (the gateway's
// key, group and platform-model scopes, in preference order) and where
// each runs.
type Planner interface {
	Plan(ctx context.Context, t weir.Task) ([]admission.Candidate, error)
	// Target is where a task admitted to platformModel runs, in its run
	// mode.
	Target(platformModel string, mode weir.RunMode) (Target, bool)
}

// SiteTargeter is what a Planner may also do: find where a task
// submitted upstream runs by where it was submitted. TargetAt is
// Target(platformModel, mode) while the platform model is still on site;
// once it points elsewhere or has left the catalog, it is a Retired
// target on site, if the planner still knows that platform; false if
// not.
type SiteTargeter interface {
	TargetAt(platformModel string, mode weir.RunMode, site string) (Target, bool)
}

// targetOf is where task t runs: where its upstream job was submitted
// if it was and the planner can tell (SiteTargeter), else its platform
// model's target.
func (s *Service) targetOf(t weir.Task) (Target, bool) {
	if st, ok := s.planner.(SiteTargeter); ok && t.UpstreamSite != "" {
		return st.TargetAt(t.PlatformModel, t.RunMode, t.UpstreamSite)
	}
	return s.planner.Target(t.PlatformModel, t.RunMode)
}

// HealthReporter is what a Planner may also do: hear how each call to a
// platform model went (ok: it answered; not ok: 429, 5xx, a connect error
// or a timeout), so that the order it gives candidates — its cooldowns —
// follows the upstream's health, and a platform that keeps refusing
// tasks sends them to another candidate.
type HealthReporter interface {
	UpstreamResult(platformModel string, ok bool)
}

// riverQueues are the River queues a service works. Task jobs may wait
// in process for their next poll, holding a worker each; webhooks have
// their own queue so that they never wait behind them, and one key's
// deliveries hold at most Webhooks.PerKey of its workers (see Callbacks
// in the package doc).
//
// Alone (solo), the task queues have runSlack more workers than
// Config.Workers: a task's lease goes back, and the next task's job is
// committed, before the ended task's execution has returned its River
// worker, and River fetches nothing for a queue with no worker free until
// one returns; the workers scope still bounds the tasks admitted. In a
// fleet each replica runs at most its own Workers.
func riverQueues(cfg Config, solo bool) map[string]river.QueueConfig {
	run := cfg.Workers
	if solo {
		run = min(run+runSlack(cfg.Workers), max(run, river.QueueNumWorkersMax))
	}
	return map[string]river.QueueConfig{
		river.QueueDefault: {MaxWorkers: run},
		// The workers scope bounds the tasks admitted; each queue may
		// take them all.
		QueueRunV2: {MaxWorkers: run},
		// Deliveries are not worth a fetch every 50ms while idle: an
		// event inserted where no notice wakes its queue waits at most
		// webhookPoll for its first attempt.
		queueWebhooks: {MaxWorkers: webhookWorkers, FetchPollInterval: max(webhookPoll, cfg.FetchPollInterval)},
	}
}

// runSlack is how many River workers beyond workers the task queues of
// a service alone have: an eighth, at least one.
func runSlack(workers int) int { return max(1, workers/8) }

// Queuer is a Planner that names the River queue the job of a task
// admitted to a platform model runs from: "" is River's default queue,
// QueueRunV2 one that older builds do not work.
type Queuer interface {
	JobQueue(platformModel string) string
}

// Pauser is a Planner that pauses a platform model's admissions when its
// upstream asks (a 429 with Retry-After): the tasks queued for it then
// wait in the queue rather than each be admitted, refused and sent back.
type Pauser interface {
	PauseUpstream(platformModel string, d time.Duration)
}

// Starter is a Planner that hears where each task started upstream (its
// PlatformModel): the gateway's cache affinity puts that candidate first
// for the model's next tasks that share its affinity key.
type Starter interface {
	TaskStarted(t weir.Task)
}

// Config tunes the service.
type Config struct {
	// Workers is the global capacity: tasks running at once. Default 100.
	Workers int
	// MaxWait is how long a task may stay queued before it expires.
	// Default 24h.
	MaxWait time.Duration
	// QueueLimit bounds the backlog: the tasks waiting in the queue at
	// once, across every platform (the workers scope's queue limit). A
	// submission past it is refused with a *admission.QueueFullError
	// before anything is stored. Default 10,000.
	QueueLimit int
	// PollMin and PollMax bound the wait between polls of a running job;
	// the wait doubles from PollMin. Defaults 250ms and 10s.
	PollMin, PollMax time.Duration
	// MaxAttempts is how many times a task-specific failure is tried
	// before the task fails for good. Default 5.
	MaxAttempts int
	// LeaseTTL is how long a task's lease lives without renewal; a worker
	// renews it at every step. Default 5m.
	LeaseTTL time.Duration
	// RescueAfter is how long a job may look running before River hands
	// it to another worker (its process died). Default 2m.
	RescueAfter time.Duration
	// Retention is how long a finished task is kept before it is purged.
	// Default 30 days.
	Retention time.Duration
	// TargetWait is how long after a task was admitted a step of its job
	// that finds its platform model unknown here (Planner.Target) waits
	// for it, snoozing the job (any replica may take it then), before
	// the task fails with no_candidate: in a fleet, a replica that has
	// not taken the catalog version that added the platform model yet
	// knows it a moment later. Default 0: the task fails at once.
	TargetWait time.Duration
	// FetchPollInterval is how often River looks for jobs without being
	// told of them. Default 50ms; 5s on a store whose River driver
	// notifies in the process (riverjob.InProcess: the embedded SQLite
	// store), where an insert, a snooze's end and a retry's time each
	// wake River's producers, and the poll is only a safety net.
	FetchPollInterval time.Duration
	// SoleRunner says no other process runs this store's jobs (the
	// embedded SQLite store): at start, jobs still marked running are
	// this process's own from before it stopped, and run again at once
	// instead of after RescueAfter. Default false; never in a fleet
	// (Deps.Leadership).
	SoleRunner bool
	// FleetPoll is how often, on average (jittered ±50%), the fleet
	// leader's ledger reads the store for changes whose notices it
	// missed, and renews the leases it holds. Default 2s.
	FleetPoll time.Duration
	// IdleAfter is how long River's client runs with no job to work
	// before it stops, until the next job is inserted (riverjob.Sleeper):
	// a running client wakes its process every 50ms. Only where this
	// process is the store's only runner and River's notices travel in
	// it (SoleRunner, on the embedded store); elsewhere, and when
	// negative, the client runs from Start to Stop. Default 5s.
	IdleAfter time.Duration
	// Replica names this process among those running the store's jobs:
	// it is River's client id (river.Config.ID), recorded in each job's
	// attempted_by, by which ReclaimFrom takes back the jobs of a
	// replica that is gone. It must be unique among the processes
	// running at once, and at most 100 bytes. Required in a fleet, where
	// a start also takes back at once the jobs its replica's previous
	// run left running; default River's random id.
	Replica string
	// RiverLogger is River's own logger, for its client's lines; a
	// caller may make it quieter than the service's, whose logger it is
	// by default.
	RiverLogger *slog.Logger
	// Owner holds the leases (this process).
	Owner admission.Owner
	// Metrics counts transitions; default none.
	Metrics Metrics
	// Clock is the service's time: task timestamps, deadlines, the
	// waits between polls and before a task queues again. River's own
	// schedule (snoozes, retries, fetches) keeps the wall clock. Default
	// clock.Real.
	Clock clock.Clock
}

// Metrics receives every task transition (the status entered), how long
// tasks waited and ran, and each webhook delivery attempt's outcome.
type Metrics interface {
	TaskTransition(status weir.TaskStatus)
	// TaskWaited: a task of model was admitted after waiting d since it
	// was submitted (observed when it starts upstream).
	TaskWaited(model string, d time.Duration)
	// TaskRan: an admitted task of model ended in status after d.
	TaskRan(model string, status weir.TaskStatus, d time.Duration)
	// WebhookAttempt: one delivery attempt ended with outcome
	// (webhook.Outcome's names).
	WebhookAttempt(outcome string)
	// DroppedError counts an error that only the log sees (a release or
	// a cancel no caller waits for); op names the step.
	DroppedError(op string)
	// TaskDispatch counts one of the dispatcher's outcomes beside
	// admissions: commit_failed, deposed, poisoned, deferred, replanned.
	TaskDispatch(outcome string)
	// TaskCandidateSkipped counts a candidate a task went without:
	// queue_full (every candidate's queue full), refused (its upstream
	// refused the submit).
	TaskCandidateSkipped(reason string)
}

type noMetrics struct{}

func (noMetrics) TaskTransition(weir.TaskStatus) {}

func (noMetrics) TaskWaited(string, time.Duration) {}

func (noMetrics) TaskRan(string, weir.TaskStatus, time.Duration) {}

func (noMetrics) WebhookAttempt(string) {}

func (noMetrics) DroppedError(string) {}

func (noMetrics) TaskDispatch(string) {}

func (noMetrics) TaskCandidateSkipped(string) {}

func (c *Config) defaults() {
	if c.Workers <= 0 {
		c.Workers = 100
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 24 * time.Hour
	}
	if c.PollMin <= 0 {
		c.PollMin = 250 * time.Millisecond
	}
	if c.PollMax <= 0 {
		c.PollMax = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 5 * time.Minute
	}
	if c.RescueAfter <= 0 {
		c.RescueAfter = 2 * time.Minute
	}
	if c.Retention <= 0 {
		c.Retention = 30 * 24 * time.Hour
	}
	if c.FetchPollInterval <= 0 {
		c.FetchPollInterval = 50 * time.Millisecond
	}
	if c.FleetPoll <= 0 {
		c.FleetPoll = 2 * time.Second
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 10_000
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
}

// Errors a caller maps to its API.
var (
	ErrNotFound = errors.New("task not found")
)

// Service runs tasks.
type Service struct {
	cfg     Config
	store   weir.TaskStore
	engine  admission.Engine
	planner Planner
	logger  *slog.Logger
	clock   clock.Clock
	hooks   Webhooks
	ended   func(weir.Task)
	// tracer is Deps.Tracing's, nil without it.
	tracer oteltrace.Tracer
	// river is River's client on the store, with the store's
	// transactions (store.go).
	river jobStore
	// waker wakes River's producers for the jobs only a fetch poll would
	// find otherwise: snoozed and retried ones, when their time comes
	// (riverjob.Follow, while River's client runs); nil (waking
	// nothing) unless the store's River driver wakes in the process.
	waker *riverjob.Waker
	// hookSlots bounds each key's deliveries in flight (Webhooks.PerKey).
	hookSlots *webhook.Limiter

	// notifier and reclaimer are the store's, if it has them (a fleet's
	// store does).
	notifier  Notifier
	reclaimer JobReclaimer
	// bindings is the store's, if it keeps response bindings: the purge
	// job removes the expired ones.
	bindings BindingPurger
	// ledger is the admission side as this process reaches it: its own
	// term, or a fleet's (ledger.go).
	ledger ledger
	// leadership is the fleet's, which Start follows (fleet.go); nil
	// for a service alone.
	leadership admission.Leadership
	following  lifecycle.Loop
	// notices says whether this replica may have missed a cancel of a
	// task running here since a worker last read it (fleet.go).
	notices noticeWatch
	// backlog is the last count of the queue, for backlogFull (queue.go).
	backlog backlog
	// lengths are the platform models' last jobs' lengths, for their
	// next jobs' first polls (schedule.go).
	lengths jobLengths
	// notifying counts the notices sent on goroutines of their own
	// (announce), which Stop waits for.
	notifying sync.WaitGroup

	// workers is the workers scope's limit (Config.Workers, or what
	// the fleet says: followLead); workersMu orders its changes.
	workersMu sync.Mutex
	workers   int

	mu sync.Mutex
	// term is the admission side (term.go): set by New for a service
	// alone; in a fleet, while this replica leads (followLead).
	term *term
	// started and stopped say Start and Stop have begun.
	started, stopped bool
	runs             map[string]*run // task id → its run, while running here
	// refusals holds, per task, the platform models that refused its
	// submit (a 429, or a 5xx that started nothing) since it last queued
	// for all its candidates: requeue offers it none of them again.
	refusals map[string][]string
	// deferrals counts, per task, the times in a row it could not queue
	// again for a passing reason (requeueFailed).
	deferrals map[string]int
	// unheard holds the tasks submitted here whose queued notice to the
	// fleet's leader has not gone out (announce).
	unheard map[string]struct{}
	ready   chan struct{}
	// stopping is closed when Stop begins: jobs waiting in process for
	// their next poll snooze instead.
	stopping chan struct{}

	purgeBatch int
	stopOnce   sync.Once
	stopErr    error
}

// Deps is what the service runs on, over the store's transaction type
// TTx (see Store).
type Deps[TTx any] struct {
	// Store holds the tasks and River's jobs; required.
	Store Store[TTx]
	// Engine admits tasks to their scopes; required.
	Engine admission.Engine
	// Planner gives each task's candidates and where they run; required.
	Planner Planner
	// Webhooks delivers task events; the zero value delivers none.
	Webhooks Webhooks
	// Leadership, when set, says several replicas share the store and a
	// fleet's admission engine (fleet.Member): the admission side of
	// tasks — waiters, leases, the commits of admissions, recovery — runs
	// only on the replica that leads, on the engine of the term it leads,
	// which Start follows from here; every replica accepts tasks, runs
	// their jobs and tells the leader what changed (see "Several
	// replicas" in the package documentation). It needs a store that is
	// a Notifier, a JobReclaimer and a Fencer, and Config.Replica.
	// Default nil: one process, admitting on Engine.
	Leadership admission.Leadership
	// Logger is the service's logger; default none.
	Logger *slog.Logger
	// Ended, if set, hears of every task that ended, as it ended (its
	// usage is recorded from it). It runs on the path that ended the
	// task and should be quick.
	Ended func(t weir.Task)
	// Tracing, if set, traces the life of a task submitted by a traced
	// request (weir.Task.TraceParent): its wait, each job attempt and
	// each callback delivery join that request's trace (trace.go).
	// Default nil: none.
	Tracing oteltrace.TracerProvider
}

// New returns a Service on deps.Store, whose River client runs on the
// store's driver and inserts jobs in the store's transactions; Start runs
// it.
func New[TTx any](cfg Config, deps Deps[TTx]) (*Service, error) {
	inProcess := deps.Store != nil && riverjob.WakesInProcess(deps.Store.RiverDriver())
	if cfg.FetchPollInterval <= 0 && inProcess {
		cfg.FetchPollInterval = inProcessFetchPoll
	}
	cfg.defaults()
	store, engine, planner, hooks, logger := deps.Store, deps.Engine, deps.Planner, deps.Webhooks, deps.Logger
	if hooks.Schedule.Delays == nil {
		hooks.Schedule = webhook.DefaultSchedule
	}
	if hooks.PerKey <= 0 {
		hooks.PerKey = webhookPerKey
	}
	if hooks.DefaultURL != "" && (hooks.Sender == nil || hooks.Signer == nil) {
		return nil, errors.New("task: Webhooks.DefaultURL needs a Sender and a Signer: its events are signed as a task's callbacks are")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	notifier, _ := any(store).(Notifier)
	reclaimer, _ := any(store).(JobReclaimer)
	bindings, _ := any(store).(BindingPurger)
	_, fencer := any(store).(Fencer[TTx])
	if deps.Leadership != nil {
		switch {
		case notifier == nil || reclaimer == nil || !fencer:
			return nil, errors.New("task: fleet mode needs a store that notifies the replicas, reclaims a replica's jobs " +
				"and fences commits by the fleet's term (task.Notifier, task.JobReclaimer and task.Fencer: PostgreSQL's store); this one does not")
		case cfg.Replica == "":
			return nil, errors.New("task: fleet mode needs Config.Replica, the replica's id")
		case cfg.SoleRunner:
			return nil, errors.New("task: fleet mode and SoleRunner exclude each other: other replicas run the store's jobs")
		}
	}
	if len(cfg.Replica) > 100 {
		return nil, fmt.Errorf("task: Config.Replica %.20q… is longer than 100 bytes", cfg.Replica)
	}
	s := &Service{
		cfg: cfg, store: store, engine: engine, planner: planner, hooks: hooks, logger: logger, clock: cfg.Clock, ended: deps.Ended,
		tracer:   tracing.Tracer(deps.Tracing),
		notifier: notifier, reclaimer: reclaimer, bindings: bindings, workers: cfg.Workers,
		runs:       make(map[string]*run),
		refusals:   make(map[string][]string),
		deferrals:  make(map[string]int),
		unheard:    make(map[string]struct{}),
		stopping:   make(chan struct{}),
		purgeBatch: purgeBatch,
		hookSlots:  webhook.NewLimiter(webhook.LimiterConfig{PerTenant: hooks.PerKey, Shared: webhookShared}),
		ready:      make(chan struct{}),
	}
	if inProcess {
		// River's schedule is on the wall clock (Config.Clock). Elsewhere
		// the fetch poll is short and a wake would cost a NOTIFY.
		s.waker = riverjob.NewWaker(store.RiverDriver(), clock.Real, logger)
	}
	if deps.Leadership != nil {
		s.leadership = deps.Leadership
		s.ledger = &fleetLedger{s: s, listenDone: make(chan struct{})}
	} else {
		s.term = newTerm(s, engine, false, 0)
		s.ledger = &soloLedger{s: s}
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &runWorker{s: s})
	river.AddWorker(workers, &webhookWorker{s: s})
	river.AddWorker(workers, &purgeWorker{s: s})
	river.AddWorker(workers, &operatorWorker{s: s})
	client, err := newRiverStore(store, s.waker, inProcess, &river.Config{
		Queues:               riverQueues(cfg, deps.Leadership == nil),
		Workers:              workers,
		PeriodicJobs:         []*river.PeriodicJob{purgeJob()},
		JobTimeout:           s.jobTimeout(),
		RescueStuckJobsAfter: cfg.RescueAfter,
		FetchPollInterval:    cfg.FetchPollInterval,
		FetchCooldown:        min(cfg.FetchPollInterval, 10*time.Millisecond),
		MaxAttempts:          cfg.MaxAttempts,
		ID:                   cfg.Replica,
		Logger:               cmp.Or(cfg.RiverLogger, logger).With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	if inProcess && cfg.SoleRunner && deps.Leadership == nil {
		if err := s.sleepWhenIdle(client); err != nil {
			return nil, err
		}
	}
	s.river = client
	return s, nil
}

// sleepWhenIdle makes client run River only while it has work
// (Config.IdleAfter), waking at least as often as the purge is due:
// River runs it at each start. Its time is the wall clock, as River's
// own schedule is (Config.Clock).
func (s *Service) sleepWhenIdle(client jobStore) error {
	if s.cfg.IdleAfter < 0 {
		return nil
	}
	return client.sleep(cmp.Or(s.cfg.IdleAfter, idleAfter), purgeEvery, clock.Real, s.logger)
}

// Start recovers tasks left by an earlier run, then runs the dispatcher
// and River's workers. In a fleet it recovers nothing itself (the
// leader's term does); it takes back the jobs this replica's
// previous run left running, listens for the replicas' notices, runs
// River's workers, and follows the fleet's leadership.
func (s *Service) Start(ctx context.Context) error {
	if err := s.river.migrate(ctx); err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	if err := s.ledger.start(ctx, func(ctx context.Context) error {
		close(s.ready)
		return s.river.Start(ctx)
	}); err != nil {
		return err
	}
	if s.leadership != nil {
		events, cancel := s.leadership.Subscribe()
		s.following.Go(func(ctx context.Context) error {
			defer cancel()
			s.followLead(ctx, events)
			return nil
		})
	}
	return nil
}

// Stop stops the workers (a job in flight finishes its step) and the
// dispatcher. Leases are not released: the tasks are durable, and the
// next start (in a fleet, the next leader) gives them back. Stopping
// again returns the first Stop's result; stopping a service that never
// started, or whose Start failed before it ran anything, returns at once.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		close(s.stopping)
		// What the fleet says from now on is the next leader's business.
		errFollow := s.following.Stop(ctx)
		s.stopErr = errors.Join(s.river.Stop(ctx), errFollow)
		s.waker.Stop()
		s.mu.Lock()
		s.stopped = true
		tm := s.term
		s.mu.Unlock()
		s.ledger.stop(tm)
		s.notifying.Wait()
	})
	return s.stopErr
}

// NewID returns a fresh task id with the given prefix ("video", "task").
func NewID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// finishID is finish for a task known by its id alone.
func (s *Service) finishID(ctx context.Context, id string, from []weir.TaskStatus, u weir.TaskUpdate) (bool, error) {
	t, err := s.store.TaskGet(ctx, id)
	if err != nil {
		s.logger.Error("task update failed", "task", id, "status", u.Status, "error", err)
		return false, err
	}
	return s.finish(ctx, t, from, u)
}

// dropped logs at warn, and counts (Metrics.DroppedError), an error of a
// step no caller waits for, unless it is routine (admission.Routine).
func (s *Service) dropped(op string, err error) {
	if err == nil || admission.Routine(err) {
		return
	}
	s.logger.Warn("task: an error that only the log sees", "op", op, "error", err)
	s.cfg.Metrics.DroppedError(op)
}

// finish moves task t to a terminal status if it is in one of from (the
// store checks; t need not be fresh), with its webhook job in the same
// transaction. It reports whether it did; an error says the store could
// not be written, and the task is as it was.
func (s *Service) finish(ctx context.Context, t weir.Task, from []weir.TaskStatus, u weir.TaskUpdate) (bool, error) {
	u.From = from
	u.FinishedAt = s.clock.Now()
	var ok bool
	var err error
	if s.terminalCallbackOn(t) || s.river.groupCommits() {
		// Tasks end many at once while they drain: on a store that
		// commits concurrent writers together, one commit for many.
		err = s.river.inGroupTx(ctx, func(ctx context.Context, tx txn) error {
			var err error
			ok, err = s.finishTx(ctx, tx, t, u)
			return err
		})
	} else {
		// No event's job to insert with it: one statement, with no
		// transaction's BEGIN and COMMIT around it (two round trips on
		// a store whose writers commit side by side).
		ok, err = s.store.TaskUpdate(context.WithoutCancel(ctx), &weir.TaskUpdateParams{ID: t.ID, Update: u})
	}
	if err != nil {
		s.logger.Error("task update failed", "task", t.ID, "status", u.Status, "error", err)
		return false, err
	}
	if ok {
		if s.ended != nil {
			t.Status, t.FinishedAt = u.Status, u.FinishedAt
			s.ended(t)
		}
		s.forgetRefusals(t.ID)
		s.forgetDeferrals(t.ID)
		if tm := s.current(); tm != nil {
			tm.forget(t.ID)
		}
		s.cfg.Metrics.TaskTransition(u.Status)
		if !t.AdmittedAt.IsZero() {
			s.cfg.Metrics.TaskRan(t.Model, u.Status, u.FinishedAt.Sub(t.AdmittedAt))
		}
	}
	return ok, nil
}

// releaseLease returns a task's capacity, once, and ends this process's
// record of its run. In a fleet the leader's ledger holds the lease: it
// is told the task's admission ended.
func (s *Service) releaseLease(id string) {
	s.endRun(id)
	s.ledger.done(context.Background(), id, nil)
}

// Get returns a task.
func (s *Service) Get(ctx context.Context, id string) (weir.Task, error) {
	t, err := s.store.TaskGet(ctx, id)
	if errors.Is(err, weir.ErrNotFound) {
		return t, ErrNotFound
	}
	return t, err
}

// Position reports where a queued task stands. In a fleet, a task
// submitted here that the leader has not heard of stands nowhere yet:
// the answer to its submission, which goes out before the notice, does
// not ask the leader.
func (s *Service) Position(ctx context.Context, id string) (admission.Position, bool) {
	if !s.heardOf(id) {
		return admission.Position{}, false
	}
	p, err := s.engine.Position(ctx, id)
	return p, err == nil
}

// List lists a key's tasks.
func (s *Service) List(ctx context.Context, f weir.TaskFilter) ([]weir.Task, error) {
	return s.store.TaskList(ctx, f)
}

// Cancel cancels a task that has not ended: a queued one leaves the queue
// at once; a running one is cancelled upstream where the API allows and
// its lease released. A task that has ended is returned as it is.
func (s *Service) Cancel(ctx context.Context, id string) (weir.Task, error) {
	t, err := s.Get(ctx, id)
	if err != nil || t.Status.Terminal() {
		return t, err
	}
	return s.ledger.cancel(context.WithoutCancel(ctx), t, "cancelled by the client")
}

// Withdraw cancels task id, as Cancel does (upstream too, if its job
// was sent), because the client that submitted it left before it was
// told the task was accepted: nobody knows the task's id, and the
// client, which saw its submission fail, may submit it again. ctx may
// have ended (the client's request's); the cancel does not stop with it.
func (s *Service) Withdraw(ctx context.Context, id string) (weir.Task, error) {
	ctx = context.WithoutCancel(ctx)
	t, err := s.Get(ctx, id)
	if err != nil || t.Status.Terminal() {
		return t, err
	}
	s.logger.Info("a submission's client left before it was answered: its task is cancelled", "task", id, "status", t.Status)
	return s.ledger.cancel(ctx, t, withdrawnMessage)
}

// withdrawnMessage is the error message of a task Withdraw cancelled.
const withdrawnMessage = "cancelled: the client left before its submission was answered"

// cancelUpstream cancels t's upstream job, if it has one.
func (s *Service) cancelUpstream(ctx context.Context, t weir.Task) {
	if t.UpstreamID == "" {
		return
	}
	if target, ok := s.targetOf(t); ok {
		if err := target.Adapter.Cancel(ctx, t.UpstreamID); err != nil {
			s.logger.Warn("upstream cancel failed", "task", t.ID, "error", err)
		}
	}
}
