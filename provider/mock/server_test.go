package mock

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// N+1 requests against a cap of N: while N are held (by a long latency),
// the extra one gets exactly the 429 a real provider sends; the held ones
// end when their clients leave, and give their slots back.
func TestConcurrencyCap(t *testing.T) {
	t.Parallel()
	const n = 3
	f := newFixture(t, Config{MaxConcurrent: n, RetryAfter: 1500 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.ts.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hold"}]}`))
			req.Header.Set("X-Mock-Latency", "1h")
			if resp, err := f.ts.Client().Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("held request answered %d", resp.StatusCode)
			}
		})
	}
	for range n {
		f.await(f.waiting, "held request")
	}

	resp := f.post("/v1/chat/completions", chatBody, nil)
	e := expectError(t, resp, http.StatusTooManyRequests, "requests")
	if e["code"] != "rate_limit_exceeded" || e["param"] != nil {
		t.Errorf("429 error %v", e)
	}
	if ra, ms := resp.Header.Get("Retry-After"), resp.Header.Get("Retry-After-Ms"); ra != "2" || ms != "1500" {
		t.Errorf("Retry-After %q, retry-after-ms %q", ra, ms)
	}
	if st := f.awaitDone(); st != http.StatusTooManyRequests {
		t.Errorf("counted %d", st)
	}
	st := f.s.Stats()
	if st.InFlight != n || st.PeakInFlight != n || st.Rejected != 1 || st.ByStatus[429] != 1 || st.MaxConcurrent != n {
		t.Errorf("while held: %+v", st)
	}

	cancel()
	wg.Wait()
	for range n {
		if st := f.awaitDone(); st != statusClientClosed {
			t.Errorf("held request counted %d, want %d", st, statusClientClosed)
		}
	}
	st = f.s.Stats()
	if st.InFlight != 0 || st.PeakInFlight != n || st.ByStatus[statusClientClosed] != n || st.Requests != n+1 {
		t.Errorf("after release: %+v", st)
	}
	expectStatus(t, f.post("/v1/chat/completions", chatBody, nil), http.StatusOK)
}

// Under a burst the cap is exact: the peak never passes it, and every
// request is either served or rejected.
func TestCapUnderBurst(t *testing.T) {
	t.Parallel()
	const limit, burst = 4, 40
	f := newFixture(t, Config{MaxConcurrent: limit, Latency: 2 * time.Millisecond})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range burst {
		wg.Go(func() {
			resp := f.post("/v1/chat/completions", chatBody, nil)
			readAll(t, resp)
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for range burst {
		f.awaitDone()
	}
	st := f.s.Stats()
	if st.PeakInFlight > limit || st.PeakInFlight < 1 {
		t.Errorf("peak %d with cap %d", st.PeakInFlight, limit)
	}
	if codes[200]+codes[429] != burst || int64(codes[429]) != st.Rejected || int64(codes[200]) != st.ByStatus[200] {
		t.Errorf("codes %v, stats %+v", codes, st)
	}
	if st.InFlight != 0 {
		t.Errorf("in flight after the burst: %d", st.InFlight)
	}
}

func TestForcedStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	for _, tc := range []struct {
		status     int
		typ, code  string
		retryAfter bool
	}{
		{429, "requests", "rate_limit_exceeded", true},
		{500, "server_error", "", false},
		{503, "server_error", "", true},
		{401, "invalid_request_error", "invalid_api_key", false},
		{502, "server_error", "", false},
	} {
		for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
			body := any(chatBody)
			if path == "/v1/embeddings" {
				body = map[string]any{"model": "m", "input": "x"}
			}
			resp := f.post(path, body, map[string]string{"X-Mock-Status": fmt.Sprint(tc.status)})
			e := expectError(t, resp, tc.status, tc.typ)
			if (tc.code == "" && e["code"] != nil) || (tc.code != "" && e["code"] != tc.code) {
				t.Errorf("%d %s: code %v", tc.status, path, e["code"])
			}
			if got := resp.Header.Get("Retry-After") != ""; got != tc.retryAfter {
				t.Errorf("%d: Retry-After present %v", tc.status, got)
			}
		}
	}
	for range 10 {
		f.awaitDone()
	}
	if st := f.s.Stats(); st.Rejected != 0 || st.ByStatus[429] != 2 || st.ByStatus[500] != 2 {
		t.Errorf("forced errors are not cap rejections: %+v", st)
	}
}

func TestErrorRate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{ErrorRate: 1})
	expectError(t, f.post("/v1/chat/completions", chatBody, nil), 500, "server_error")

	// At rate 0.5 about half fail; the seed fixes which, so two servers
	// with one seed fail the same requests.
	outcomes := func() []int {
		s := New(Config{ErrorRate: 0.5, Seed: 42})
		var codes []int
		for range 200 {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)))
			codes = append(codes, w.Code)
		}
		return codes
	}
	first, second := outcomes(), outcomes()
	fails := 0
	for i, c := range first {
		if c == 500 {
			fails++
		}
		if c != second[i] {
			t.Fatalf("request %d: %d, then %d with the same seed", i, c, second[i])
		}
	}
	if fails < 70 || fails > 130 {
		t.Errorf("%d of 200 failed at rate 0.5", fails)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, Config{Models: []string{"only-this"}}, func(s *Server) { s.maxBody = 4096 })
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		header map[string]string
		status int
		param  any
	}{
		{"not JSON", "POST", "/v1/chat/completions", "{", nil, 400, nil},
		{"no model", "POST", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}}, nil, 400, "model"},
		{"no messages", "POST", "/v1/chat/completions", map[string]any{"model": "only-this"}, nil, 400, "messages"},
		{"unknown model", "POST", "/v1/chat/completions", chatBody, nil, 404, nil},
		{"max_tokens 0", "POST", "/v1/chat/completions", map[string]any{"model": "only-this", "messages": []any{map[string]any{"role": "user", "content": "x"}}, "max_tokens": 0}, nil, 400, "max_tokens"},
		{"bad status header", "POST", "/v1/chat/completions", chatBody, map[string]string{"X-Mock-Status": "200"}, 400, nil},
		{"bad latency header", "POST", "/v1/chat/completions", chatBody, map[string]string{"X-Mock-Latency": "soon"}, 400, nil},
		{"bad stall header", "POST", "/v1/chat/completions", chatBody, map[string]string{"X-Mock-Stall": "maybe"}, 400, nil},
		{"bad stream error header", "POST", "/v1/chat/completions", chatBody, map[string]string{"X-Mock-Stream-Error": "Overloaded!"}, 400, nil},
		{"GET on a POST path", "GET", "/v1/chat/completions", nil, nil, 405, nil},
		{"unknown path", "POST", "/v1/completions/nope", chatBody, nil, 404, nil},
		{"empty embedding input", "POST", "/v1/embeddings", map[string]any{"model": "only-this", "input": ""}, nil, 400, "input"},
		{"bad encoding_format", "POST", "/v1/embeddings", map[string]any{"model": "only-this", "input": "x", "encoding_format": "hex"}, nil, 400, "encoding_format"},
		{"image without prompt", "POST", "/v1/images/generations", map[string]any{"model": "only-this"}, nil, 400, "prompt"},
		{"speech without voice", "POST", "/v1/audio/speech", map[string]any{"model": "only-this", "input": "hi"}, nil, 400, "voice"},
		{"too large", "POST", "/v1/embeddings", strings.Repeat(" ", 4097), nil, 413, nil},
	} {
		resp := f.request(context.Background(), tc.method, tc.path, tc.body, tc.header)
		e := expectError(t, resp, tc.status, "invalid_request_error")
		if e["param"] != tc.param {
			t.Errorf("%s: param %v, want %v", tc.name, e["param"], tc.param)
		}
		if tc.name == "unknown model" && e["code"] != "model_not_found" {
			t.Errorf("unknown model: code %v", e["code"])
		}
	}
}

func TestSampleLatency(t *testing.T) {
	t.Parallel()
	const base, jitter = 100 * time.Millisecond, 20 * time.Millisecond
	for _, tc := range []struct {
		dist     Distribution
		lo, hi   time.Duration // every draw within
		meanNear time.Duration
	}{
		{Fixed, base, base, base},
		{Uniform, base - jitter, base + jitter, base},
		{Normal, 0, 2 * base, base},
		{Exponential, base, math.MaxInt64, base + jitter},
	} {
		cfg := Config{Latency: base, LatencyJitter: jitter, Distribution: tc.dist}
		var sum time.Duration
		const draws = 4000
		for i := range draws {
			r := newRNG(7, uint64(i))
			d := cfg.sampleLatency(&r)
			if d < tc.lo || d > tc.hi {
				t.Fatalf("%s: drew %s outside [%s, %s]", tc.dist, d, tc.lo, tc.hi)
			}
			sum += d
		}
		if mean := sum / draws; mean < tc.meanNear-2*time.Millisecond || mean > tc.meanNear+2*time.Millisecond {
			t.Errorf("%s: mean %s, want about %s", tc.dist, mean, tc.meanNear)
		}
	}
	// A spread below zero is clamped, never negative.
	cfg := Config{Latency: time.Millisecond, LatencyJitter: time.Second, Distribution: Normal}
	for i := range 1000 {
		r := newRNG(1, uint64(i))
		if d := cfg.sampleLatency(&r); d < 0 {
			t.Fatalf("negative latency %s", d)
		}
	}
}

func TestConfigEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CompletionTokens: 5})
	m := obj(t, expectStatus(t, f.post("/mock/config", `{"max_concurrent": 2, "latency": "3ms", "distribution": "normal"}`, nil), http.StatusOK))
	if m["max_concurrent"] != 2.0 || m["latency"] != "3ms" || m["distribution"] != "normal" || m["completion_tokens"] != 5.0 || m["stall_for"] != "30s" {
		t.Errorf("after update: %v", m)
	}
	c := f.s.Config()
	if c.MaxConcurrent != 2 || c.Latency != 3*time.Millisecond || c.CompletionTokens != 5 {
		t.Errorf("Config() %+v", c)
	}
	for _, bad := range []string{`{"max_concurent": 2}`, `{"error_rate": 2}`, `{"latency": 5}`, `{"distribution": "zipf"}`, `[`} {
		expectError(t, f.post("/mock/config", bad, nil), 400, "invalid_request_error")
	}
	if got := f.s.Config(); got.MaxConcurrent != 2 || got.ErrorRate != 0 {
		t.Errorf("a rejected update changed the config: %+v", got)
	}
	resp := f.request(context.Background(), http.MethodGet, "/mock/config", nil, nil)
	if m := obj(t, expectStatus(t, resp, http.StatusOK)); m["max_concurrent"] != 2.0 {
		t.Errorf("GET %v", m)
	}

	// A lowered cap applies to the next request.
	expectStatus(t, f.post("/mock/config", `{"max_concurrent": 0, "error_rate": 1, "latency": "0s"}`, nil), http.StatusOK)
	expectError(t, f.post("/v1/chat/completions", chatBody, nil), 500, "server_error")
	if err := f.s.Update(func(c *Config) { c.ErrorRate = 0 }); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, f.post("/v1/chat/completions", chatBody, nil), http.StatusOK)
	if err := f.s.Update(func(c *Config) { c.StallRate = -1 }); err == nil {
		t.Error("Update accepted a negative stall rate")
	}
}

func TestStatsEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	expectStatus(t, f.post("/v1/chat/completions", chatBody, nil), http.StatusOK)
	expectError(t, f.post("/v1/chat/completions", chatBody, map[string]string{"X-Mock-Status": "503"}), 503, "server_error")
	for range 2 {
		f.awaitDone()
	}
	m := obj(t, expectStatus(t, f.request(context.Background(), http.MethodGet, "/mock/stats", nil, nil), http.StatusOK))
	hasKeys(t, "stats", m, "in_flight", "peak_in_flight", "max_concurrent", "requests", "by_status", "rejected", "stalled")
	bs := m["by_status"].(map[string]any)
	if bs["200"] != 1.0 || bs["503"] != 1.0 || m["requests"] != 2.0 || m["peak_in_flight"] != 1.0 {
		t.Errorf("stats %v", m)
	}
	if resp := f.post("/mock/stats/reset", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("reset answered %d", resp.StatusCode)
	}
	if st := f.s.Stats(); st.Requests != 0 || st.PeakInFlight != 0 || len(st.ByStatus) != 0 {
		t.Errorf("after reset: %+v", st)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("New accepted ErrorRate 1.5")
		}
	}()
	New(Config{ErrorRate: 1.5})
}
