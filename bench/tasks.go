package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/httpapi"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/sqlite"
	"github.com/weir-gateway/weir/task"
)

// TasksConfig says how Drain and Restart run; the defaults are
// `weir-bench tasks`' flags'.
type TasksConfig struct {
	Weir Weir

	Tasks       int           // tasks to submit (drain 10,000; restart 100,000)
	Capacity    int           // Drain: worker capacity, tasks.workers (100)
	Job         time.Duration // Drain: how long each upstream job runs (2s)
	PollMin     time.Duration // tasks.poll_min (250ms)
	PollMax     time.Duration // tasks.poll_max (10s)
	Connections int           // connections submitting tasks (16)
	Dir         string        // directory for the config and database (default: a new temporary one, removed after)
	// Fill is how Restart queues its tasks: "http" (the default) submits
	// each through the task API; "store" submits the first, kills the
	// gateway, and writes the others into its SQLite file in batches,
	// for a queue of 10^6 that HTTP would take most of an hour to fill.
	Fill string
	// Fleet, with Replicas set, runs the gateway as a fleet of replicas
	// on PostgreSQL, tasks submitted to each in turn; Drain's worker
	// capacity is the fleet's, and Restart kills and restarts every
	// replica.
	Fleet FleetConfig
}

// validate checks c for Drain (drain) or Restart.
func (c TasksConfig) validate(drain bool) error {
	if err := c.Weir.child(); err != nil {
		return err
	}
	if err := c.Fleet.validate(); err != nil {
		return err
	}
	switch {
	case drain && c.Fleet.Replicas > 0 && c.Capacity%c.Fleet.Replicas != 0:
		return errors.New("--capacity must be a multiple of --fleet: each replica brings an equal share of it")
	case c.Tasks < 1:
		return errors.New("--tasks must be positive")
	case c.Connections < 1:
		return errors.New("--connections must be positive")
	case c.PollMin <= 0 || c.PollMax < c.PollMin:
		return errors.New("--poll-min must be positive and --poll-max at least --poll-min")
	case drain && c.Capacity < 1:
		return errors.New("--capacity must be positive")
	case drain && c.Job <= 0:
		return errors.New("--job must be positive")
	case c.Fill != "" && c.Fill != "http" && c.Fill != "store":
		return errors.New("--fill must be http or store")
	case c.Fill == "store" && (drain || c.Fleet.Replicas > 0):
		return errors.New("--fill store is restart's, on SQLite")
	}
	return nil
}

// tasksUpstream is the mock's video API with the arrival time of the
// first submit and of each job's latest poll.
type tasksUpstream struct {
	mock *mock.Server
	url  string
	srv  *http.Server

	mu    sync.Mutex
	first time.Time // the first submit since reset
	// lastPoll is when the latest poll of each job (by its id) arrived:
	// once a job has ended, the poll that saw it end.
	lastPoll map[string]time.Time
}

func startTasksUpstream(cfg mock.Config) (*tasksUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &tasksUpstream{mock: mock.New(cfg), url: "http://" + ln.Addr().String() + "/v1", lastPoll: map[string]time.Time{}}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func (u *tasksUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch id, poll := strings.CutPrefix(r.URL.Path, "/v1/videos/"); {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/videos":
		now := time.Now()
		u.mu.Lock()
		if u.first.IsZero() {
			u.first = now
		}
		u.mu.Unlock()
	case r.Method == http.MethodGet && poll && !strings.Contains(id, "/"):
		now := time.Now()
		u.mu.Lock()
		u.lastPoll[id] = now
		u.mu.Unlock()
	}
	u.mock.ServeHTTP(w, r)
}

// polled is when the latest poll of job id arrived, or zero.
func (u *tasksUpstream) polled(id string) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastPoll[id]
}

func (u *tasksUpstream) resetFirst() {
	u.mu.Lock()
	u.first = time.Time{}
	u.mu.Unlock()
}

func (u *tasksUpstream) firstSubmit() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.first
}

// tasksGateway is one `weir serve` child.
type tasksGateway struct {
	*child
	recovered string // the "tasks recovered" line
}

// scopesLine is every scope's in-flight count from url's /admin/queues.
func scopesLine(url string) string {
	v, err := fetchQueues(url)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, s := range v.Scopes {
		parts = append(parts, fmt.Sprintf("%s %d/%d", s.Name, s.InFlight, s.Leases))
	}
	return "in flight/leases: " + strings.Join(parts, ", ")
}

// writeTasksConfig writes the config file of a gateway on the SQLite
// file db; see tasksCatalog.
func writeTasksConfig(path, db, upURL string, workers int, c TasksConfig) error {
	return serveFile{Storage: sqliteStorage(db), Rest: tasksCatalog(upURL, workers, c)}.write(path)
}

// defaultQueueLimit is tasks.queue_limit's default.
const defaultQueueLimit = 10_000

// tasksCatalog is the config's tasks section and catalog: the mock as one
// platform whose platform model has no limit of its own, so that
// tasks.workers is the capacity. The backlog's bound (tasks.queue_limit)
// holds every task submitted, so that a submission faster than the drain
// is never refused (queue_full) before the queue has drained.
func tasksCatalog(upURL string, workers int, c TasksConfig) string {
	return fmt.Sprintf(`tasks:
  workers: %d
  queue_limit: %d
  poll_min: %s
  poll_max: %s
platforms:
  - name: mock
    base_url: %s
platform_models:
  - name: mock/sora-2
    platform: mock
    upstream: sora-2
models:
  - name: sora-2
    kind: video
    candidates:
      - platform_model: mock/sora-2
`, workers, max(c.Tasks, defaultQueueLimit), c.PollMin, c.PollMax, upURL)
}

// startTasksGateway starts `weir serve -c config` and waits until it
// serves.
func startTasksGateway(w Weir, config string) (*tasksGateway, error) {
	g := &tasksGateway{}
	c, err := startChild(w.Exe, append(slices.Clone(w.ServeArgs), "-c", config), 5*time.Minute, func(v logLine) {
		if v.Msg == "tasks recovered" {
			g.recovered = fmt.Sprintf("%d active, %d queued in %s", v.Active, v.Queued, time.Duration(v.TookMS*float64(time.Millisecond)).Round(time.Millisecond))
		}
	})
	if err != nil {
		return nil, err
	}
	g.child = c
	return g, nil
}

// peakRSS is the child's peak resident set (VmHWM), or "".
func (g *tasksGateway) peakRSS() string {
	kib, err := g.memKiB("VmHWM")
	if err != nil {
		return ""
	}
	return strconv.FormatInt(kib, 10) + " kB"
}

// workersScope reads the worker-capacity scope from url's /admin/queues
// (a fleet's replica asks its leader).
func workersScope(url string) (inFlight int64, waiting int, err error) {
	v, err := fetchQueues(url)
	if err != nil {
		return 0, 0, err
	}
	for _, s := range v.Scopes {
		if s.Name == task.WorkersScope {
			return s.InFlight, s.Waiting, nil
		}
	}
	return 0, 0, fmt.Errorf("no %s scope in /admin/queues", task.WorkersScope)
}

// tasksRig is the directory, the upstream and the key.
type tasksRig struct {
	dir, config, db string
	up              *tasksUpstream
	secret          string
	client          *http.Client
	cleanup         func()
}

func newTasksRig(ctx context.Context, c TasksConfig, job time.Duration, workers int) (*tasksRig, error) {
	r := &tasksRig{cleanup: func() {}}
	r.dir = c.Dir
	if r.dir == "" {
		d, err := os.MkdirTemp("", "weir-bench-tasks-")
		if err != nil {
			return nil, err
		}
		r.dir, r.cleanup = d, func() { os.RemoveAll(d) }
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	r.config, r.db = filepath.Join(r.dir, "weir.yaml"), filepath.Join(r.dir, "weir.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(r.db + suffix)
	}
	up, err := startTasksUpstream(mock.Config{JobDuration: job})
	if err != nil {
		r.cleanup()
		return nil, err
	}
	r.up = up
	r.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: c.Connections}}
	if c.Fleet.Replicas > 0 {
		return r, nil // startFleet writes the configs and creates the key
	}
	if err := writeTasksConfig(r.config, r.db, up.url, workers, c); err != nil {
		r.close()
		return nil, err
	}
	store, err := sqlite.Open(ctx, r.db)
	if err != nil {
		r.close()
		return nil, err
	}
	r.secret, err = c.Weir.CreateKey(ctx, store, &weir.APIKey{Name: "bench-tasks", Group: "default"})
	store.Close()
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *tasksRig) close() {
	_ = r.up.srv.Close()
	r.cleanup()
}

// submitAll posts n tasks over conns connections, task i to
// urls[i % len(urls)], and returns the id of the last one accepted.
func (r *tasksRig) submitAll(ctx context.Context, urls []string, n, conns int, progress func(done int)) (last string, err error) {
	var next, done atomic.Int64
	var mu sync.Mutex
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				body := fmt.Sprintf(`{"model":"sora-2","input":{"prompt":"bench %d","seconds":"4"}}`, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, urls[i%int64(len(urls))]+"/v1/tasks", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+r.secret)
				req.Header.Set("Content-Type", "application/json")
				resp, err := r.client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					errs <- fmt.Errorf("submit: %s: %s", resp.Status, b)
					return
				}
				var v struct{ ID string }
				_ = json.Unmarshal(b, &v)
				mu.Lock()
				last = v.ID
				mu.Unlock()
				if d := done.Add(1); progress != nil {
					progress(int(d))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return last, <-errs
}

// Drain is `weir-bench tasks drain`, docs/benchmarks.md's "drain"
// scenario: durable tasks against a real `weir serve` (Weir.Exe, started
// as a child on a temporary SQLite file) in front of the mock provider's
// video API, served in this process.
//
// It submits c.Tasks tasks through the task API (c.Connections
// connections) to a gateway whose worker capacity (tasks.workers) is
// c.Capacity, with every upstream job lasting c.Job, and times from the
// first submission until every task has ended (its terminal status
// committed). The ideal is ceil(tasks / capacity) × job; the line gives
// the ratio. A second line says where each
// task's time between its admission and its end went, from the gateway's
// database and the mock's job times: admission to upstream submit
// (commit, River's fetch, the HTTP call), the job itself, and the
// upstream's end to the gateway noticing it (the poll interval); and the
// share of capacity that stood idle between one task's release and the
// next one's admission. A LEAK line appears if the worker scope ever went
// over its limit or still held leases 10s after the last task ended; a
// log line sums the gateway's warnings and errors.
//
// With c.Fleet.Replicas set the gateway is a fleet instead: that many
// `weir serve` replicas on a PostgreSQL schema of the run's own (dropped
// after), each with tasks.workers an equal share of c.Capacity (the
// fleet's capacity is the sum of its live replicas' workers, which its
// leader admits); the tasks are submitted to
// each replica in turn, and the figures are read from the leader's
// /admin/queues (any replica's answers with the leader's) and the
// schema:
//
//	go run ./cmd/weir-bench tasks drain --fleet 2                          # the full drain on PostgreSQL
//	go run ./cmd/weir-bench tasks drain --fleet 2 --tasks 2000 --job 1s    # scaled down
func Drain(ctx context.Context, out io.Writer, c TasksConfig) error {
	if err := c.validate(true); err != nil {
		return err
	}
	r, err := newTasksRig(ctx, c, c.Job, c.Capacity)
	if err != nil {
		return err
	}
	defer r.close()
	g, err := startDrainGateway(ctx, c, r)
	if err != nil {
		return err
	}
	defer g.stop()
	waves := (c.Tasks + c.Capacity - 1) / c.Capacity
	ideal := time.Duration(waves) * c.Job
	fmt.Fprintf(out, "weir-bench tasks drain: %d tasks, capacity %d, upstream jobs of %s, polls %s..%s; ideal %s; %d CPUs, load average %s\n",
		c.Tasks, c.Capacity, c.Job, c.PollMin, c.PollMax, ideal, runtime.NumCPU(), loadAverage())
	if g.fleet != nil {
		fmt.Fprintf(out, "  fleet: %d `weir serve` replicas on PostgreSQL schema %s, tasks submitted to each in turn, %s leads; tasks.workers %d each, the fleet's capacity %d\n",
			len(g.fleet.replicas), g.fleet.schema.name, g.fleet.leader(), c.Capacity/len(g.fleet.replicas), c.Capacity)
	}

	cpuStart := procsCPU(g.procs)
	start := time.Now()
	var submitted time.Duration
	progress := submitProgress(out, start, c.Tasks, func() string {
		inFlight, waiting, err := workersScope(g.urls[0])
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%d in flight, %d waiting", inFlight, waiting)
	})
	if _, err := r.submitAll(ctx, g.urls, c.Tasks, c.Connections, func(d int) {
		progress(d)
		if d == c.Tasks {
			submitted = time.Since(start)
		}
	}); err != nil {
		return err
	}
	drain, peakInFlight, err := waitDrained(ctx, out, r, g, c.Tasks, start)
	if err != nil {
		return err
	}
	released := time.Since(start)
	cpu := procsCPU(g.procs) - cpuStart
	st := r.up.mock.Stats()
	ratio := float64(drain) / float64(ideal)
	verdict := "met"
	if ratio > drainTarget {
		verdict = "missed"
	}
	name := "drain"
	if g.fleet != nil {
		name = fmt.Sprintf("drain (fleet of %d on PostgreSQL)", len(g.fleet.replicas))
	}
	fmt.Fprintf(out, "%s  tasks %d  capacity %d  job %s  ideal %s  drain %s  ratio %.3fx (target <= %.2fx: %s)  submitted in %s  gateway CPU %s (%s a task)  upstream peak %d running, %d submits for %d jobs, %d polls\n",
		name, c.Tasks, c.Capacity, c.Job, ideal, drain.Round(time.Millisecond), ratio, drainTarget, verdict, submitted.Round(time.Millisecond),
		cpu.Round(10*time.Millisecond), (cpu / time.Duration(c.Tasks)).Round(time.Microsecond),
		st.PeakJobsRunning, st.JobsSubmitted+st.JobsDeduplicated, st.JobsSubmitted, st.JobPolls)
	if inFlight, _, _ := workersScope(g.urls[0]); peakInFlight > int64(c.Capacity) || inFlight > 0 {
		fmt.Fprintf(out, "LEAK   global:tasks peaked at %d in flight (limit %d); %d still in flight %s after the last task ended (leases live tasks.lease_ttl, 5m): %s\n",
			peakInFlight, c.Capacity, inFlight, (released - drain).Round(time.Millisecond), scopesLine(g.urls[0]))
	}
	if w := g.warnings(); w != "" {
		fmt.Fprintf(out, "log    %s\n", w)
	}
	store, closeStore, err := g.store(ctx)
	if err != nil {
		return err
	}
	defer closeStore()
	jt, jtErr := g.jobTimes(ctx)
	if err := drainBreakdown(ctx, out, r, store, start, drain, c, jt); err != nil {
		return err
	}
	if jtErr != nil {
		fmt.Fprintf(out, "split  the run jobs' times not read: %v\n", jtErr)
	}
	return nil
}

// drainTarget is the most a drain may take, as a multiple of the ideal.
const drainTarget = 1.03

// waitDrained waits until all tasks submitted at start have ended and
// the workers' scope holds and queues nothing (or, if it still holds
// some 10 s after the last ended, a leak the caller reports), printing
// progress every 10 s. It returns when the last task ended and the most
// the scope held at once.
func waitDrained(ctx context.Context, out io.Writer, r *tasksRig, g *drainGateway, tasks int, start time.Time) (time.Duration, int64, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastReport, lastCount := time.Now(), time.Now()
	var drain time.Duration // until every task has ended
	var peakInFlight int64
	for {
		inFlight, waiting, err := workersScope(g.urls[0])
		if err != nil {
			return 0, 0, err
		}
		peakInFlight = max(peakInFlight, inFlight)
		// Counting the ended tasks reads the tasks' index whole, which
		// at 10^5 tasks costs this process more CPU than the
		// gateway's: count every tick only once every upstream job has
		// ended (no task ends before its job), else every second.
		st := r.up.mock.Stats()
		if drain == 0 && (st.JobsCompleted+st.JobsFailed+st.JobsCancelled >= int64(tasks) || time.Since(lastCount) >= time.Second) {
			lastCount = time.Now()
			ended, err := g.ended(ctx)
			if err != nil {
				return 0, 0, err
			}
			if ended == tasks {
				drain = time.Since(start)
			}
		}
		if drain > 0 && inFlight == 0 && waiting == 0 {
			break
		}
		if drain > 0 && time.Since(start)-drain > 10*time.Second {
			break // leaked: the caller reports it
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			fmt.Fprintf(out, "  %s: %d in flight, %d waiting; upstream %d running, %d completed\n",
				time.Since(start).Round(time.Second), inFlight, waiting, st.JobsRunning, st.JobsCompleted)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-tick.C:
		}
	}
	return drain, peakInFlight, nil
}

// drainGateway is what Drain runs its tasks through: one `weir serve` on
// the rig's SQLite file, or a fleet of replicas on PostgreSQL.
type drainGateway struct {
	urls     []string
	fleet    *fleetRun // or nil
	procs    []*child  // the gateway's processes, whose CPU time the line gives
	ended    func(ctx context.Context) (int, error)
	jobTimes func(ctx context.Context) (map[string]jobTimes, error)
	store    func(ctx context.Context) (weir.TaskStore, func(), error)
	warnings func() string
	stop     func()
}

// endedQuery counts the tasks that have ended, on either database.
const endedQuery = `SELECT count(*) FROM tasks WHERE status IN ('succeeded', 'failed', 'cancelled', 'expired')`

func startDrainGateway(ctx context.Context, c TasksConfig, r *tasksRig) (*drainGateway, error) {
	if c.Fleet.Replicas > 0 {
		return startDrainFleet(ctx, c, r)
	}
	g, err := startTasksGateway(c.Weir, r.config)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+r.db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		g.kill()
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(time.Millisecond) // a fresh snapshot for each look
	return &drainGateway{
		urls:  []string{g.url},
		procs: []*child{g.child},
		ended: func(ctx context.Context) (n int, err error) {
			return n, db.QueryRowContext(ctx, endedQuery).Scan(&n)
		},
		jobTimes: func(ctx context.Context) (map[string]jobTimes, error) {
			rows, err := db.QueryContext(ctx, jobTimesSQLite)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return scanJobTimes(rows)
		},
		store: func(ctx context.Context) (weir.TaskStore, func(), error) {
			s, err := sqlite.Open(ctx, r.db)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
		warnings: g.warnings,
		stop:     func() { db.Close(); g.kill() },
	}, nil
}

// startDrainFleet starts c.Fleet's replicas, each with tasks.workers an
// equal share of c.Capacity: the fleet's worker capacity, which its leader
// admits, is the sum of the live replicas' workers. It returns once the
// leader has set the workers scope to that sum.
func startDrainFleet(ctx context.Context, c TasksConfig, r *tasksRig) (*drainGateway, error) {
	share := c.Capacity / c.Fleet.Replicas
	f, err := startFleet(ctx, fleetParams{Weir: c.Weir, Fleet: c.Fleet, Dir: r.dir,
		Rest: tasksCatalog(r.up.url, share, c), Key: &weir.APIKey{Name: "bench-tasks", Group: "default"}})
	if err != nil {
		return nil, err
	}
	if err := waitWorkersLimit(ctx, f.urls()[0], int64(c.Capacity), time.Minute); err != nil {
		f.stop()
		return nil, err
	}
	r.secret = f.secret
	pool, err := pgxpool.New(ctx, f.schema.dsn())
	if err != nil {
		f.stop()
		return nil, err
	}
	return &drainGateway{
		urls:  f.urls(),
		procs: f.replicas,
		fleet: f,
		ended: func(ctx context.Context) (n int, err error) {
			return n, pool.QueryRow(ctx, endedQuery).Scan(&n)
		},
		jobTimes: func(ctx context.Context) (map[string]jobTimes, error) {
			rows, err := pool.Query(ctx, jobTimesPostgres)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			return scanJobTimes(rows)
		},
		store: func(ctx context.Context) (weir.TaskStore, func(), error) {
			s, err := postgres.Open(ctx, f.schema.dsn())
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		},
		warnings: f.warnings,
		// The replicas stop gracefully before their schema is dropped.
		stop: func() { pool.Close(); f.stop() },
	}, nil
}

// waitWorkersLimit waits until the workers scope, as url's /admin/queues
// shows it, has limit n.
func waitWorkersLimit(ctx context.Context, url string, n int64, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last int64
	for {
		v, err := fetchQueues(url)
		if err != nil {
			return err
		}
		for _, s := range v.Scopes {
			if s.Name == task.WorkersScope {
				if last = s.Limit; last == n {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the fleet's %s limit is %d after %s, want %d (the sum of the replicas' tasks.workers)", task.WorkersScope, last, within, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling the leader's view
		}
	}
}

// drainBreakdown says where the time of each task's lease went.
func drainBreakdown(ctx context.Context, out io.Writer, r *tasksRig, store weir.TaskStore, start time.Time, drain time.Duration, c TasksConfig, jt map[string]jobTimes) error {
	tasks, err := store.TaskList(ctx, weir.TaskFilter{})
	if err != nil {
		return err
	}
	jobs := map[string]mock.JobInfo{}
	for _, j := range r.up.mock.Jobs() {
		jobs[j.IdempotencyKey] = j
	}
	var n int
	var dispatch, job, notice, held time.Duration
	var worstNotice time.Duration
	var split leaseSplit
	statuses := map[weir.TaskStatus]int{}
	spans := make([]leaseSpan, 0, len(tasks))
	for _, t := range tasks {
		statuses[t.Status]++
		j, ok := jobs[t.ID]
		if !ok || t.AdmittedAt.IsZero() || t.FinishedAt.IsZero() {
			continue
		}
		a, f := t.AdmittedAt, t.FinishedAt
		spans = append(spans, leaseSpan{a, f})
		n++
		dispatch += j.CreatedAt.Sub(a)
		job += j.EndsAt.Sub(j.CreatedAt)
		notice += f.Sub(j.EndsAt)
		worstNotice = max(worstNotice, f.Sub(j.EndsAt))
		held += f.Sub(a)
		split.add(t, j, jt[t.ID], r.up.polled(j.ID))
	}
	if n == 0 {
		return fmt.Errorf("no finished task to break down (statuses %v)", statuses)
	}
	mean := func(d time.Duration) string { return (d / time.Duration(n)).Round(100 * time.Microsecond).String() }
	capacityTime := time.Duration(c.Capacity) * drain
	idle := 1 - float64(held)/float64(capacityTime)
	ramp, between, tail := idleShares(spans, c.Capacity, start, start.Add(drain))
	fmt.Fprintf(out, "where  per task (mean of %d): admitted->upstream submit %s, upstream job %s, job end->gateway noticed %s (worst %s); capacity idle %.1f%% (ramp %.1f%%, between tasks %.1f%%, tail %.1f%%); statuses %v\n",
		n, mean(dispatch), mean(job), mean(notice), worstNotice.Round(time.Millisecond), 100*math.Max(idle, 0),
		100*ramp, 100*between, 100*tail, statuses)
	fmt.Fprintln(out, split.line())
	return nil
}

// fetchQueues reads the gateway's /admin/queues, which answers loopback
// connections without a token.
func fetchQueues(url string) (httpapi.QueueView, error) {
	var view httpapi.QueueView
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url + "/admin/queues")
	if err != nil {
		return view, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return view, fmt.Errorf("GET /admin/queues: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return view, json.NewDecoder(resp.Body).Decode(&view)
}
