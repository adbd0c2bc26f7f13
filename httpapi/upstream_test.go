package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/router"
)

const (
	chatJSON   = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	streamJSON = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
)

// advanceUntil moves clk by step, up to limit in all, until done is
// closed. A bound fires on the fake clock only once the wait it bounds
// has begun, which a test cannot see from outside, so time is moved on
// until the effect shows.
func advanceUntil(t *testing.T, clk *clock.Fake, step, limit time.Duration, done <-chan struct{}) {
	t.Helper()
	if !clk.AdvanceUntil(done, step, limit, 10*time.Second) {
		t.Fatal("nothing happened within 10s")
	}
}

// send posts body to the chat endpoint under ctx and returns the answer;
// the caller reads and closes it.
func (b *testBundle) send(t testing.TB, ctx context.Context, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.http.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultClient.Do(req)
}

// read sends body and reads the whole answer in the background; done is
// closed when it is in.
func (b *testBundle) read(t *testing.T, body string) (status *int, out *[]byte, done chan struct{}) {
	t.Helper()
	status, out, done = new(int), new([]byte), make(chan struct{})
	go func() {
		defer close(done)
		resp, err := b.send(t, t.Context(), body)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		*status = resp.StatusCode
		*out, _ = io.ReadAll(resp.Body)
	}()
	return status, out, done
}

func (b *testBundle) inFlight(t *testing.T, pm string) int64 {
	t.Helper()
	st, err := b.engine.Scope(t.Context(), weir.PlatformModelScope(pm))
	if err != nil {
		t.Fatal(err)
	}
	return st.Used
}

// usageLog collects the usage records of a bundle. A whole answer
// reaches its client before its record is made: wait for it.
type usageLog struct {
	mu  sync.Mutex
	all []weir.Usage
	// more is closed, and replaced, at each record.
	more chan struct{}
}

func (u *usageLog) record(r weir.Usage) {
	u.mu.Lock()
	u.all = append(u.all, r)
	if u.more != nil {
		close(u.more)
		u.more = nil
	}
	u.mu.Unlock()
}

// wait waits for at least n records and returns them.
func (u *usageLog) wait(t testing.TB, n int) []weir.Usage {
	t.Helper()
	// A bound for a failing test, not a wait: the record follows the
	// answer by microseconds.
	bound := time.After(30 * time.Second)
	for {
		u.mu.Lock()
		if len(u.all) >= n {
			all := slices.Clone(u.all)
			u.mu.Unlock()
			return all
		}
		if u.more == nil {
			u.more = make(chan struct{})
		}
		more := u.more
		u.mu.Unlock()
		select {
		case <-more:
		case <-bound:
			t.Fatalf("%d usage records, want %d", len(u.wait(t, 0)), n)
		}
	}
}

// last waits for the nth record and returns the last one.
func (u *usageLog) last(t testing.TB, n int) weir.Usage {
	t.Helper()
	all := u.wait(t, n)
	return all[len(all)-1]
}

// outcomes waits for at least n records and returns their outcomes.
func (u *usageLog) outcomes(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for _, r := range u.wait(t, n) {
		out = append(out, r.Outcome)
	}
	return out
}

// A stream whose upstream stalls after sending half is ended after the
// idle timeout with an error event, its outcome recorded, and its lease
// and the upstream's slot let go.
func TestStalledStreamEnds(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var usage usageLog
	upEnded := make(chan struct{}, 1)
	b := setup(t, setupOpts{
		clock:    clk,
		gwCfg:    gateway.Config{UpstreamIdleTimeout: 10 * time.Second},
		mock:     mock.Config{StallRate: 1, StallFor: time.Hour, CompletionTokens: 10},
		limits:   weir.Limits{Concurrency: 1},
		deps:     func(d *Deps) { d.Usage = usage.record },
		upstream: handlerEnded(upEnded),
	})
	status, out, done := b.read(t, streamJSON)
	// Up to 50 minutes, under the mock's StallFor, so that the stream
	// cannot resume: the clock moves before the request reaches the
	// upstream, which may take a while (the first request for a model
	// loads its encoding).
	advanceUntil(t, clk, 5*time.Second, 50*time.Minute, done)
	body := string(*out)
	if *status != http.StatusOK || !strings.Contains(body, `"content":"This"`) {
		t.Fatalf("status %d, body %q; want the stream's first half", *status, body)
	}
	if !strings.Contains(body, `"code":"upstream_timeout"`) || strings.Contains(body, "[DONE]") {
		t.Errorf("the stream did not end with an upstream_timeout event: %q", body)
	}
	if n := b.inFlight(t, "up/m"); n != 0 {
		t.Errorf("the lease is still held: %d in flight", n)
	}
	// The mock sees the gateway's hang-up only when its connection's
	// read fails, after the client has its answer.
	select {
	case <-upEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled upstream request was never ended")
	}
	if st := b.mock.Stats(); st.InFlight != 0 || st.Stalled != 1 {
		t.Errorf("upstream after the stream: %+v; want the stalled request gone", st)
	}
	if got := usage.outcomes(t, 1); len(got) != 1 || got[0] != "upstream_timeout" {
		t.Errorf("outcomes %v; want [upstream_timeout]", got)
	}
}

// handlerEnded tells on ended each time the upstream's handler returns:
// the mock has counted the request out.
func handlerEnded(ended chan<- struct{}) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			ended <- struct{}{}
		})
	}
}

// stallUpstream makes requests for the upstream model "stall-model"
// answer 200 with headers and nothing more until they end; each that
// did is told on ended (if not nil, without waiting).
func stallUpstream(ended chan<- struct{}) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if !bytes.Contains(body, []byte(`"stall-model"`)) {
				r.Body = io.NopCloser(bytes.NewReader(body))
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"id":`))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			select {
			case ended <- struct{}{}:
			default:
			}
		})
	}
}

// A non-streamed answer that stalls after its headers is given up after
// the idle timeout: the next candidate serves, or with none the client
// gets upstream_timeout.
func TestStalledAnswerTimesOut(t *testing.T) {
	t.Parallel()
	cat := func(candidates ...weir.Candidate) *weir.Catalog {
		return &weir.Catalog{
			Platforms: []weir.Platform{{Name: "stall", Kind: "openai", BaseURL: "UP"}, {Name: "up", Kind: "openai", BaseURL: "UP"}},
			PlatformModels: []weir.PlatformModel{
				{Name: "stall/m", Platform: "stall", Upstream: "stall-model"},
				{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"},
			},
			Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: candidates}},
		}
	}
	for _, tc := range []struct {
		name       string
		candidates []weir.Candidate
		status     int
	}{
		{"falls back", []weir.Candidate{{PlatformModel: "stall/m", Priority: 10}, {PlatformModel: "up/m"}}, http.StatusOK},
		{"alone", []weir.Candidate{{PlatformModel: "stall/m"}}, http.StatusGatewayTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			ended := make(chan struct{}, 1)
			b := setup(t, setupOpts{
				clock:    clk,
				gwCfg:    gateway.Config{UpstreamIdleTimeout: 10 * time.Second},
				catalog:  cat(tc.candidates...),
				upstream: stallUpstream(ended),
			})
			status, out, done := b.read(t, chatJSON)
			advanceUntil(t, clk, 5*time.Second, time.Minute, done)
			if *status != tc.status {
				t.Fatalf("status %d: %s; want %d", *status, *out, tc.status)
			}
			if tc.status != http.StatusOK && !strings.Contains(string(*out), `"code":"upstream_timeout"`) {
				t.Errorf("answer %s; want upstream_timeout", *out)
			}
			// The upstream sees the hang-up only when its connection's
			// read fails, after the client has its answer.
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Errorf("the stalled upstream request is still running")
			}
			if n := b.inFlight(t, "stall/m"); n != 0 {
				t.Errorf("the stalled candidate's lease is still held")
			}
		})
	}
}

// released returns an observer that reports on the channel every lease
// released (or expired) in the scope of pm.
func released(pm string, ch chan<- admission.Outcome) admission.Observer {
	return admission.ObserverFunc(func(e admission.Event) {
		if e.Outcome != admission.OutcomeReleased && e.Outcome != admission.OutcomeExpired {
			return
		}
		for _, n := range e.Needs {
			if n.Scope == weir.PlatformModelScope(pm) {
				select {
				case ch <- e.Outcome:
				default:
				}
			}
		}
	})
}

// A client that stops reading its stream loses it after the write
// timeout, and its lease and upstream call are let go.
func TestStalledClientLosesStream(t *testing.T) {
	t.Parallel()
	rel := make(chan admission.Outcome, 8)
	var usage usageLog
	upEnded := make(chan struct{}, 1)
	b := setup(t, setupOpts{
		cfg:      Config{StreamWriteTimeout: 200 * time.Millisecond},
		mock:     mock.Config{CompletionTokens: 1 << 16},
		limits:   weir.Limits{Concurrency: 1},
		observer: released("up/m", rel),
		deps:     func(d *Deps) { d.Usage = usage.record },
		upstream: handlerEnded(upEnded),
	})
	resp, err := b.send(t, t.Context(), streamJSON)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// The client reads nothing more.
	select {
	case <-rel:
	case <-time.After(10 * time.Second):
		t.Fatal("the lease of a stalled client's stream was never released")
	}
	select {
	case <-upEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream's handler never returned")
	}
	if st := b.mock.Stats(); st.InFlight != 0 {
		t.Errorf("the upstream still serves the stalled client's stream: %+v", st)
	}
	// What was sent before the stall, then the end: the request is over.
	_, _ = io.Copy(io.Discard, resp.Body)
	if got := usage.outcomes(t, 1); len(got) != 1 || got[0] != "client_write_timeout" {
		t.Errorf("outcomes %v; want [client_write_timeout]", got)
	}
}

// gateUpstream holds every work request inside the mock (its slot taken)
// until gate is closed; arrived gets one value per request held.
func gateUpstream(gate <-chan struct{}, arrived chan<- struct{}) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&gatedWriter{ResponseWriter: w, gate: gate, arrived: arrived}, r)
		})
	}
}

type gatedWriter struct {
	http.ResponseWriter
	gate    <-chan struct{}
	arrived chan<- struct{}
	passed  bool
}

func (w *gatedWriter) wait() {
	if !w.passed {
		w.passed = true
		w.arrived <- struct{}{}
		<-w.gate
	}
}

func (w *gatedWriter) WriteHeader(code int) { w.wait(); w.ResponseWriter.WriteHeader(code) }

func (w *gatedWriter) Write(b []byte) (int, error) { w.wait(); return w.ResponseWriter.Write(b) }

// A request that runs longer than its platform model's lease_ttl keeps its
// lease: the upstream never sees more than the limit.
func TestLeaseRenewedWhileRequestRuns(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var expired, queued atomic.Int64
	queuedCh := make(chan struct{}, 16)
	gate, arrived := make(chan struct{}), make(chan struct{}, 16)
	b := setup(t, setupOpts{
		clock:  clk,
		cfg:    Config{DefaultMaxWait: time.Hour},
		limits: weir.Limits{Concurrency: 2, LeaseTTL: 10 * time.Second},
		mock:   mock.Config{MaxConcurrent: 2},
		observer: admission.ObserverFunc(func(e admission.Event) {
			switch e.Outcome {
			case admission.OutcomeExpired:
				expired.Add(1)
			case admission.OutcomeQueued:
				queued.Add(1)
				queuedCh <- struct{}{}
			}
		}),
		upstream: gateUpstream(gate, arrived),
	})
	const n = 5
	type result struct {
		status int
		body   []byte
	}
	results := make(chan result, n)
	for range n {
		go func() {
			resp, err := b.send(t, t.Context(), chatJSON)
			if err != nil {
				results <- result{}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			results <- result{resp.StatusCode, body}
		}()
	}
	for range 2 {
		<-arrived
	}
	for range n - 2 {
		<-queuedCh
	}
	// Three lease TTLs pass while the calls run.
	clk.Advance(35 * time.Second)
	if got := expired.Load(); got != 0 {
		t.Errorf("%d leases of running requests expired", got)
	}
	close(gate)
	for range n {
		if r := <-results; r.status != http.StatusOK {
			t.Errorf("status %d: %s", r.status, r.body)
		}
	}
	if st := b.mock.Stats(); st.PeakInFlight > 2 || st.Rejected != 0 {
		t.Errorf("upstream saw %d at once and rejected %d; limit 2", st.PeakInFlight, st.Rejected)
	}
}

// Clients that disconnect mid-call never let the upstream see more than
// the limit: a lease goes back only once its upstream call is torn down.
func TestDisconnectChurnStaysWithinLimit(t *testing.T) {
	t.Parallel()
	const limit = 2
	b := setup(t, setupOpts{
		cfg:    Config{DefaultMaxWait: time.Minute},
		limits: weir.Limits{Concurrency: limit},
		mock: mock.Config{MaxConcurrent: limit, Latency: 5 * time.Millisecond, Distribution: mock.Fixed,
			TokensPerSecond: 1000, CompletionTokens: 20},
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 25 {
				body := chatJSON
				if i%2 == 0 {
					body = streamJSON
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(40))*time.Millisecond)
				if resp, err := b.send(t, ctx, body); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	st := b.mock.Stats()
	if st.PeakInFlight > limit || st.Rejected != 0 {
		t.Errorf("upstream saw %d at once and rejected %d; limit %d (%v)", st.PeakInFlight, st.Rejected, limit, st.ByStatus)
	}
	if st.ByStatus[499] == 0 {
		t.Errorf("no request was cut short by its client: the test tests nothing (%v)", st.ByStatus)
	}
	t.Logf("upstream: %v, peak %d", st.ByStatus, st.PeakInFlight)
}

// An answer read whole past max_response_bytes is refused in Weir's words
// and its lease released; a stream is not read whole and passes.
func TestLargeAnswerRefused(t *testing.T) {
	t.Parallel()
	var usage usageLog
	b := setup(t, setupOpts{
		gwCfg:  gateway.Config{MaxResponseBytes: 4 << 10},
		mock:   mock.Config{CompletionTokens: 2000},
		limits: weir.Limits{Concurrency: 1},
		deps:   func(d *Deps) { d.Usage = usage.record },
	})
	resp := b.post(t, "/v1/chat/completions", chatJSON, nil)
	body, _ := io.ReadAll(resp.Body)
	var e errorBody
	if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(body, &e) != nil || e.Error.Code != string(weir.CodeUpstreamError) {
		t.Fatalf("status %d: %s; want 502 upstream_error", resp.StatusCode, body)
	}
	if !strings.Contains(e.Error.Message, "4096 bytes") {
		t.Errorf("message %q does not say the limit", e.Error.Message)
	}
	if n := b.inFlight(t, "up/m"); n != 0 {
		t.Errorf("the lease is still held")
	}
	resp = b.post(t, "/v1/chat/completions", streamJSON, nil)
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("[DONE]")) || len(body) < 4<<10 {
		t.Errorf("stream: status %d, %d bytes; want it whole", resp.StatusCode, len(body))
	}
	if got := usage.outcomes(t, 2); len(got) != 2 || got[0] != "upstream_too_large" || got[1] != "ok" {
		t.Errorf("outcomes %v", got)
	}
}

// lockedBuffer is a log sink safe for the handlers' goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An upstream refusing the platform's credential is the operator's
// problem: the client never sees the upstream's words (which may quote the
// key), the next candidate serves, and the failure counts toward the
// platform model's cooldown and is logged at warn with the platform.
func TestUpstreamCredentialRefusal(t *testing.T) {
	t.Parallel()
	const badKey = "sk-bad-0123456789abcdef"
	refuse := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "Bearer "+badKey {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+badKey+`","type":"invalid_request_error","code":"invalid_api_key"}}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	cat := &weir.Catalog{
		Platforms: []weir.Platform{
			{Name: "bad", Kind: "openai", BaseURL: "UP", APIKey: badKey},
			{Name: "up", Kind: "openai", BaseURL: "UP"},
		},
		PlatformModels: []weir.PlatformModel{
			{Name: "bad/m", Platform: "bad", Upstream: "gpt-4o-mini"},
			{Name: "up/m", Platform: "up", Upstream: "gpt-4o-mini"},
		},
		Models: []weir.Model{
			{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "bad/m", Priority: 10}, {PlatformModel: "up/m"}}},
			{Name: "only-bad", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "bad/m"}}},
		},
	}
	var logs lockedBuffer
	rt := router.New(router.Options{Failures: 2, Cooldown: time.Hour})
	b := setup(t, setupOpts{catalog: cat, upstream: refuse,
		deps:   func(d *Deps) { d.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) },
		gwDeps: func(d *gateway.Deps) { d.Router = rt },
	})

	resp := b.post(t, "/v1/chat/completions", chatJSON, nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with a candidate left: status %d: %s", resp.StatusCode, body)
	}
	resp = b.post(t, "/v1/chat/completions", `{"model":"only-bad","messages":[{"role":"user","content":"hi"}]}`, nil)
	body, _ = io.ReadAll(resp.Body)
	var e errorBody
	if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(body, &e) != nil || e.Error.Code != string(weir.CodeUpstreamError) {
		t.Fatalf("alone: status %d: %s; want 502 upstream_error", resp.StatusCode, body)
	}
	for _, leak := range []string{badKey, "Incorrect", "invalid_api_key"} {
		if bytes.Contains(body, []byte(leak)) {
			t.Errorf("the client sees the upstream's words (%q): %s", leak, body)
		}
	}
	if rt.CoolingUntil("bad/m").IsZero() {
		t.Error("two credential refusals did not put bad/m in cooldown")
	}
	l := logs.String()
	if !strings.Contains(l, `"level":"WARN"`) || !strings.Contains(l, `"platform":"bad"`) || !strings.Contains(l, "credential") {
		t.Errorf("no warning naming the platform: %s", l)
	}
	if strings.Contains(l, badKey) {
		t.Errorf("the log quotes the key: %s", l)
	}
}

// TestUpstreamRetryAfterPauses: the mock, over its concurrency cap,
// answers 429 with Retry-After: 3; the gateway pauses that platform
// model for 3 s by its clock: the refused request waits out the pause and
// is served after it, a request that cannot wait that long is answered
// 429 rate_limited at once, and nothing reaches the mock meanwhile.
func TestUpstreamRetryAfterPauses(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	b := setup(t, setupOpts{clock: clk, mock: mock.Config{MaxConcurrent: 1, RetryAfter: 3 * time.Second, Latency: 200 * time.Millisecond}})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	status1, _, done1 := b.read(t, body)
	waitUntil(t, "the first request at the mock", func() bool { return b.mock.Stats().InFlight == 1 })
	status2, out2, done2 := b.read(t, body)
	waitUntil(t, "the refused request queued on the paused platform model", func() bool {
		for _, v := range b.gw.Scopes(t.Context()) {
			if v.Name == weir.PlatformModelScope("up/m") {
				return v.Paused && v.Waiting == 1
			}
		}
		return false
	})
	<-done1
	if *status1 != http.StatusOK {
		t.Fatalf("the first request: %d", *status1)
	}
	h := http.Header{HeaderMaxWait: {"1s"}}
	resp, out := b.call(t, http.MethodPost, "/v1/chat/completions", b.key, body, h)
	wantError(t, resp, out, http.StatusTooManyRequests, weir.CodeRateLimited, "")
	if got := resp.Header.Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After %q; want 3", got)
	}
	if st := b.mock.Stats(); st.Requests != 2 || st.Rejected != 1 {
		t.Fatalf("the mock saw %d requests (%d rejected) during the pause; want the first and the refused one", st.Requests, st.Rejected)
	}
	clk.Advance(3 * time.Second)
	<-done2
	if *status2 != http.StatusOK {
		t.Fatalf("the refused request after the pause: %d %s", *status2, *out2)
	}
	if st := b.mock.Stats(); st.Requests != 3 {
		t.Errorf("the mock saw %d requests; want 3", st.Requests)
	}
}

// waitUntil polls cond until it holds, failing the test after a while.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(time.Millisecond)
	}
}
