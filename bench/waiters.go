package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/sqlite"
)

// SyncWaitersConfig says how SyncWaiters runs; the defaults are `weir
// bench sync-waiters`' flags'.
type SyncWaitersConfig struct {
	Weir Weir

	Requests int           // requests sent at once, each on its own connection (10,000)
	Limit    int           // the platform model's concurrency limit and the floor's semaphore (10)
	Latency  time.Duration // the mock's time to answer (100ms)
	Rate     float64       // requests sent per second; 0 is as fast as the client opens connections (0)
	Timeout  time.Duration // bound on each target's run (10m)
	Targets  []string      // targets to measure, in order: floor, weir (both)
	Dir      string        // directory for weir's config and database (default: a new temporary one, removed after)
	// HeapFloor, if HeapFloorSet, is weir's server.heap_floor; otherwise
	// weir keeps its config's default.
	HeapFloor    int64
	HeapFloorSet bool
}

// waitersUpstream is the mock, noting the order in which the requests
// reach it by the number each carries.
type waitersUpstream struct {
	mock *mock.Server
	url  string
	srv  *http.Server

	mu    sync.Mutex
	order []int
}

// waiterBody is request i's body: a short chat whose content names i.
func waiterBody(i int) string {
	return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"waiter ` + strconv.Itoa(i) +
		`: write one short paragraph on why a gateway queues a burst of work."}]}`
}

func (u *waitersUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions") {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, rest, ok := bytes.Cut(b, []byte(`"waiter `)); ok {
			if n, _, ok := bytes.Cut(rest, []byte(":")); ok {
				if i, err := strconv.Atoi(string(n)); err == nil {
					u.mu.Lock()
					u.order = append(u.order, i)
					u.mu.Unlock()
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	u.mock.ServeHTTP(w, r)
}

func (u *waitersUpstream) reset() {
	u.mu.Lock()
	u.order = u.order[:0]
	u.mu.Unlock()
	u.mock.ResetStats()
}

// waitersResult is one target's run.
type waitersResult struct {
	idle, peak   int64 // KiB
	ok, sent     int
	failed       map[string]int
	peakInFlight int64
	reached      int           // requests the mock saw
	rho          float64       // rank correlation of the mock's order with the send order
	maxGap       time.Duration // the most a request was sent after one it passed
	sendTime     time.Duration // first to last request written
	drain        time.Duration // first request sent to last answer in
	mostAtOnce   int64         // most requests outstanding at once
	warnings     string
}

func (r waitersResult) perWaiter(n int) float64 { return float64(r.peak-r.idle) / float64(n) }

// SyncWaiters is `weir-bench sync-waiters`: it measures what a waiting
// request costs the gateway, docs/benchmarks.md's "sync-waiters" scenario.
//
//	go run ./cmd/weir-bench sync-waiters                      # 10,000 waiters, limit 10, 100 ms upstream
//	go run ./cmd/weir-bench sync-waiters --requests 2000      # scaled down
//
// It serves the mock provider (o.Latency per answer, no cap of its own) in
// this process and, in turn, two servers in their own processes (children
// of o.Weir's FloorExe and Exe):
//
//   - floor: a bare net/http server (ServeFloor, the hidden `weir-bench
//     sync-waiters-floor`) that reads and decodes the JSON body, waits on a
//     o.Limit-slot semaphore (a buffered channel: blocked senders go in
//     arrival order) and proxies the body to the mock: the least a server
//     that queues a synchronous request can hold for it;
//   - weir: `weir serve` on a temporary SQLite file, whose one chat model
//     is served by a platform model with concurrency o.Limit, a key and
//     group without limits, and waits long enough for all to be served.
//
// Each target gets a few warm-up requests, then its resident set (VmRSS
// of /proc/<pid>/status) is read as idle; then o.Requests chat requests
// are sent at once (each on its own connection, as fast as the client can
// open them, or at o.Rate), and once every answer is in, the process's
// peak resident set (VmHWM) is read. A waiter's share is (peak − idle) /
// requests. The run also checks that every request was answered 200,
// that the mock never held more than o.Limit at once and reached it
// (PeakInFlight), and that requests reached the mock in the order the
// client finished sending them, as far as the client can tell: the rank
// correlation (Spearman's) of the mock's order with the send order is 1
// for a queue in arrival order, 0 for a random one and -1 for a stack,
// and the largest gap is the most a request was sent after one it passed.
// Under a burst of this size the servers' goroutines start reading their
// requests in an order of the scheduler's (and a connection the listen
// backlog dropped is retried a second later), so even the floor's FIFO
// semaphore shows gaps of hundreds of milliseconds and a correlation just
// below 1.
//
// Each line gives one figure for both targets and weir's as a multiple of
// the floor's. Everything runs on loopback, each target stops by itself
// within o.Timeout, and the children are killed if the run is cut short.
func SyncWaiters(ctx context.Context, out io.Writer, o SyncWaitersConfig) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := &waitersUpstream{mock: mock.New(mock.Config{Latency: o.Latency, CompletionTokens: 16})}
	up.url = "http://" + ln.Addr().String() + "/v1"
	up.srv = &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = up.srv.Serve(ln) }()
	defer up.srv.Close()

	fmt.Fprintf(out, "weir-bench sync-waiters: %d chat requests at once, one connection each; limit %d; mock latency %s; GOMAXPROCS %d; load average %s\n",
		o.Requests, o.Limit, o.Latency, runtime.GOMAXPROCS(0), loadAverage())

	results := map[string]waitersResult{}
	for _, t := range o.Targets {
		var r waitersResult
		switch t {
		case "floor":
			r, err = measureFloor(ctx, up, o)
		case "weir":
			r, err = measureWeir(ctx, up, o)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		results[t] = r
		fmt.Fprintf(out, "  %s measured: all sent in %.2fs, at most %d outstanding at once, drained in %.1fs%s\n",
			t, r.sendTime.Seconds(), r.mostAtOnce, r.drain.Seconds(), r.warnings)
	}
	printWaiters(out, o, results)
	fmt.Fprintf(out, "load average at the end: %s\n", loadAverage())
	return nil
}

func (o SyncWaitersConfig) validate() error {
	if err := o.Weir.child(); err != nil {
		return err
	}
	switch {
	case o.Requests < 1:
		return errors.New("--requests must be positive")
	case o.Limit < 1:
		return errors.New("--limit must be positive")
	case o.Rate < 0:
		return errors.New("--rate must not be negative")
	case o.Timeout <= 0:
		return errors.New("--timeout must be positive")
	case len(o.Targets) == 0:
		return errors.New("--targets: want floor, weir or both")
	}
	for _, t := range o.Targets {
		switch {
		case t != "floor" && t != "weir":
			return fmt.Errorf("--targets: unknown target %q: want floor or weir", t)
		case t == "floor" && (o.Weir.FloorExe == "" || len(o.Weir.FloorArgs) == 0):
			return errors.New("bench: Weir.FloorExe and Weir.FloorArgs are required to measure the floor")
		}
	}
	return nil
}

// measureFloor runs the floor as a child and sends it the burst.
func measureFloor(ctx context.Context, up *waitersUpstream, o SyncWaitersConfig) (waitersResult, error) {
	c, err := startChild(o.Weir.FloorExe, append(slices.Clone(o.Weir.FloorArgs),
		"--upstream", up.url+"/chat/completions", "--limit", strconv.Itoa(o.Limit)), time.Minute, nil)
	if err != nil {
		return waitersResult{}, err
	}
	defer c.stop()
	return driveWaiters(ctx, c, c.url+"/v1/chat/completions", nil, up, o)
}

// measureWeir writes a config and a key for `weir serve` on a fresh
// database, runs it as a child and sends it the burst.
func measureWeir(ctx context.Context, up *waitersUpstream, o SyncWaitersConfig) (waitersResult, error) {
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "weir-bench-waiters-")
		if err != nil {
			return waitersResult{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return waitersResult{}, err
	}
	config, db := filepath.Join(dir, "weir.yaml"), filepath.Join(dir, "weir.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(db + suffix)
	}
	// Waits long enough for the last of the burst: the drain takes
	// requests / limit × latency.
	wait := 2*time.Duration(o.Requests/o.Limit+1)*o.Latency + time.Minute
	floor := ""
	if o.HeapFloorSet {
		floor = fmt.Sprintf("  heap_floor: %d\n", o.HeapFloor)
	}
	text := fmt.Sprintf(`server:
  listen: 127.0.0.1:0
  default_max_wait: %s
%sstorage:
  path: %s
platforms:
  - name: mock
    base_url: %s
platform_models:
  - name: mock/gpt-4o-mini
    platform: mock
    upstream: gpt-4o-mini
    concurrency: %d
    queue_limit: %d
models:
  - name: gpt-4o-mini
    kind: chat
    candidates:
      - platform_model: mock/gpt-4o-mini
`, wait, floor, db, up.url, o.Limit, o.Requests)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		return waitersResult{}, err
	}
	store, err := sqlite.Open(ctx, db)
	if err != nil {
		return waitersResult{}, err
	}
	secret, err := o.Weir.CreateKey(ctx, store, &weir.APIKey{Name: "bench-waiters", Group: "default"})
	store.Close()
	if err != nil {
		return waitersResult{}, err
	}
	c, err := startChild(o.Weir.Exe, append(slices.Clone(o.Weir.ServeArgs), "-c", config), time.Minute, nil)
	if err != nil {
		return waitersResult{}, err
	}
	defer c.stop()
	return driveWaiters(ctx, c, c.url+"/v1/chat/completions", http.Header{"Authorization": {"Bearer " + secret}}, up, o)
}

// driveWaiters warms c up, reads its idle RSS, sends the burst and waits
// for every answer.
func driveWaiters(ctx context.Context, c *child, url string, header http.Header, up *waitersUpstream, o SyncWaitersConfig) (waitersResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	wc := newWaiterClient(url, header)
	defer wc.client.CloseIdleConnections()
	if err := wc.warmUp(ctx, o.Limit); err != nil {
		return waitersResult{}, err
	}
	time.Sleep(time.Second) // let the warm-up's connections close
	var r waitersResult
	var err error
	if r.idle, err = c.memKiB("VmRSS"); err != nil {
		return r, err
	}
	up.reset()

	sent, lastDone := wc.sendBurst(ctx, o, &r)
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("the burst did not end within --timeout %s: %w", o.Timeout, err)
	}
	if r.peak, err = c.memKiB("VmHWM"); err != nil {
		return r, err
	}
	r.sent, r.drain = o.Requests, lastDone
	r.peakInFlight = up.mock.Stats().PeakInFlight
	r.noteOrder(up.arrivals(), sent)
	if w := c.warnings(); w != "" {
		r.warnings = "; warnings: " + w
	}
	return r, nil
}

// waiterClient sends the waiters' requests to url with header, every
// request on its own connection, closed once answered.
type waiterClient struct {
	client *http.Client
	url    string
	header http.Header
}

func newWaiterClient(url string, header http.Header) *waiterClient {
	return &waiterClient{
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true, MaxConnsPerHost: 0}},
		url:    url,
		header: header,
	}
}

// send sends request i (waiterBody) and reads its answer to the end.
func (wc *waiterClient) send(ctx context.Context, i int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wc.url, strings.NewReader(waiterBody(i)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range wc.header {
		req.Header[k] = v
	}
	resp, err := wc.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}

// warmUp sends a few rounds of limit requests at once, so pools,
// connections and the key's scope exist before idle is read.
func (wc *waiterClient) warmUp(ctx context.Context, limit int) error {
	for range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, limit)
		for i := range limit {
			wg.Go(func() {
				if code, err := wc.send(ctx, -1-i); err != nil || code != http.StatusOK {
					errs <- fmt.Errorf("warm-up request: status %d, %v", code, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// sendBurst sends o.Requests requests, numbered in the order they are
// started, all at once or at o.Rate, and waits for every answer. It
// tallies the answers and the most outstanding at once in r, and returns
// when each request was written and when the last answer came in, both
// since the first was started.
func (wc *waiterClient) sendBurst(ctx context.Context, o SyncWaitersConfig, r *waitersResult) (sent []atomic.Int64, lastDone time.Duration) {
	sent = make([]atomic.Int64, o.Requests)
	var outstanding atomic.Int64
	var mu sync.Mutex
	r.failed = map[string]int{}

	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range o.Requests {
		if o.Rate > 0 {
			if d := time.Until(t0.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		if v := outstanding.Add(1); v > r.mostAtOnce {
			r.mostAtOnce = v
		}
		wg.Go(func() {
			defer outstanding.Add(-1)
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent[i].Store(int64(time.Since(t0))) }}
			code, err := wc.send(httptrace.WithClientTrace(ctx, trace), i)
			done := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			lastDone = max(lastDone, done)
			r.tally(code, err)
		})
	}
	wg.Wait()
	return sent, lastDone
}

// tally counts one answer of the burst: served, its status, or the error
// that ended it.
func (r *waitersResult) tally(code int, err error) {
	switch {
	case err != nil:
		msg := err.Error()
		if _, after, ok := strings.Cut(msg, ": "); ok && strings.Contains(msg, "http://") {
			msg = after // the URL names a random port
		}
		r.failed[msg]++
	case code != http.StatusOK:
		r.failed["status "+strconv.Itoa(code)]++
	default:
		r.ok++
	}
}

// arrivals are the numbers of the requests that reached the mock so far,
// in the order they reached it.
func (u *waitersUpstream) arrivals() []int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.order)
}

// noteOrder notes how many requests reached the mock, in order (their
// numbers), how long the client took to write them all, and how order
// agrees with when each was sent.
func (r *waitersResult) noteOrder(order []int, sent []atomic.Int64) {
	r.reached = len(order)
	for i := range sent {
		r.sendTime = max(r.sendTime, time.Duration(sent[i].Load()))
	}
	r.rho, r.maxGap = orderAgreement(order, sent)
}

// orderAgreement compares the order requests reached the mock in (their
// numbers) with the times they were sent: Spearman's rank correlation over
// the requests that reached it, and the most a request was sent after an
// earlier-served one.
func orderAgreement(order []int, sent []atomic.Int64) (rho float64, gap time.Duration) {
	var seen []int
	for _, i := range order {
		if i >= 0 && i < len(sent) {
			seen = append(seen, i)
		}
	}
	n := len(seen)
	if n < 2 {
		return 1, 0
	}
	bySend := slices.Clone(seen)
	slices.SortStableFunc(bySend, func(a, b int) int { return cmp.Compare(sent[a].Load(), sent[b].Load()) })
	sendRank := make(map[int]int, n)
	for rank, i := range bySend {
		sendRank[i] = rank
	}
	var sum float64
	var latest time.Duration
	for pos, i := range seen {
		d := float64(pos - sendRank[i])
		sum += d * d
		if s := time.Duration(sent[i].Load()); s < latest {
			gap = max(gap, latest-s)
		} else {
			latest = s
		}
	}
	fn := float64(n)
	return 1 - 6*sum/(fn*(fn*fn-1)), gap
}

// printWaiters prints a line per figure: each target's, and weir's as a
// multiple of the floor's.
func printWaiters(out io.Writer, o SyncWaitersConfig, res map[string]waitersResult) {
	f, hasFloor := res["floor"]
	w, hasWeir := res["weir"]
	mib := func(kib int64) string { return fmt.Sprintf("%8.1f MiB", float64(kib)/1024) }
	line := func(name string, fv, wv string, ratio float64, tail string) {
		s := fmt.Sprintf("%-22s", name)
		if hasFloor {
			s += fmt.Sprintf("  floor %s", fv)
		}
		if hasWeir {
			s += fmt.Sprintf("  weir %s", wv)
		}
		if hasFloor && hasWeir && ratio > 0 {
			s += fmt.Sprintf("  weir/floor %.2fx", ratio)
		}
		fmt.Fprintln(out, s+tail)
	}
	fr := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	line("idle RSS", mib(f.idle), mib(w.idle), fr(float64(w.idle), float64(f.idle)), "")
	line("peak RSS (VmHWM)", mib(f.peak), mib(w.peak), fr(float64(w.peak), float64(f.peak)), "")
	verdict := ""
	if hasFloor && hasWeir {
		verdict = "  (target <= 1.20x: met)"
		if fr(w.perWaiter(o.Requests), f.perWaiter(o.Requests)) > 1.2 {
			verdict = "  (target <= 1.20x: missed)"
		}
	}
	line("per waiter (peak-idle)/n", fmt.Sprintf("%8.1f KiB", f.perWaiter(o.Requests)), fmt.Sprintf("%8.1f KiB", w.perWaiter(o.Requests)),
		fr(w.perWaiter(o.Requests), f.perWaiter(o.Requests)), verdict)
	served := func(r waitersResult) string {
		s := fmt.Sprintf("%d/%d", r.ok, r.sent)
		if r.ok != r.sent {
			s += " FAILED (" + failures(r.failed) + ")"
		}
		return s
	}
	line("served 200", served(f), served(w), 0, "")
	limit := func(r waitersResult) string {
		s := fmt.Sprintf("%d", r.peakInFlight)
		if r.peakInFlight != int64(o.Limit) {
			s += " NOT THE LIMIT"
		}
		return s
	}
	line("peak in flight upstream", limit(f), limit(w), 0, fmt.Sprintf("  (limit %d)", o.Limit))
	order := func(r waitersResult) string {
		return fmt.Sprintf("rank correlation %.3f, largest gap %s, %d reached", r.rho, r.maxGap.Round(time.Millisecond), r.reached)
	}
	line("order at the mock", order(f), order(w), 0, "  (1: send order; 0: random; -1: reversed)")
	line("drain (first sent to last answer)", fmt.Sprintf("%.1fs", f.drain.Seconds()), fmt.Sprintf("%.1fs", w.drain.Seconds()),
		fr(w.drain.Seconds(), f.drain.Seconds()), fmt.Sprintf("  (ideal %.1fs)", float64(o.Requests/o.Limit)*o.Latency.Seconds()))
}
