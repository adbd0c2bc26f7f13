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
	body := `{"model":"` + model + `","input":{"messages":[{"role":"user","content":"hi"}]}}`
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
		t.Fatalf("submit a task of %s: %d, %+v, %v; want 202 and an id", model, resp.StatusCode, out, err)
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

// TestFleetTaskOnALeftPlatformModel: a task queued on platform model
// up/x at the fleet's leader, which has not taken the version that
// replaces up/x with up/y, while the other replica takes it. When the
// task is admitted to up/x (the leader still serves it, and the fleet
// keeps its scope) and its job runs at the replica that took the
// version, it runs there on up/x, as at the leader: it does not fail
// for a platform model that replica no longer serves.
func TestFleetTaskOnALeftPlatformModel(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	dsn := pgtest.Schema(t)
	up := startHeldUpstream(t, "hold1", "hold2")
	path := filepath.Join(t.TempDir(), "weir.yaml")
	if err := os.WriteFile(path, taskFleetFile(dsn, up.URL, "up/x", "x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r0 := startFleetMain(t, path, "r0")
	r1 := startFleetMain(t, path, "r1")
	ctx := t.Context()
	readyCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, r := range []*Main{r0, r1} {
		if err := r.Member.Ready(readyCtx); err != nil {
			t.Fatal(err)
		}
	}
	leader, other := r0, r1
	if _, leading := r1.Member.Term(); leading {
		leader, other = r1, r0
	}
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ended := make(chan string, 64)
	listenCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	go func() {
		_ = db.ListenTasks(listenCtx, func(event, id string) {
			select {
			case ended <- id:
			default:
			}
		})
	}()
	secret, err := CreateKey(ctx, r0.DB, &weir.APIKey{Name: "k", Group: "default"})
	if err != nil {
		t.Fatal(err)
	}

	// Two held tasks take the fleet's two workers, one at each replica
	// (each runs one task at a time).
	held := map[string]string{"hold1": submitTask(t, other, secret, "hold1"), "hold2": submitTask(t, other, secret, "hold2")}
	up.arrive(t, "hold1")
	up.arrive(t, "hold2")
	heldAtOther := "hold1"
	if ranBy(t, db, held["hold1"]) != other.Member.Replica() {
		heldAtOther = "hold2"
	}
	if by := ranBy(t, db, held[heldAtOther]); by != other.Member.Replica() {
		t.Fatalf("the held tasks run at %s and %s; want one at each replica", ranBy(t, db, held["hold1"]), by)
	}
	// A task of chat waits for a worker, on up/x.
	queued := submitTask(t, other, secret, "chat")

	// The other replica publishes a version that serves chat on up/y
	// alone, while the leader is held from taking it.
	leader.catalog.mu.Lock()
	holding := true
	defer func() {
		if holding {
			leader.catalog.mu.Unlock()
		}
	}()
	if v, published, err := other.catalog.PublishFile(ctx, taskFleetFile(dsn, up.URL, "up/y", "y"), "test"); err != nil || !published {
		t.Fatalf("publish version 2: %+v, %v, %v", v, published, err)
	}
	if tk, err := db.TaskGet(ctx, queued); err != nil || tk.Status != weir.TaskQueued {
		t.Fatalf("the chat task once the other replica took version 2: %+v, %v; want it queued", tk, err)
	}

	// The other replica's held task ends: the leader admits the queued
	// one to up/x, and its job can run only at the other replica.
	up.gates[heldAtOther].release()
	var tk weir.Task
	for done := false; !done; {
		select {
		case id := <-ended:
			if id != queued {
				continue
			}
			if tk, err = db.TaskGet(ctx, queued); err != nil {
				t.Fatal(err)
			}
			done = tk.Status.Terminal()
		case <-time.After(20 * time.Second):
			tk, err = db.TaskGet(ctx, queued)
			t.Fatalf("the chat task did not end: %+v, %v", tk, err)
		}
	}
	if by := ranBy(t, db, queued); by != other.Member.Replica() {
		t.Fatalf("the chat task's job ran at %s; want the other replica, %s", by, other.Member.Replica())
	}
	if tk.Status != weir.TaskSucceeded || tk.PlatformModel != "up/x" || up.count("x") != 1 {
		t.Errorf("the chat task: %s on %s (%s: %s), %d calls of up/x; want succeeded on up/x, at the replica that took version 2",
			tk.Status, tk.PlatformModel, tk.ErrorCode, tk.ErrorMessage, up.count("x"))
	}

	// The leader takes version 2: up/x is retired once every replica
	// serves it.
	holding = false
	leader.catalog.mu.Unlock()
	up.releaseAll()
	leader.catalog.catchUp(ctx)
	if st := leader.catalog.State(); st.Version != 2 {
		t.Fatalf("the leader serves version %d; want 2", st.Version)
	}
	if _, err := leader.Engine.Scope(ctx, weir.PlatformModelScope("up/x")); !errors.Is(err, admission.ErrUnknownScope) {
		t.Errorf("up/x once every replica serves version 2: %v; want it retired", err)
	}
}
