package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/pgtest"
	"github.com/weir-gateway/weir/postgres"
	"github.com/weir-gateway/weir/provider/mock"
)

// heldUpstream is the mock provider, but that a call for an upstream
// model that has a gate says so on its arrived and is answered only once
// that gate opens; calls counts the calls of each upstream model.
type heldUpstream struct {
	*httptest.Server
	gates   map[string]*upstreamGate
	mu      sync.Mutex
	calls   map[string]int
	openAll sync.Once
}

type upstreamGate struct {
	arrived chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *upstreamGate) release() { g.once.Do(func() { close(g.open) }) }

func startHeldUpstream(t *testing.T, held ...string) *heldUpstream {
	t.Helper()
	u := &heldUpstream{gates: make(map[string]*upstreamGate), calls: make(map[string]int)}
	for _, model := range held {
		u.gates[model] = &upstreamGate{arrived: make(chan struct{}, 4), open: make(chan struct{})}
	}
	answer := mock.New(mock.Config{})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		u.mu.Lock()
		u.calls[req.Model]++
		u.mu.Unlock()
		if g := u.gates[req.Model]; g != nil {
			g.arrived <- struct{}{}
			select {
			case <-g.open:
			case <-r.Context().Done():
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		answer.ServeHTTP(w, r)
	}))
	// Before the replicas stop (cleanups run last first): their task
	// jobs wait for the calls in flight.
	t.Cleanup(u.Close)
	t.Cleanup(u.releaseAll)
	return u
}

func (u *heldUpstream) releaseAll() {
	u.openAll.Do(func() {
		for _, g := range u.gates {
			g.release()
		}
	})
}

func (u *heldUpstream) count(model string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[model]
}

// arrive waits for a held call of upstream model.
func (u *heldUpstream) arrive(t *testing.T, model string) {
	t.Helper()
	select {
	case <-u.gates[model].arrived:
	case <-time.After(20 * time.Second):
		t.Fatalf("no call of %s reached the upstream", model)
	}
}

// taskFleetFile is a fleet config file on dsn whose replicas run one
// task at a time each (tasks.workers 1): models hold1 and hold2 on
// platform models of their own, and model chat on platform model pm
// (upstream model upstream).
func taskFleetFile(dsn, up, pm, upstream string) []byte {
	return fmt.Appendf(nil, `server:
  listen: 127.0.0.1:0
storage:
  driver: postgres
  dsn: %q
tasks:
  workers: 1
platforms:
  - name: up
    base_url: %s/v1
platform_models:
  - name: up/hold1
    platform: up
    upstream: hold1
  - name: up/hold2
    platform: up
    upstream: hold2
  - name: %s
    platform: up
    upstream: %s
models:
  - name: hold1
    kind: chat
    candidates:
      - platform_model: up/hold1
  - name: hold2
    kind: chat
    candidates:
      - platform_model: up/hold2
  - name: chat
    kind: chat
    candidates:
      - platform_model: %s
`, dsn, up, pm, upstream, pm)
}

// submitTask submits a chat task of model through m with key secret and
// returns its id.
func submitTask(t *testing.T, m *Main, secret, model string) string {
	t.Helper()
	return postTask(t, m, secret, `{"model":"`+model+`","input":{"messages":[{"role":"user","content":"hi"}]}}`)
}

// postTask submits the task body says through m with key secret and
// returns its id.
func postTask(t *testing.T, m *Main, secret, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+m.Addr()+"/v1/tasks", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusAccepted || out.ID == "" {
		t.Fatalf("submit the task %s: %d, %+v, %v; want 202 and an id", body, resp.StatusCode, out, err)
	}
	return out.ID
}

// ranBy is the replica whose River client last took task id's job.
func ranBy(t *testing.T, db *postgres.DB, id string) string {
	t.Helper()
	var by []string
	if err := db.Pool().QueryRow(t.Context(), `SELECT attempted_by FROM river_job
		WHERE kind = 'weir_task_run' AND args->>'task_id' = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&by); err != nil {
		t.Fatalf("the job of task %s: %v", id, err)
	}
	if len(by) == 0 {
		return ""
	}
	return by[len(by)-1]
}

// taskFleet is two replicas on PostgreSQL serving taskFleetFile's
// version 1 (chat on up/x), each of whose one task worker is held by a
// task of its own (hold1 and hold2, held at the upstream), and a chat
// task queued at the leader on up/x for a worker: what the fleet tests
// of tasks and catalog versions start from.
type taskFleet struct {
	dsn           string
	up            *heldUpstream
	leader, other *Main
	db            *postgres.DB
	// heldAtOther is the held model whose task the other replica runs.
	heldAtOther string
	// queued is the chat task; ended says the ids of the tasks the
	// store tells of (their notices).
	queued string
	ended  chan string
}

func startTaskFleet(t *testing.T) *taskFleet {
	t.Helper()
	pgtest.Require(t)
	f := &taskFleet{dsn: pgtest.Schema(t), up: startHeldUpstream(t, "hold1", "hold2"), ended: make(chan string, 64)}
	path := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(path, taskFleetFile(f.dsn, f.up.URL, "up/x", "x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.leader, f.other = startLedFleet(t, path)
	ctx := t.Context()
	var err error
	if f.db, err = postgres.Open(ctx, f.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Close() })
	listenCtx, stopListening := context.WithCancel(context.Background())
	t.Cleanup(stopListening)
	go func() {
		_ = f.db.ListenTasks(listenCtx, func(event, id string) {
			select {
			case f.ended <- id:
			default:
			}
		})
	}()
	secret, err := CreateKey(ctx, f.leader.DB, &weir.APIKey{Name: "k", Group: "default"})
	if err != nil {
		t.Fatal(err)
	}
	// Two held tasks take the fleet's two workers, one at each replica
	// (each runs one task at a time).
	held := map[string]string{"hold1": submitTask(t, f.other, secret, "hold1"), "hold2": submitTask(t, f.other, secret, "hold2")}
	f.up.arrive(t, "hold1")
	f.up.arrive(t, "hold2")
	f.heldAtOther = "hold1"
	if ranBy(t, f.db, held["hold1"]) != f.other.Member.Replica() {
		f.heldAtOther = "hold2"
	}
	if by := ranBy(t, f.db, held[f.heldAtOther]); by != f.other.Member.Replica() {
		t.Fatalf("the held tasks run at %s and %s; want one at each replica", ranBy(t, f.db, held["hold1"]), by)
	}
	f.queued = submitTask(t, f.other, secret, "chat")
	return f
}

// hold keeps c from taking a version until the returned func is called
// (once, or at the test's end).
func hold(t *testing.T, c *fleetCatalog) func() {
	c.mu.Lock()
	var once sync.Once
	unlock := func() { once.Do(c.mu.Unlock) }
	t.Cleanup(unlock)
	return unlock
}

// publish publishes version 2 through r: chat on up/y alone.
func (f *taskFleet) publish(t *testing.T, r *Main) {
	t.Helper()
	if v, published, err := r.catalog.PublishFile(t.Context(), taskFleetFile(f.dsn, f.up.URL, "up/y", "y"), "test"); err != nil || !published {
		t.Fatalf("publish version 2: %+v, %v, %v", v, published, err)
	}
	if tk, err := f.db.TaskGet(t.Context(), f.queued); err != nil || tk.Status != weir.TaskQueued {
		t.Fatalf("the chat task once version 2 is published: %+v, %v; want it queued", tk, err)
	}
}

// runAtOther ends the other replica's held task: the leader admits the
// chat task, and its job can run only at the other replica.
func (f *taskFleet) runAtOther() { f.up.gates[f.heldAtOther].release() }

// end waits for the chat task to end, and checks its job ran at the
// other replica.
func (f *taskFleet) end(t *testing.T) weir.Task {
	t.Helper()
	for {
		select {
		case id := <-f.ended:
			if id != f.queued {
				continue
			}
			tk, err := f.db.TaskGet(t.Context(), f.queued)
			if err != nil {
				t.Fatal(err)
			}
			if !tk.Status.Terminal() {
				continue
			}
			if by := ranBy(t, f.db, f.queued); by != f.other.Member.Replica() {
				t.Fatalf("the chat task's job ran at %s; want the other replica, %s", by, f.other.Member.Replica())
			}
			return tk
		case <-time.After(20 * time.Second):
			tk, err := f.db.TaskGet(t.Context(), f.queued)
			t.Fatalf("the chat task did not end: %+v, %v", tk, err)
		}
	}
}

// TestFleetTaskOnALeftPlatformModel: the chat task queued at the leader
// on up/x, which the leader serves still, while the other replica takes
// a version that replaces up/x with up/y. When the task is admitted to
// up/x (the fleet keeps its scope) and its job runs at the replica that
// took the version, it runs there on up/x, as at the leader: it does not
// fail for a platform model that replica no longer serves. Once the
// leader takes the version, up/x is retired.
func TestFleetTaskOnALeftPlatformModel(t *testing.T) {
	t.Parallel()
	f := startTaskFleet(t)
	ctx := t.Context()
	unhold := hold(t, f.leader.catalog)
	f.publish(t, f.other)
	f.runAtOther()
	tk := f.end(t)
	if tk.Status != weir.TaskSucceeded || tk.PlatformModel != "up/x" || f.up.count("x") != 1 {
		t.Errorf("the chat task: %s on %s (%s: %s), %d calls of up/x; want succeeded on up/x, at the replica that took version 2",
			tk.Status, tk.PlatformModel, tk.ErrorCode, tk.ErrorMessage, f.up.count("x"))
	}
	unhold()
	f.up.releaseAll()
	f.leader.catalog.catchUp(ctx)
	if st := f.leader.catalog.State(); st.Version != 2 {
		t.Fatalf("the leader serves version %d; want 2", st.Version)
	}
	if _, err := f.leader.Engine.Scope(ctx, weir.PlatformModelScope("up/x")); !errors.Is(err, admission.ErrUnknownScope) {
		t.Errorf("up/x once every replica serves version 2: %v; want it retired", err)
	}
}

// TestFleetTaskOnAnAddedPlatformModel: the leader takes a version that
// replaces up/x with up/y, and moves the chat task queued on up/x there,
// while the other replica is held from taking it. When the task is
// admitted to up/y and its job runs at the other replica, which knows no
// up/y yet, the job waits for it (task.Config.TargetWait) rather than
// fail the task, and runs on up/y once that replica takes the version.
func TestFleetTaskOnAnAddedPlatformModel(t *testing.T) {
	t.Parallel()
	f := startTaskFleet(t)
	ctx := t.Context()
	unhold := hold(t, f.other.catalog)
	f.publish(t, f.leader)
	f.runAtOther()
	deadline := time.Now().Add(20 * time.Second)
	for !f.snoozedAtOther(t) {
		if time.Now().After(deadline) {
			t.Fatal("the chat task's job was not tried at the other replica")
		}
		time.Sleep(10 * time.Millisecond) // a state of River's, which no event announces
	}
	unhold()
	f.other.catalog.catchUp(ctx)
	tk := f.end(t)
	if tk.Status != weir.TaskSucceeded || tk.PlatformModel != "up/y" || f.up.count("y") != 1 {
		t.Errorf("the chat task: %s on %s (%s: %s), %d calls of up/y; want succeeded on up/y, once the other replica took version 2",
			tk.Status, tk.PlatformModel, tk.ErrorCode, tk.ErrorMessage, f.up.count("y"))
	}
}

// snoozedAtOther reports whether the chat task's job was tried at the
// other replica and waits to run again; it fails the test if the task
// ended.
func (f *taskFleet) snoozedAtOther(t *testing.T) bool {
	t.Helper()
	tk, err := f.db.TaskGet(t.Context(), f.queued)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status.Terminal() {
		t.Fatalf("the chat task ended %s (%s: %s) while the replica running its job had not taken version 2; want it waiting",
			tk.Status, tk.ErrorCode, tk.ErrorMessage)
	}
	var state string
	var by []string
	err = f.db.Pool().QueryRow(t.Context(), `SELECT state, attempted_by FROM river_job
		WHERE kind = 'weir_task_run' AND args->>'task_id' = $1 ORDER BY id DESC LIMIT 1`, f.queued).Scan(&state, &by)
	if errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(by) > 0 && by[len(by)-1] == f.other.Member.Replica() && (state == "available" || state == "scheduled")
}
