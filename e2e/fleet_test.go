package e2e

// A fleet: several `weir serve` processes (replicas) on one PostgreSQL
// schema, each its own process with its own config file, joined by the
// config's fleet section. What only real processes show: limits exact
// across replicas, one order across them, and what kill -9, SIGSTOP, lost
// LISTEN connections and a PostgreSQL restart do to them.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/provider/mock"
)

// The fleet's timings in these tests: a leader's term runs 1s without
// renewal, a replica is gone after 2s without a heartbeat.
const (
	fleetTermTTL   = time.Second
	fleetHeartbeat = 2 * time.Second
)

// fleetRig is a fleet's replicas on one schema, and what each is
// started with.
type fleetRig struct {
	dsn     string
	app     string // the replicas' application_name, to find their connections
	catalog string
	dir     string
	timings fleetTimings
	// server is extra lines of each replica's server section, each
	// indented by two spaces and ending in a newline, or "".
	server string
	env    []string // added to each replica's environment
	rs     map[string]*gateway
}

// fleetTimings are a fleet's term TTL and heartbeat timeout.
type fleetTimings struct {
	termTTL, heartbeat time.Duration
}

// startFleet starts replicas r0 … r(n-1) on a new schema with catalog
// (the tasks section and the catalog, as startGateway takes).
func startFleet(t *testing.T, n int, catalog string) *fleetRig {
	t.Helper()
	return startFleetWith(t, n, catalog, fleetTimings{fleetTermTTL, fleetHeartbeat})
}

// startFleetWith is startFleet with other timings.
func startFleetWith(t *testing.T, n int, catalog string, timings fleetTimings) *fleetRig {
	t.Helper()
	return startFleetServer(t, n, "", catalog, timings)
}

// startFleetServer is startFleetWith with server, extra lines of each
// replica's server section (fleetRig.server).
func startFleetServer(t *testing.T, n int, server, catalog string, timings fleetTimings) *fleetRig {
	t.Helper()
	return startFleetEnv(t, n, nil, server, catalog, timings)
}

// startFleetEnv is startFleetServer with env (KEY=value) added to each
// replica's environment.
func startFleetEnv(t *testing.T, n int, env []string, server, catalog string, timings fleetTimings) *fleetRig {
	t.Helper()
	dsn := pgtest.Schema(t)
	// Unique across the tests running at once: a test that ends
	// connections by application_name must end only its own fleet's.
	app := fmt.Sprintf("weir-e2e-%x", rand.Uint64())
	f := &fleetRig{dsn: withParam(dsn, "application_name", app), app: app, catalog: catalog, dir: t.TempDir(),
		timings: timings, server: server, env: env, rs: make(map[string]*gateway)}
	for i := range n {
		f.start(t, fmt.Sprintf("r%d", i))
	}
	return f
}

// withParam adds a connection parameter to a URL or key=value DSN.
func withParam(dsn, k, v string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + k + "=" + v
	}
	return dsn + " " + k + "=" + v
}

// start launches replica id (again, after it stopped: same config).
func (f *fleetRig) start(t *testing.T, id string) *gateway {
	t.Helper()
	return f.startBin(t, id, "")
}

// startBin is start with another weir binary ("" for weirBin).
func (f *fleetRig) startBin(t *testing.T, id, bin string) *gateway {
	t.Helper()
	g := &gateway{Config: filepath.Join(f.dir, id+".yaml"), DB: filepath.Join(f.dir, id+".db"), exited: make(chan struct{}), bin: bin, env: f.env}
	text := fmt.Sprintf(`server:
  listen: 127.0.0.1:0
  log_level: info
  default_max_wait: 60s
%sstorage:
  driver: postgres
  dsn: %q
fleet:
  replica: %s
  listen: 127.0.0.1:0
  term_ttl: %s
  heartbeat_timeout: %s
  poll: 500ms

%s
`, f.server, f.dsn, id, f.timings.termTTL, f.timings.heartbeat, f.catalog)
	if err := os.WriteFile(g.Config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	g.launch(t, "replica "+id)
	f.rs[id] = g
	return g
}

// ids lists the replicas started, in order.
func (f *fleetRig) ids() []string {
	ids := make([]string, 0, len(f.rs))
	for id := range f.rs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// leading reports whether replica g says it leads (weir_fleet_leader).
func leading(g *gateway) bool {
	resp, err := client.Get(g.URL + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	v, ok := metric(string(b), "weir_fleet_leader")
	return ok && v == 1
}

// leader waits until exactly one of the replicas given (default all)
// says it leads, and returns its id.
func (f *fleetRig) leader(t *testing.T, within time.Duration, among ...string) string {
	t.Helper()
	if len(among) == 0 {
		among = f.ids()
	}
	var id string
	waitFor(t, within, "one replica to lead", func() bool {
		var ls []string
		for _, r := range among {
			if leading(f.rs[r]) {
				ls = append(ls, r)
			}
		}
		if len(ls) == 1 {
			id = ls[0]
		}
		return len(ls) == 1
	})
	return id
}

// queuesAgree checks that `weir queues` on every replica shows the same
// fleet: one term and leader, every replica live, the asked one named.
func (f *fleetRig) queuesAgree(t *testing.T) {
	t.Helper()
	leader := f.leader(t, 10*time.Second)
	var term string
	for _, id := range f.ids() {
		out := runWeir(t, "queues", "--addr", f.rs[id].URL)
		first, _, _ := strings.Cut(out, "\n")
		head, asked, ok := strings.Cut(first, "; asked replica ")
		if !ok || !strings.HasPrefix(head, "fleet: epoch ") || !strings.HasSuffix(head, ", leader "+leader) {
			t.Fatalf("weir queues on %s begins %q; want the fleet's term with leader %s", id, first, leader)
		}
		if term == "" {
			term = head
		} else if head != term {
			t.Errorf("weir queues on %s says %q, another replica %q", id, head, term)
		}
		state := "(synced with the leader)"
		if id == leader {
			state = "(leading)"
		}
		if asked != id+" "+state {
			t.Errorf("weir queues on %s says it asked %q; want %q", id, asked, id+" "+state)
		}
		for _, r := range f.ids() {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(r) + ` +\d+ +\d+ +\S+ ago$`).MatchString(out) {
				t.Errorf("weir queues on %s lists no live replica %s:\n%s", id, r, out)
			}
		}
	}
}

// ready waits until every replica given answers /readyz with 200.
func (f *fleetRig) ready(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		g := f.rs[id]
		waitFor(t, 20*time.Second, id+" ready", func() bool {
			resp, err := client.Get(g.URL + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
}

// idle waits until scope holds nothing and queues nothing, as each
// replica given sees it.
func (f *fleetRig) idle(t *testing.T, scope string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		g := f.rs[id]
		waitFor(t, 10*time.Second, scope+" idle as "+id+" sees it", func() bool {
			s := g.scope(t, scope)
			return s.InFlight == 0 && s.Waiting == 0 && s.Leases == 0
		})
	}
}

// chatFleetCatalog serves model "chat" from up through one platform
// model, "up/chat", of the given concurrency.
func chatFleetCatalog(upURL string, concurrency int) string {
	return fmt.Sprintf(`platforms:
  - name: up
    base_url: %s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
    concurrency: %d
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
`, upURL, concurrency)
}

const chatScope = "pm:up/chat"

// fleetLoad sends requests through a fleet's replicas and keeps their
// answers.
type fleetLoad struct {
	wg sync.WaitGroup
	mu sync.Mutex
	// by status; status 0 counts transport errors.
	statuses map[int]int
	errs     []string
}

func newFleetLoad() *fleetLoad { return &fleetLoad{statuses: make(map[int]int)} }

// do sends r through g and records its answer.
func (l *fleetLoad) do(g *gateway, r request) {
	rep, err := g.send(context.Background(), r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.statuses[0]++
		l.errs = append(l.errs, err.Error())
		return
	}
	l.statuses[rep.Status]++
	if rep.Status != http.StatusOK {
		l.errs = append(l.errs, fmt.Sprintf("%d %s", rep.Status, rep.Body))
	}
}

// send is do in the background; wait waits for every send.
func (l *fleetLoad) send(g *gateway, r request) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.do(g, r)
	}()
}

func (l *fleetLoad) wait() {
	l.wg.Wait()
}

// flood keeps workers senders per replica of ids sending chat requests
// with key, one after another, until the returned stop is called; stop
// waits for them.
func (l *fleetLoad) flood(f *fleetRig, ids []string, key string, workers int) (stop func()) {
	done := make(chan struct{})
	var senders sync.WaitGroup
	for _, id := range ids {
		g := f.rs[id]
		for w := range workers {
			senders.Add(1)
			go func() {
				defer senders.Done()
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					default:
					}
					l.do(g, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("%s-%d-%d", id, w, i)})
				}
			}()
		}
	}
	return func() {
		close(done)
		senders.Wait()
	}
}

func (l *fleetLoad) result() (map[int]int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.statuses), slices.Clone(l.errs)
}

// TestFleetExactAndFairAcrossReplicas: three replicas, one platform
// model of concurrency 5 behind a mock that takes 100ms, 600 requests
// from 10 keys spread over the replicas. The mock never serves more than
// 5 at once (and does serve 5); a higher priority goes first across
// replicas; keys of the same priority take turns across replicas; every
// request is served, and the scope ends holding and queueing nothing on
// every replica.
func TestFleetExactAndFairAcrossReplicas(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: 100 * time.Millisecond})
	f := startFleet(t, 3, chatFleetCatalog(up.URL, 5))
	ids := f.ids()
	f.ready(t, ids...)
	keys := make([]string, 10)
	for i := range keys {
		_, keys[i] = f.rs[ids[0]].createKey(t, "--name", fmt.Sprintf("k%d", i))
	}
	f.queuesAgree(t)
	load := newFleetLoad()
	n := 0
	send := func(key int, tag string, prio string) {
		r := request{Path: "/v1/chat/completions", Key: keys[key], Body: chatBody("chat"),
			Agent: fmt.Sprintf("%s-k%d-%d", tag, key, n)}
		if prio != "" {
			r.Header = map[string]string{"X-Weir-Priority": prio}
		}
		load.send(f.rs[ids[n%len(ids)]], r)
		n++
	}
	// queued waits until the fleet has seen total requests: served,
	// running, or queued.
	queued := func(total int) {
		waitFor(t, 20*time.Second, fmt.Sprintf("%d requests in the fleet", total), func() bool {
			s := f.rs[ids[0]].scope(t, chatScope)
			st := up.Mock.Stats()
			return int(st.Requests)+int(st.InFlight)+s.Waiting >= total
		})
	}

	// 300 of a lower priority from keys 0-4; then 200 of the default
	// from key 5; then 25 each from keys 6-9.
	for i := range 300 {
		send(i%5, "lo", "-1")
	}
	queued(300)
	for range 200 {
		send(5, "hi", "")
	}
	queued(500)
	for i := range 100 {
		send(6+i%4, "hi", "")
	}
	load.wait()

	statuses, errs := load.result()
	if statuses[http.StatusOK] != 600 {
		t.Fatalf("answers %v; want 600 × 200 (first errors: %v)", statuses, errs[:min(len(errs), 5)])
	}
	if st := up.Mock.Stats(); st.PeakInFlight != 5 {
		t.Errorf("the mock's peak concurrency %d; want exactly the limit, 5", st.PeakInFlight)
	}
	arrivals := up.Arrivals()
	lastHi, lastOthers := -1, -1
	for i, a := range arrivals {
		if strings.HasPrefix(a, "hi-") {
			lastHi = i
		}
		if strings.HasPrefix(a, "hi-k") && !strings.HasPrefix(a, "hi-k5-") {
			lastOthers = i
		}
	}
	// Once the default-priority requests queue, no lower one goes
	// first: nearly every low one is served after the last of them.
	loAfter, k5After := 0, 0
	for _, a := range arrivals[lastHi+1:] {
		if strings.HasPrefix(a, "lo-") {
			loAfter++
		}
	}
	if loAfter < 200 {
		t.Errorf("%d of 300 lower-priority requests served after the last default one; want at least 200", loAfter)
	}
	// Keys 6-9 take turns with key 5, whose 200 came first: theirs are
	// all served while most of key 5's still wait.
	for _, a := range arrivals[lastOthers+1:] {
		if strings.HasPrefix(a, "hi-k5-") {
			k5After++
		}
	}
	if k5After < 100 {
		t.Errorf("%d of key 5's 200 requests served after the last of keys 6-9; want at least 100 (keys take turns)", k5After)
	}
	f.idle(t, chatScope, ids...)
}

// TestFleetReplicaKilled: kill -9 of a replica (not the leader) that
// holds both slots of a scope gives them back within the heartbeat
// timeout: a request waiting on another replica is then served.
func TestFleetReplicaKilled(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	f := startFleet(t, 3, chatFleetCatalog(up.URL, 2))
	ids := f.ids()
	f.ready(t, ids...)
	lead := f.leader(t, 20*time.Second)
	others := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == lead })
	victim, waiter := f.rs[others[0]], f.rs[others[1]]
	_, key := victim.createKey(t, "--name", "kill")

	ctx := t.Context()
	for i := range 2 {
		_ = victim.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("victim-%d", i)})
	}
	waitFor(t, 10*time.Second, "the victim's two requests upstream", func() bool { return up.Mock.Stats().InFlight == 2 })
	waiting := waiter.sendAsync(ctx, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: "waiter"})
	waitFor(t, 10*time.Second, "a request queued on another replica", func() bool { return waiter.scope(t, chatScope).Waiting == 1 })

	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-victim.exited
	took := waitFor(t, 3*fleetHeartbeat, "the waiting request upstream", func() bool {
		return slices.Contains(up.Arrivals(), "waiter")
	})
	if took > fleetHeartbeat+time.Second {
		t.Errorf("the killed replica's capacity came back %s after kill -9; want within the heartbeat timeout (%s) and a little", time.Since(killed).Round(time.Millisecond), fleetHeartbeat)
	}
	up.hold.Store(false)
	up.release(t)
	if rep := await(t, waiting); rep.Status != http.StatusOK {
		t.Fatalf("the waiting request: %d %s", rep.Status, rep.Body)
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 2 {
		t.Errorf("the mock's peak concurrency %d; want at most the limit, 2", st.PeakInFlight)
	}
	delete(f.rs, others[0])
	f.idle(t, chatScope, lead, others[1])
}

// TestFleetReplicaKilledTasksFinishElsewhere: kill -9 of a replica that
// runs task jobs: the fleet takes its jobs back once its heartbeats
// lapse, and every task finishes on the others, once, with one upstream
// job each.
func TestFleetReplicaKilledTasksFinishElsewhere(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{JobDuration: 3 * time.Second})
	f := startFleet(t, 3, videoCatalog(up.URL, taskOptions{Workers: 2}))
	ids := f.ids()
	f.ready(t, ids...)
	lead := f.leader(t, 20*time.Second)
	g := f.rs[lead]
	_, key := g.createKey(t, "--name", "tasks")
	var tasks []string
	for i := range 6 {
		o, st := g.submitTask(t, key, taskBody(fmt.Sprintf("a heron, take %d", i), ""), fmt.Sprintf("kill-%d", i))
		if st != http.StatusAccepted {
			t.Fatalf("submission %d: %d", i, st)
		}
		tasks = append(tasks, o.ID)
	}
	// The victim: a replica other than the leader that runs a job.
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var victim string
	waitFor(t, 20*time.Second, "a replica other than the leader running a job", func() bool {
		rows, err := conn.Query(t.Context(), `SELECT attempted_by[array_length(attempted_by, 1)] FROM river_job
			WHERE kind = 'weir_task_run' AND state = 'running'`)
		if err != nil {
			t.Fatal(err)
		}
		by, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range by {
			if r != lead && f.rs[r] != nil {
				victim = r
				return true
			}
		}
		return false
	})
	if err := f.rs[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-f.rs[victim].exited
	delete(f.rs, victim)

	done := g.waitTerminal(t, key, tasks, 60*time.Second)
	for _, id := range tasks {
		if done[id].Status != "succeeded" {
			t.Errorf("task %s ended %s (%+v); want succeeded", id, done[id].Status, done[id].Error)
		}
	}
	if st := up.Mock.Stats(); st.JobsSubmitted != int64(len(tasks)) {
		t.Errorf("%d upstream jobs for %d tasks; want one each", st.JobsSubmitted, len(tasks))
	}
}

// TestFleetPausedLeaderIsReplaced: SIGSTOP of the leader past its term:
// another replica takes over and serves; on SIGCONT the old leader finds
// itself fenced and stops, granting nothing late, and the mock never
// serves more than the limit.
func TestFleetPausedLeaderIsReplaced(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: 200 * time.Millisecond})
	f := startFleet(t, 3, chatFleetCatalog(up.URL, 3))
	ids := f.ids()
	f.ready(t, ids...)
	lead := f.leader(t, 20*time.Second)
	others := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == lead })
	_, key := f.rs[others[0]].createKey(t, "--name", "pause")

	// Steady load through the other two until told to stop.
	load := newFleetLoad()
	stop := load.flood(f, others, key, 4)
	waitFor(t, 10*time.Second, "load flowing", func() bool { return up.Mock.Stats().Requests >= 10 })

	old := f.rs[lead]
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next := f.leader(t, 20*time.Second, others...)
	served := up.Mock.Stats().Requests
	waitFor(t, 20*time.Second, "requests served under the new leader", func() bool { return up.Mock.Stats().Requests >= served+20 })
	// Past the heartbeat timeout, the new leader has forgotten the old
	// one: on SIGCONT its next heartbeat finds it fenced.
	waitFor(t, 20*time.Second, "the old leader forgotten", func() bool {
		return f.logCountAll(others, "fleet: a replica's heartbeats lapsed; it is fenced") > 0
	})
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.exited:
		if old.err == nil {
			t.Errorf("the fenced old leader exited cleanly; want a failure exit")
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the old leader, fenced, still runs 20s after SIGCONT")
	}
	delete(f.rs, lead)
	served = up.Mock.Stats().Requests
	waitFor(t, 20*time.Second, "requests served after the old leader came back", func() bool { return up.Mock.Stats().Requests >= served+20 })
	stop()

	statuses, errs := load.result()
	if statuses[http.StatusOK] == 0 || statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable] != sum(statuses) {
		t.Errorf("answers through the replicas that kept running: %v; want 200s (503 store_unavailable at worst) (first errors: %v)", statuses, errs[:min(len(errs), 5)])
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 3 {
		t.Errorf("the mock's peak concurrency %d; want at most the limit, 3", st.PeakInFlight)
	}
	if !leading(f.rs[next]) {
		t.Errorf("%s no longer leads after the old leader came back", next)
	}
	f.idle(t, chatScope, others...)
}

func sum(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// logCountAll counts msg in the logs of the replicas given.
func (f *fleetRig) logCountAll(ids []string, msg string) int {
	n := 0
	for _, id := range ids {
		n += f.rs[id].logCount(msg)
	}
	return n
}

// terminateListeners ends, from PostgreSQL's side, every connection of
// the fleet's that is LISTENing (or last ran a LISTEN), and returns how
// many it ended.
func (f *fleetRig) terminateListeners(t *testing.T) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.BaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query ILIKE '%listen%'`, f.app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFleetListenersTerminated: with requests queued across two
// replicas, PostgreSQL ends every replica's LISTEN connection: no waiter
// is lost or served twice, and admissions go on.
func TestFleetListenersTerminated(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{Latency: 100 * time.Millisecond})
	f := startFleet(t, 2, chatFleetCatalog(up.URL, 2))
	ids := f.ids()
	f.ready(t, ids...)
	_, key := f.rs[ids[0]].createKey(t, "--name", "listen")
	load := newFleetLoad()
	for i := range 100 {
		load.send(f.rs[ids[i%2]], request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("req-%d", i)})
	}
	waitFor(t, 10*time.Second, "requests queued", func() bool { return f.rs[ids[0]].scope(t, chatScope).Waiting >= 50 })
	if n := f.terminateListeners(t); n < len(ids) {
		t.Fatalf("ended %d LISTEN connections; want at least one per replica (%d)", n, len(ids))
	}
	load.wait()
	statuses, errs := load.result()
	if statuses[http.StatusOK] != 100 {
		t.Fatalf("answers %v; want 100 × 200 (first errors: %v)", statuses, errs[:min(len(errs), 5)])
	}
	arrivals := up.Arrivals()
	if len(arrivals) != 100 {
		t.Errorf("%d requests reached the mock; want 100, each once", len(arrivals))
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 2 {
		t.Errorf("the mock's peak concurrency %d; want at most the limit, 2", st.PeakInFlight)
	}
	f.idle(t, chatScope, ids...)
}

// TestFleetPostgresRestart: with requests queued across two replicas,
// PostgreSQL restarts: no waiter is lost or served twice, and admissions
// resume once it is back. It restarts the machine's PostgreSQL, which
// every other test shares, so it runs only when WEIR_TEST_PG_RESTART=1,
// alone (.ci/run runs it after the suite).
func TestFleetPostgresRestart(t *testing.T) {
	if os.Getenv("WEIR_TEST_PG_RESTART") != "1" {
		t.Skip("restarts the shared PostgreSQL: set WEIR_TEST_PG_RESTART=1 and run it alone")
	}
	versions, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(versions) == 0 {
		t.Fatalf("no PostgreSQL cluster to restart under /etc/postgresql: %v", err)
	}
	up := startUpstream(t, mock.Config{Latency: 100 * time.Millisecond})
	f := startFleet(t, 2, chatFleetCatalog(up.URL, 2))
	ids := f.ids()
	f.ready(t, ids...)
	_, key := f.rs[ids[0]].createKey(t, "--name", "restart")
	// Each replica has seen the key once (GET /v1/models reaches no
	// upstream), so that it may serve it while PostgreSQL is down: a key
	// a replica never saw is 503 store_unavailable then, and the burst's
	// first lookups would be in flight during the restart.
	for _, id := range ids {
		if rep := f.rs[id].do(t, request{Method: http.MethodGet, Path: "/v1/models", Key: key}); rep.Status != http.StatusOK {
			t.Fatalf("GET /v1/models on %s: %d %s", id, rep.Status, rep.Body)
		}
	}
	load := newFleetLoad()
	for i := range 100 {
		load.send(f.rs[ids[i%2]], request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat"), Agent: fmt.Sprintf("req-%d", i)})
	}
	waitFor(t, 10*time.Second, "requests queued", func() bool { return f.rs[ids[0]].scope(t, chatScope).Waiting >= 50 })
	restart := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", versions[0].Name(), "main", "restart")
	if out, err := restart.CombinedOutput(); err != nil {
		t.Fatalf("restart PostgreSQL: %v\n%s", err, out)
	}
	load.wait()
	statuses, errs := load.result()
	if statuses[http.StatusOK] != 100 {
		t.Fatalf("answers %v; want 100 × 200 (first errors: %v)", statuses, errs[:min(len(errs), 5)])
	}
	if n := len(up.Arrivals()); n != 100 {
		t.Errorf("%d requests reached the mock; want 100, each once", n)
	}
	if st := up.Mock.Stats(); st.PeakInFlight > 2 {
		t.Errorf("the mock's peak concurrency %d; want at most the limit, 2", st.PeakInFlight)
	}
	for _, id := range ids {
		select {
		case <-f.rs[id].exited:
			t.Errorf("replica %s exited across the restart: %v", id, f.rs[id].err)
		default:
		}
	}
	f.idle(t, chatScope, ids...)
}
