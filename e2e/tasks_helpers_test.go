package e2e

// Shared pieces of the durable-task tests (tasks_*_test.go): a catalog
// with a video model, a gateway restarted on the same config and database
// after kill -9, a mock video upstream that can hold submits and polls, a
// webhook receiver that verifies what it gets, the task API, and a
// read-only look at the gateway's SQLite file (tasks and River's jobs).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver the read-only look at the gateway's database uses

	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/webhook"
)

// videoModel is the public name of the video model in videoCatalog.
const videoModel = "sora-2"

// videoPM is its one platform model, whose scope is "pm:"+videoPM.
const videoPM = "vid/sora-2"

// taskOptions is the tasks section of a test's config.
type taskOptions struct {
	Workers     int    // tasks.workers; 0: 8
	Concurrency int    // the platform model's concurrency; 0: no limit
	Secret      string // tasks.webhook_secret; "" for none
	Loopback    bool   // tasks.webhook_allow_loopback
	// MaxWait is tasks.max_wait; 0: the default.
	MaxWait time.Duration
}

// videoCatalog is a config's tasks section and a catalog serving
// videoModel from up. Polls start at 50ms and stay at most 250ms apart.
// A job that was mid-step when its process died is reclaimed when the
// gateway starts again (rescue_after would only matter to a replica that
// is not the store's sole runner).
func videoCatalog(upURL string, o taskOptions) string {
	if o.Workers == 0 {
		o.Workers = 8
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tasks:\n  workers: %d\n  poll_min: 50ms\n  poll_max: 250ms\n  rescue_after: 1m\n  lease_ttl: 5m\n", o.Workers)
	if o.MaxWait > 0 {
		fmt.Fprintf(&b, "  max_wait: %s\n", o.MaxWait)
	}
	if o.Secret != "" {
		fmt.Fprintf(&b, "  webhook_secret: %q\n", o.Secret)
	}
	fmt.Fprintf(&b, "  webhook_allow_loopback: %t\n", o.Loopback)
	fmt.Fprintf(&b, `
platforms:
  - name: vid
    base_url: %s
platform_models:
  - name: %s
    platform: vid
    upstream: sora-2
    concurrency: %d
models:
  - name: %s
    kind: video
    candidates:
      - platform_model: %s
`, upURL, videoPM, o.Concurrency, videoModel, videoPM)
	return b.String()
}

// newSecret returns a fresh Standard Webhooks secret and its signer.
func newSecret(t *testing.T) (string, *webhook.Signer) {
	t.Helper()
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return secret, signer
}

// kill9 kills the gateway's process with SIGKILL and waits for it to be
// gone.
func (g *gateway) kill9(t *testing.T) {
	t.Helper()
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-g.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("weir serve still running 10s after SIGKILL")
	}
}

// restart starts `weir serve` again on g's config, database and
// environment (after kill9) and waits until it serves. The new process is killed when the
// test ends. since is when the process was started.
func (g *gateway) restart(t *testing.T) (ng *gateway, since time.Time) {
	t.Helper()
	ng = &gateway{Config: g.Config, DB: g.DB, server: g.server, env: g.env, exited: make(chan struct{})}
	since = time.Now()
	ng.launch(t, "weir serve (restarted)")
	return ng, since
}

// holdMode says what videoUpstream does with a request.
type holdMode int

const (
	pass       holdMode = iota
	holdBefore          // hold it before the mock sees it; drop it if the caller goes away
	holdAfter           // let the mock act on it, hold the answer
)

// videoUpstream is the mock provider's video API served in the test
// process, recording the Idempotency-Key of every submit in arrival order
// and the job ids deleted, and holding the requests a rule picks until
// the test opens the gate or the caller (a killed gateway) goes away.
type videoUpstream struct {
	Mock *mock.Server
	URL  string // ends in /v1

	mu       sync.Mutex
	rule     func(r *http.Request, body []byte) holdMode
	submits  []string // Idempotency-Key of each POST /v1/videos as it arrived
	deletes  []string // job ids of each DELETE /v1/videos/{id}
	contents []string // path and query of each GET /v1/videos/{id}/content
	held     int
	gate     chan struct{} // closed by open
}

func startVideoUpstream(t *testing.T, cfg mock.Config) *videoUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &videoUpstream{Mock: mock.New(cfg), URL: "http://" + ln.Addr().String() + "/v1", gate: make(chan struct{})}
	srv := &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		u.open()
		_ = srv.Close()
	})
	return u
}

// setRule makes rule decide, for each later request, whether it is held.
func (u *videoUpstream) setRule(rule func(r *http.Request, body []byte) holdMode) {
	u.mu.Lock()
	u.rule = rule
	u.mu.Unlock()
}

// open drops the rule and lets every held request go.
func (u *videoUpstream) open() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rule = nil
	select {
	case <-u.gate:
	default:
		close(u.gate)
	}
}

// heldNow is how many requests are held.
func (u *videoUpstream) heldNow() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.held
}

func (u *videoUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	u.mu.Lock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/videos":
		u.submits = append(u.submits, r.Header.Get("Idempotency-Key"))
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/videos/"):
		u.deletes = append(u.deletes, strings.TrimPrefix(r.URL.Path, "/v1/videos/"))
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/content"):
		u.contents = append(u.contents, r.URL.RequestURI())
	}
	mode, gate := pass, u.gate
	if u.rule != nil {
		mode = u.rule(r, body)
	}
	if mode != pass {
		u.held++
	}
	u.mu.Unlock()
	unhold := func() {
		u.mu.Lock()
		u.held--
		u.mu.Unlock()
	}
	switch mode {
	case holdBefore:
		select {
		case <-gate:
			unhold()
			if r.Context().Err() != nil {
				return // both at once: the caller is gone all the same
			}
		case <-r.Context().Done():
			unhold()
			return // the caller went away before the mock saw its request
		}
	case holdAfter:
		hw := &heldWriter{ResponseWriter: w, gate: gate, done: r.Context().Done()}
		defer unhold()
		u.Mock.ServeHTTP(hw, r)
		return
	}
	u.Mock.ServeHTTP(w, r)
}

// Submits returns the Idempotency-Key (the task id) of every submit that
// reached the test's listener, in arrival order.
func (u *videoUpstream) Submits() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.submits)
}

// Deletes returns the job ids deleted, in order.
func (u *videoUpstream) Deletes() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.deletes)
}

// Contents returns the path and query of every content request, in order.
func (u *videoUpstream) Contents() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.contents)
}

// jobsByTask maps each task id (the jobs' Idempotency-Key) to the mock's
// jobs made for it, oldest first.
func (u *videoUpstream) jobsByTask() map[string][]mock.JobInfo {
	out := map[string][]mock.JobInfo{}
	for _, j := range u.Mock.Jobs() {
		out[j.IdempotencyKey] = append(out[j.IdempotencyKey], j)
	}
	return out
}

// jobOrder is the task ids of the mock's jobs in the order it created them.
func (u *videoUpstream) jobOrder() []string {
	var ids []string
	for _, j := range u.Mock.Jobs() {
		ids = append(ids, j.IdempotencyKey)
	}
	return ids
}

// taskObject is the task API's answer.
type taskObject struct {
	ID             string          `json:"id"`
	Object         string          `json:"object"`
	Model          string          `json:"model"`
	Status         string          `json:"status"`
	Progress       int             `json:"progress"`
	CreatedAt      int64           `json:"created_at"`
	FinishedAt     *int64          `json:"finished_at"`
	Result         json.RawMessage `json:"result"`
	Error          *taskErr        `json:"error"`
	CallbackURL    string          `json:"callback_url"`
	CallbackEvents []string        `json:"callback_events"`
	Queue          *struct {
		Position      int     `json:"position"`
		EstimatedWait float64 `json:"estimated_wait_seconds"`
	} `json:"queue"`
}

type taskErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func terminal(status string) bool {
	switch status {
	case "succeeded", "failed", "cancelled", "expired":
		return true
	}
	return false
}

// taskBody is a POST /v1/tasks body for videoModel with prompt and, if
// not "", a callback URL.
func taskBody(prompt, callback string) string {
	b, _ := json.Marshal(map[string]any{
		"model":        videoModel,
		"input":        map[string]any{"prompt": prompt, "seconds": "4"},
		"callback_url": callback,
	})
	return string(b)
}

// submitTask posts a task and returns the answer; it fails the test on an
// answer other than 202 or 200.
func (g *gateway) submitTask(t *testing.T, key, body, idemKey string) (taskObject, int) {
	t.Helper()
	r := request{Path: "/v1/tasks", Key: key, Body: body}
	if idemKey != "" {
		r.Header = map[string]string{"Idempotency-Key": idemKey}
	}
	rep := g.do(t, r)
	if rep.Status != http.StatusAccepted && rep.Status != http.StatusOK {
		t.Fatalf("POST /v1/tasks: %d %s", rep.Status, rep.Body)
	}
	var o taskObject
	if err := json.Unmarshal(rep.Body, &o); err != nil || o.ID == "" {
		t.Fatalf("POST /v1/tasks: %v: %s", err, rep.Body)
	}
	return o, rep.Status
}

// getTask fetches one task.
func (g *gateway) getTask(t *testing.T, key, id string) taskObject {
	t.Helper()
	rep := g.do(t, request{Method: http.MethodGet, Path: "/v1/tasks/" + id, Key: key})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET /v1/tasks/%s: %d %s", id, rep.Status, rep.Body)
	}
	var o taskObject
	if err := json.Unmarshal(rep.Body, &o); err != nil {
		t.Fatalf("GET /v1/tasks/%s: %v: %s", id, err, rep.Body)
	}
	return o
}

// listTasks pages through the key's tasks (GET /v1/tasks), oldest first.
func (g *gateway) listTasks(t *testing.T, key string) []taskObject {
	t.Helper()
	var all []taskObject
	after := ""
	for {
		path := "/v1/tasks?limit=1000"
		if after != "" {
			path += "&after=" + after
		}
		rep := g.do(t, request{Method: http.MethodGet, Path: path, Key: key})
		if rep.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rep.Status, rep.Body)
		}
		var page struct {
			Data    []taskObject `json:"data"`
			HasMore bool         `json:"has_more"`
			After   string       `json:"after"`
		}
		if err := json.Unmarshal(rep.Body, &page); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		all = append(all, page.Data...)
		if !page.HasMore {
			return all
		}
		after = page.After
	}
}

// statuses maps each of the key's tasks to its status.
func (g *gateway) statuses(t *testing.T, key string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, o := range g.listTasks(t, key) {
		m[o.ID] = o.Status
	}
	return m
}

// waitTerminal waits until every one of ids has ended, and returns the
// tasks.
func (g *gateway) waitTerminal(t *testing.T, key string, ids []string, within time.Duration) map[string]taskObject {
	t.Helper()
	var last map[string]taskObject
	waitFor(t, within, fmt.Sprintf("%d tasks to end", len(ids)), func() bool {
		last = map[string]taskObject{}
		for _, o := range g.listTasks(t, key) {
			last[o.ID] = o
		}
		for _, id := range ids {
			if !terminal(last[id].Status) {
				return false
			}
		}
		return true
	})
	return last
}

// waitNoLeases waits until no scope holds a lease or a waiter: nothing
// leaked.
func (g *gateway) waitNoLeases(t *testing.T, within time.Duration) {
	t.Helper()
	var last map[string]scopeView
	ok := false
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !ok && time.Now().Before(deadline) {
		last = g.scopes(t)
		ok = true
		for _, s := range last {
			if s.InFlight != 0 || s.Leases != 0 || s.Waiting != 0 {
				ok = false
			}
		}
		if !ok {
			<-tick.C
		}
	}
	if !ok {
		t.Fatalf("leases or waiters left %s after the tasks ended: %+v", within, last)
	}
}

// delivery is one webhook request a hookReceiver got.
type delivery struct {
	ID, Timestamp string
	Header        http.Header
	Body          []byte
	Verified      error // webhook.Signer.Verify's answer
	At            time.Time
	Event         struct {
		Type      string    `json:"type"`
		Timestamp time.Time `json:"timestamp"`
		Data      struct {
			ID       string          `json:"id"`
			Status   string          `json:"status"`
			Progress int             `json:"progress"`
			Result   json.RawMessage `json:"result"`
			Error    *taskErr        `json:"error"`
		} `json:"data"`
	}
}

// hookReceiver is a webhook endpoint in the test process. answer says
// what to answer the n-th delivery (from 0); it may block, until the
// request's context ends, to hang.
type hookReceiver struct {
	URL string

	signer *webhook.Signer
	mu     sync.Mutex
	got    []delivery
	answer func(n int, d delivery, r *http.Request) int
}

func startReceiver(t *testing.T, signer *webhook.Signer, answer func(n int, d delivery, r *http.Request) int) *hookReceiver {
	t.Helper()
	h := &hookReceiver{signer: signer, answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(h.serve))
	h.URL = srv.URL + "/hook"
	t.Cleanup(func() {
		srv.CloseClientConnections() // ends hanging handlers
		srv.Close()
	})
	return h
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"), At: time.Now(),
		Header: r.Header.Clone(), Body: body}
	d.Verified = h.signer.Verify(r.Header, body, time.Now(), 0)
	if err := json.Unmarshal(body, &d.Event); err != nil {
		d.Verified = fmt.Errorf("body is not an event: %v: %s", err, body)
	}
	h.mu.Lock()
	n := len(h.got)
	h.got = append(h.got, d)
	h.mu.Unlock()
	status := http.StatusOK
	if h.answer != nil {
		status = h.answer(n, d, r)
	}
	w.WriteHeader(status)
}

// deliveries returns what the receiver got so far.
func (h *hookReceiver) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// byTask groups the deliveries by task id.
func (h *hookReceiver) byTask() map[string][]delivery {
	m := map[string][]delivery{}
	for _, d := range h.deliveries() {
		m[d.Event.Data.ID] = append(m[d.Event.Data.ID], d)
	}
	return m
}

// openDB opens the gateway's SQLite file read-only, for looking at what it
// committed; it is closed when the test ends.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(time.Millisecond) // a fresh snapshot for each look
	t.Cleanup(func() { db.Close() })
	return db
}

// riverJob is one row of River's job table (River's SQLite driver keeps
// args, metadata and errors as JSONB).
type riverJob struct {
	ID      int64
	Kind    string
	State   string
	Attempt int
	TaskID  string
	EventID string
	Errors  string
	Snoozes int
}

// riverJobs lists River's jobs of a kind ("weir_task_run",
// "weir_task_webhook"), oldest first.
func riverJobs(t *testing.T, db *sql.DB, kind string) []riverJob {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT id, kind, state, attempt,
		coalesce(json_extract(args, '$.task_id'), ''),
		coalesce(json_extract(args, '$.event_id'), ''),
		coalesce(json(errors), ''),
		coalesce(json_extract(metadata, '$.snoozes'), 0)
		FROM river_job WHERE kind = ? ORDER BY id`, kind)
	if err != nil {
		t.Fatalf("read river_job: %v", err)
	}
	defer rows.Close()
	var out []riverJob
	for rows.Next() {
		var j riverJob
		if err := rows.Scan(&j.ID, &j.Kind, &j.State, &j.Attempt, &j.TaskID, &j.EventID, &j.Errors, &j.Snoozes); err != nil {
			t.Fatalf("read river_job: %v", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read river_job: %v", err)
	}
	return out
}

// taskRows maps each task id to its status as the file has it.
func taskRows(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT id, status FROM tasks`)
	if err != nil {
		t.Fatalf("read tasks: %v", err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		m[id] = st
	}
	return m
}

// checkOneTerminalEach checks, for tasks that carry a callback, that each
// ended exactly once: every delivery about it has the same webhook-id and
// event type, the type matches its final status, and each signature
// verified.
func checkOneTerminalEach(t *testing.T, h *hookReceiver, final map[string]taskObject) {
	t.Helper()
	by := h.byTask()
	for id, o := range final {
		ds := by[id]
		if len(ds) == 0 {
			t.Errorf("task %s (%s): no webhook delivered", id, o.Status)
			continue
		}
		for _, d := range ds {
			if d.Verified != nil {
				t.Errorf("task %s: webhook %s did not verify: %v", id, d.ID, d.Verified)
			}
			if d.ID != ds[0].ID || d.Event.Type != ds[0].Event.Type {
				t.Errorf("task %s: two different events, %s (%s) and %s (%s): it ended twice", id, ds[0].ID, ds[0].Event.Type, d.ID, d.Event.Type)
			}
		}
		if want := "task." + o.Status; ds[0].Event.Type != want {
			t.Errorf("task %s: event %s, but its status is %s", id, ds[0].Event.Type, o.Status)
		}
	}
}

// checkSubmittedOnce checks that each task started at most one upstream
// job (one job per Idempotency-Key, and no job without one), and returns
// how many resubmits the mock deduplicated by Idempotency-Key.
func checkSubmittedOnce(t *testing.T, u *videoUpstream, ids []string) (dedup int64) {
	t.Helper()
	jobs := u.jobsByTask()
	if n := len(jobs[""]); n > 0 {
		t.Errorf("%d upstream jobs submitted without an Idempotency-Key", n)
	}
	for _, id := range ids {
		js := jobs[id]
		if len(js) > 1 {
			t.Errorf("task %s started %d upstream jobs", id, len(js))
		}
		for _, j := range js {
			dedup += j.Submits - 1
		}
	}
	st := u.Mock.Stats()
	if st.JobsDeduplicated != dedup {
		t.Errorf("mock deduplicated %d submits; the jobs' submit counts say %d", st.JobsDeduplicated, dedup)
	}
	return dedup
}

// eventually polls cond every 20ms for up to within and reports whether
// it held; unlike waitFor, a timeout is an answer, not a failure.
func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
