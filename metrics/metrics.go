// Package metrics holds Weir's Prometheus collectors: admission outcomes
// and waits (fed by the engine's Observer), per-scope in-flight and waiting
// (read from the engine at scrape time), HTTP requests, and upstream
// latency and errors per platform model, spend and budgets (spend.go),
// and the OpenTelemetry GenAI conventions' client metrics (genai.go).
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// Metrics registers and updates every collector.
type Metrics struct {
	Registry *prometheus.Registry

	admission  *prometheus.CounterVec
	outcomes   []prometheus.Counter // admission counters by Outcome, resolved once
	queueWait  *prometheus.HistogramVec
	leaseHeld  prometheus.Histogram
	httpReqs   *prometheus.CounterVec
	httpDur    *prometheus.HistogramVec
	upstream   *prometheus.CounterVec
	upstreamLt *prometheus.HistogramVec
	usageDrop  prometheus.Counter
	tasks      *prometheus.CounterVec
	taskWait   *prometheus.HistogramVec
	taskRun    *prometheus.HistogramVec
	webhooks   *prometheus.CounterVec
	dispatch   *prometheus.CounterVec
	skipped    *prometheus.CounterVec
	dropped    *prometheus.CounterVec
	pauses     *prometheus.CounterVec
	affinity   *prometheus.CounterVec
	paused     *prometheus.GaugeVec
	evidence   *prometheus.CounterVec
	conflicts  prometheus.Counter
	relayed    *prometheus.CounterVec
	shadow     *prometheus.CounterVec
	logins     *prometheus.CounterVec
	spendState spendState
	genAI      genAIMetrics
	cached     requestChildren
	taskCached taskChildren
}

// requestChildren are the children of the collectors every model request
// observes, cached by label values.
type requestChildren struct {
	httpReqs   *children[httpLabels, prometheus.Counter]
	httpDur    *children[string, prometheus.Observer]
	upstream   *children[[2]string, prometheus.Counter]
	upstreamLt *children[string, prometheus.Observer]
	queueWait  *children[string, prometheus.Observer]
	// affinity: weir_affinity_total's, by model and result, counted once a
	// request of a model with cache affinity.
	affinity *children[[2]string, prometheus.Counter]
}

// taskChildren are the children of the collectors every durable task
// observes (several times a task while tasks drain), cached by label
// values.
type taskChildren struct {
	tasks    *children[weir.TaskStatus, prometheus.Counter]
	taskWait *children[string, prometheus.Observer]
	taskRun  *children[taskRunLabels, prometheus.Observer]
	webhooks *children[string, prometheus.Counter]
	dispatch *children[string, prometheus.Counter]
	skipped  *children[string, prometheus.Counter]
}

// taskRunLabels are weir_task_run_seconds's labels.
type taskRunLabels struct {
	model  string
	status weir.TaskStatus
}

// httpLabels are weir_http_requests_total's labels, the status code as
// a number.
type httpLabels struct {
	endpoint string
	status   int
}

// New returns Metrics on a fresh registry. scopes, if set, is read at
// scrape time for the per-scope gauges.
func New(scopes func(context.Context) []admission.ScopeStats) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.Registry.MustRegister(m.requestCollectors()...)
	m.Registry.MustRegister(m.taskCollectors()...)
	m.Registry.MustRegister(m.operatorCollectors()...)
	m.Registry.MustRegister(m.edgeCollectors()...)
	m.Registry.MustRegister(m.spendCollectors()...)
	m.Registry.MustRegister(m.genAICollectors()...)
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if scopes != nil {
		m.Registry.MustRegister(&scopeCollector{scopes: scopes})
	}
	return m
}

// waitBuckets are the histogram buckets of a request's waits and calls,
// in seconds.
var waitBuckets = []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// requestCollectors makes the collectors of requests: admission, queue
// waits, leases, HTTP and upstream calls, usage records, shadow limits.
func (m *Metrics) requestCollectors() []prometheus.Collector {
	m.admission = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_admission_events_total",
		Help: "Admission engine transitions by outcome.",
	}, []string{"outcome"})
	for _, o := range admission.Outcomes() {
		for len(m.outcomes) <= int(o) {
			m.outcomes = append(m.outcomes, nil)
		}
		m.outcomes[o] = m.admission.WithLabelValues(o.String())
	}
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_queue_wait_seconds",
		Help:    "Time admitted requests waited in the queue, by public model.",
		Buckets: waitBuckets,
	}, []string{"model"})
	m.leaseHeld = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "weir_lease_held_seconds",
		Help:    "How long leases were held before release, expiry or fencing.",
		Buckets: waitBuckets,
	})
	m.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_http_requests_total",
		Help: "Model requests answered, by endpoint and status code.",
	}, []string{"endpoint", "code"})
	m.httpDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_http_request_duration_seconds",
		Help:    "Model request duration including queueing, by endpoint.",
		Buckets: waitBuckets,
	}, []string{"endpoint"})
	m.upstream = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_upstream_requests_total",
		Help: "Upstream calls by platform model and outcome (ok, an HTTP status, timeout, connect_error).",
	}, []string{"platform_model", "outcome"})
	m.upstreamLt = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_upstream_latency_seconds",
		Help:    "Time to upstream response headers, by platform model.",
		Buckets: waitBuckets,
	}, []string{"platform_model"})
	m.usageDrop = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_usage_records_dropped_total",
		Help: "Usage records that could not be stored.",
	})
	m.shadow = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_shadow_total",
		Help: "Admissions through a scope whose limits are in shadow that the limits would have held back, by scope (key scopes summed as key:*) and what they would have done: queued (waited for capacity), rate_limited (waited for a rate limit), queue_full and no_candidate (refused: a full queue, more tokens than the tpm), timeout (dropped at max_wait).",
	}, []string{"scope", "would"})
	m.cacheRequestChildren()
	return []prometheus.Collector{m.admission, m.queueWait, m.leaseHeld, m.httpReqs, m.httpDur, m.upstream, m.upstreamLt, m.usageDrop, m.shadow}
}

// cacheRequestChildren makes the caches of the children requests
// observe.
func (m *Metrics) cacheRequestChildren() {
	m.cached = requestChildren{
		httpReqs: newChildren(func(l httpLabels) prometheus.Counter {
			return m.httpReqs.WithLabelValues(l.endpoint, statusLabel(l.status))
		}),
		httpDur: newChildren(func(endpoint string) prometheus.Observer { return m.httpDur.WithLabelValues(endpoint) }),
		upstream: newChildren(func(l [2]string) prometheus.Counter {
			return m.upstream.WithLabelValues(l[0], l[1])
		}),
		upstreamLt: newChildren(func(pm string) prometheus.Observer { return m.upstreamLt.WithLabelValues(pm) }),
		queueWait:  newChildren(func(model string) prometheus.Observer { return m.queueWait.WithLabelValues(model) }),
		affinity: newChildren(func(l [2]string) prometheus.Counter {
			return m.affinity.WithLabelValues(l[0], l[1])
		}),
	}
}

// taskCollectors makes the collectors of durable tasks and their
// callbacks.
func (m *Metrics) taskCollectors() []prometheus.Collector {
	m.tasks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_task_transitions_total",
		Help: "Durable task transitions, by the status entered.",
	}, []string{"status"})
	for _, st := range []weir.TaskStatus{weir.TaskQueued, weir.TaskAdmitted, weir.TaskRunning, weir.TaskSucceeded, weir.TaskFailed, weir.TaskCancelled, weir.TaskExpired} {
		m.tasks.WithLabelValues(string(st))
	}
	// Tasks wait and run for minutes to hours.
	taskBuckets := []float64{.1, .5, 1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600}
	m.taskWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_task_queue_wait_seconds",
		Help:    "Time durable tasks waited from submission to admission, by public model.",
		Buckets: taskBuckets,
	}, []string{"model"})
	m.taskRun = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "weir_task_run_seconds",
		Help:    "Time admitted durable tasks held their capacity until they ended, by public model and final status.",
		Buckets: taskBuckets,
	}, []string{"model", "status"})
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_task_webhook_attempts_total",
		Help: "Webhook delivery attempts by outcome (delivered, retryable, gone, refused); gone and refused also count events dropped unsent, after a 410 or to a forbidden address.",
	}, []string{"outcome"})
	m.dispatch = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_task_dispatch_total",
		Help: "What the task dispatcher did besides admitting, by outcome: commit_failed (a commit of admissions the store refused; its tasks queue again), deposed (a commit of a fleet term that had passed), poisoned (a task the store refused alone; it fails), deferred (a task that could not queue and waits a backoff), replanned (a queued task moved to the candidates a catalog reload gave it).",
	}, []string{"outcome"})
	for _, o := range TaskDispatchOutcomes {
		m.dispatch.WithLabelValues(o)
	}
	m.skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_task_candidate_skipped_total",
		Help: "Candidates a task was planned or sent without, by reason: cooldown (the platform model cools down after failures), paused (its upstream asked for a pause), capability (it cannot serve the task's input), queue_full (every candidate's queue was full), refused (its upstream refused the submit; the task goes to another). Counted each time a task is planned: submitted, queued again, replanned.",
	}, []string{"reason"})
	for _, r := range CandidateSkipReasons {
		m.skipped.WithLabelValues(r)
	}
	m.cacheTaskChildren()
	return []prometheus.Collector{m.tasks, m.taskWait, m.taskRun, m.webhooks, m.dispatch, m.skipped}
}

// cacheTaskChildren makes the caches of the children tasks observe.
func (m *Metrics) cacheTaskChildren() {
	counter := func(v *prometheus.CounterVec) *children[string, prometheus.Counter] {
		return newChildren(func(l string) prometheus.Counter { return v.WithLabelValues(l) })
	}
	m.taskCached = taskChildren{
		tasks: newChildren(func(st weir.TaskStatus) prometheus.Counter { return m.tasks.WithLabelValues(string(st)) }),
		taskWait: newChildren(func(model string) prometheus.Observer {
			return m.taskWait.WithLabelValues(model)
		}),
		taskRun: newChildren(func(l taskRunLabels) prometheus.Observer {
			return m.taskRun.WithLabelValues(l.model, string(l.status))
		}),
		webhooks: counter(m.webhooks),
		dispatch: counter(m.dispatch),
		skipped:  counter(m.skipped),
	}
}

// TaskDispatchOutcomes are weir_task_dispatch_total's outcomes, and
// CandidateSkipReasons weir_task_candidate_skipped_total's reasons: each
// series exists from the start, at 0, for alerts on its rate.
var (
	TaskDispatchOutcomes = []string{"commit_failed", "deposed", "poisoned", "deferred", "replanned"}
	CandidateSkipReasons = []string{"cooldown", "paused", "capability", "queue_full", "refused"}
)

// operatorCollectors makes the collectors an operator watches beside the
// requests: dropped errors, affinity, upstream pauses, console logins.
func (m *Metrics) operatorCollectors() []prometheus.Collector {
	m.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_dropped_errors_total",
		Help: "Errors that only the log sees, by the step that failed (release, reconcile, remove_scope, cancel, fence, activate, overrides, pause, ...).",
	}, []string{"op"})
	m.affinity = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_affinity_total",
		Help: "Requests served under their model's cache affinity, by result: hit (on the candidate that served their prompt prefix last), miss (elsewhere), new (nothing remembered). The hit rate is hit / (hit + miss).",
	}, []string{"model", "result"})
	m.pauses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_upstream_pauses_total",
		Help: "Pauses of a platform model's admissions, each after its upstream answered 429 with a Retry-After (extensions count too).",
	}, []string{"platform_model"})
	m.paused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "weir_upstream_paused",
		Help: "1 while a platform model's admissions are paused on its upstream's Retry-After.",
	}, []string{"platform_model"})
	m.logins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_console_logins_total",
		Help: "Logins at the web console's form, by outcome: ok, or failed (not the admin token).",
	}, []string{"outcome"})
	for _, o := range []string{"ok", "failed"} {
		m.logins.WithLabelValues(o)
	}
	return []prometheus.Collector{m.dropped, m.affinity, m.pauses, m.paused, m.logins}
}

// edgeCollectors makes the collectors of edge nodes: health evidence,
// token conflicts, relayed runs.
func (m *Metrics) edgeCollectors() []prometheus.Collector {
	m.evidence = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_edge_evidence_total",
		Help: "Edge nodes' provider health evidence, by source (stall, probe) and decision (applied, rejected_stale, rejected_binding, rejected_ambiguous, rejected_invalid).",
	}, []string{"source", "decision"})
	m.conflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_edge_token_conflicts_total",
		Help: "Edge node registrations refused because another process of the node, with the same token, had a live session (token_in_use).",
	})
	m.relayed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_edge_relayed_total",
		Help: "Runs relayed between a fleet's replicas for edge nodes, by direction (sent to the replica the node dialed, taken from another) and outcome (answer, error, refused, unreachable).",
	}, []string{"direction", "outcome"})
	return []prometheus.Collector{m.evidence, m.conflicts, m.relayed}
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Observe implements admission.Observer. It runs under the engine's lock,
// so it only bumps counters.
func (m *Metrics) Observe(e admission.Event) {
	if int(e.Outcome) < len(m.outcomes) && m.outcomes[e.Outcome] != nil {
		m.outcomes[e.Outcome].Inc()
	} else {
		m.admission.WithLabelValues(e.Outcome.String()).Inc()
	}
	switch e.Outcome {
	case admission.OutcomeReleased, admission.OutcomeExpired, admission.OutcomeFenced:
		if e.Lease != 0 && e.Held > 0 {
			m.leaseHeld.Observe(e.Held.Seconds())
		}
	case admission.OutcomeShadow:
		m.shadow.WithLabelValues(shadowScope(e.Scope), e.Would.String()).Inc()
	}
}

// shadowScope is a shadow event's scope label: key scopes are summed, as
// one series per API key would not scale.
func shadowScope(scope string) string {
	if strings.HasPrefix(scope, weir.KeyScope("")) {
		return weir.KeyScope("*")
	}
	return scope
}

// ObserveHTTP counts one answered model request.
func (m *Metrics) ObserveHTTP(endpoint string, status int, d time.Duration) {
	m.cached.httpReqs.get(httpLabels{endpoint, status}).Inc()
	m.cached.httpDur.get(endpoint).Observe(d.Seconds())
}

// statusLabels are the status codes 100 to 599 as label values, made
// once: strconv.Itoa makes a string for each number past 99, a request.
var statusLabels = func() (l [500]string) {
	for i := range l {
		l[i] = strconv.Itoa(100 + i)
	}
	return l
}()

// statusLabel is status as a label value.
func statusLabel(status int) string {
	if status >= 100 && status < 600 {
		return statusLabels[status-100]
	}
	return strconv.Itoa(status)
}

// ObserveUpstream counts one upstream call.
func (m *Metrics) ObserveUpstream(platformModel, outcome string, d time.Duration) {
	m.cached.upstream.get([2]string{platformModel, outcome}).Inc()
	m.cached.upstreamLt.get(platformModel).Observe(d.Seconds())
}

// ObserveQueueWait records how long an admitted request waited.
func (m *Metrics) ObserveQueueWait(model string, d time.Duration) {
	m.cached.queueWait.get(model).Observe(d.Seconds())
}

// TaskTransition counts a task entering status st.
func (m *Metrics) TaskTransition(st weir.TaskStatus) { m.taskCached.tasks.get(st).Inc() }

// DroppedError counts an error that could only be logged: op names what
// failed.
func (m *Metrics) DroppedError(op string) { m.dropped.WithLabelValues(op).Inc() }

// Affinity counts a request served under its model's cache affinity
// (gateway.Metrics).
func (m *Metrics) Affinity(model, result string) {
	m.cached.affinity.get([2]string{model, result}).Inc()
}

// UpstreamPaused marks a platform model's admissions paused (an
// upstream's 429 with Retry-After) or resumed (gateway.Metrics).
func (m *Metrics) UpstreamPaused(platformModel string, paused bool) {
	if paused {
		m.pauses.WithLabelValues(platformModel).Inc()
		m.paused.WithLabelValues(platformModel).Set(1)
		return
	}
	m.paused.WithLabelValues(platformModel).Set(0)
}

// Relayed counts one run relayed for an edge node (edge.RelayMetrics).
func (m *Metrics) Relayed(direction, outcome string) {
	m.relayed.WithLabelValues(direction, outcome).Inc()
}

// Evidence counts one piece of an edge node's health evidence
// (edge.Metrics).
func (m *Metrics) Evidence(source, decision string) {
	m.evidence.WithLabelValues(source, decision).Inc()
}

// TokenConflict counts one edge node registration refused because
// another process of the node had a live session (edge.Metrics).
func (m *Metrics) TokenConflict() { m.conflicts.Inc() }

// FleetState is a replica's view of its fleet, read at scrape time.
type FleetState struct {
	// Epoch is the newest term the replica knows of.
	Epoch uint64
	// Leading: the replica leads that term. Synced: it has synced with
	// a leader, so its admissions are decided (unsynced, they fail with
	// store_unavailable).
	Leading, Synced bool
	// Open: no leader answers, and the replica admits its share of the
	// scopes that fail open. OpenAdmitted counts the leases it granted
	// so since it started.
	Open         bool
	OpenAdmitted uint64
	// Protocol is the version of the replica's session with its leader
	// (0: none). ProtocolRefused: the replica and its leader speak no
	// version in common. ProtocolRefusals counts the sessions refused
	// so, by the replica or by its leader, and by the replica leading.
	Protocol         int
	ProtocolRefused  bool
	ProtocolRefusals uint64
}

// WatchFleet publishes the fleet's state as state reports it:
// weir_fleet_epoch, weir_fleet_leader, weir_fleet_synced, weir_fleet_open,
// weir_fleet_open_admissions_total, weir_fleet_protocol,
// weir_fleet_protocol_refused and weir_fleet_protocol_refusals_total.
func (m *Metrics) WatchFleet(state func() FleetState) {
	gauge := func(name, help string, v func(FleetState) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(state()) })
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	m.Registry.MustRegister(
		gauge("weir_fleet_epoch", "The newest fleet term this replica knows of.", func(s FleetState) float64 { return float64(s.Epoch) }),
		gauge("weir_fleet_leader", "1 while this replica leads the fleet's admissions.", func(s FleetState) float64 { return b(s.Leading) }),
		gauge("weir_fleet_synced", "1 while this replica has synced with a fleet leader; 0: its admissions fail with store_unavailable.", func(s FleetState) float64 { return b(s.Synced) }),
		gauge("weir_fleet_open", "1 while no fleet leader answers and this replica admits its share of the scopes that fail open.", func(s FleetState) float64 { return b(s.Open) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weir_fleet_open_admissions_total", Help: "Leases this replica granted on its own, its share of the scopes that fail open, while no fleet leader answered."},
			func() float64 { return float64(state().OpenAdmitted) }),
		gauge("weir_fleet_protocol", "The fleet protocol version of this replica's session with its leader; 0: none.", func(s FleetState) float64 { return float64(s.Protocol) }),
		gauge("weir_fleet_protocol_refused", "1 while this replica and its leader speak no fleet protocol version in common: it admits nothing through that leader.", func(s FleetState) float64 { return b(s.ProtocolRefused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weir_fleet_protocol_refusals_total", Help: "Fleet sessions refused for want of a common protocol version: by this replica's leader, by this replica, or by this replica leading."},
			func() float64 { return float64(state().ProtocolRefusals) }),
	)
}

// CatalogState is the fleet's catalog as a replica serves it, read at
// scrape time.
type CatalogState struct {
	// Version is the fleet's catalog version served (0: none yet).
	Version int64
	// Drift: the replica's own config file has another catalog.
	Drift bool
}

// WatchCatalog publishes the fleet's catalog as state reports it:
// weir_catalog_version and weir_catalog_drift.
func (m *Metrics) WatchCatalog(state func() CatalogState) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weir_catalog_version", Help: "The fleet's catalog version this replica serves."},
			func() float64 { return float64(state().Version) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weir_catalog_drift", Help: "1 while this replica's config file has another catalog than the fleet's version it serves."},
			func() float64 {
				if state().Drift {
					return 1
				}
				return 0
			}),
	)
}

// UsageDropped counts usage records lost.
func (m *Metrics) UsageDropped(n int) { m.usageDrop.Add(float64(n)) }

var (
	scopeInFlight = prometheus.NewDesc("weir_scope_in_flight", "Amount held in the scope now.", []string{"scope", "type"}, nil)
	scopeLimit    = prometheus.NewDesc("weir_scope_limit", "The scope's concurrent limit (0: none).", []string{"scope", "type"}, nil)
	scopeWaiting  = prometheus.NewDesc("weir_scope_waiting", "Requests queued with a candidate in the scope.", []string{"scope", "type"}, nil)
)

// scopeCollector reads the engine at scrape time. Key scopes are left out:
// one series per API key would not scale. So are budget scopes
// ("budget:ID", one per budget, keys' too), whose state the
// weir_budget_* gauges show.
type scopeCollector struct {
	scopes func(context.Context) []admission.ScopeStats
}

func (c *scopeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- scopeInFlight
	ch <- scopeLimit
	ch <- scopeWaiting
}

// scrapeBound bounds reading the scopes at scrape time: a fleet's
// replica asks its leader, and a scrape must answer, with what it has,
// while there is none.
const scrapeBound = 2 * time.Second

func (c *scopeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeBound)
	defer cancel()
	for _, st := range c.scopes(ctx) {
		typ, _, _ := strings.Cut(st.Name, ":")
		if typ == "key" || typ == "budget" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(scopeInFlight, prometheus.GaugeValue, float64(st.Used), st.Name, typ)
		ch <- prometheus.MustNewConstMetric(scopeLimit, prometheus.GaugeValue, float64(st.Config.Limit), st.Name, typ)
		ch <- prometheus.MustNewConstMetric(scopeWaiting, prometheus.GaugeValue, float64(st.Queued), st.Name, typ)
	}
}

// TaskWaited records how long a task waited before admission.
func (m *Metrics) TaskWaited(model string, d time.Duration) {
	m.taskCached.taskWait.get(model).Observe(d.Seconds())
}

// TaskRan records how long an admitted task ran until it ended in st.
func (m *Metrics) TaskRan(model string, st weir.TaskStatus, d time.Duration) {
	m.taskCached.taskRun.get(taskRunLabels{model, st}).Observe(d.Seconds())
}

// ConsoleLogin counts a login at the console's form by outcome (ok,
// failed).
func (m *Metrics) ConsoleLogin(outcome string) { m.logins.WithLabelValues(outcome).Inc() }

// TaskDispatch counts one of the task dispatcher's outcomes
// (TaskDispatchOutcomes; task.Metrics).
func (m *Metrics) TaskDispatch(outcome string) { m.taskCached.dispatch.get(outcome).Inc() }

// TaskCandidateSkipped counts a candidate a task was planned or sent
// without, by reason (CandidateSkipReasons; task.Metrics and
// gateway.Metrics).
func (m *Metrics) TaskCandidateSkipped(reason string) { m.taskCached.skipped.get(reason).Inc() }

// WebhookAttempt counts one webhook delivery attempt by its outcome.
func (m *Metrics) WebhookAttempt(outcome string) { m.taskCached.webhooks.get(outcome).Inc() }
