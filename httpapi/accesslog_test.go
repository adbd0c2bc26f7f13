package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/clock"
	"github.com/weir-gateway/weir/gateway"
	"github.com/weir-gateway/weir/internal/jsonlog"
	"github.com/weir-gateway/weir/task"
)

// accessLog is a JSON log that keeps its lines, written by weir serve's
// handler.
type accessLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// wrote is closed, and replaced, at each write.
	wrote chan struct{}
}

func (l *accessLog) logger() *slog.Logger {
	return slog.New(jsonlog.New(l, slog.LevelDebug))
}

func (l *accessLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote != nil {
		close(l.wrote)
		l.wrote = nil
	}
	return l.buf.Write(p)
}

// written is closed at the next write.
func (l *accessLog) written() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote == nil {
		l.wrote = make(chan struct{})
	}
	return l.wrote
}

// waitRequests waits for at least n access log lines and returns them:
// an answer flushed before its handler returned (a task's 202) reaches
// the client before its line is written.
func (l *accessLog) waitRequests(t *testing.T, n int) []map[string]any {
	t.Helper()
	// A bound for a failing test, not a wait: the line follows the
	// answer by microseconds.
	bound := time.After(30 * time.Second)
	for {
		next := l.written()
		if lines := l.requests(t); len(lines) >= n {
			return lines
		}
		select {
		case <-next:
		case <-bound:
			t.Fatalf("%d access log lines, want %d: %s", len(l.requests(t)), n, l.text())
		}
	}
}

func (l *accessLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// requests are the access log lines, decoded.
func (l *accessLog) requests(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(l.text()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// only is the one access log line; it fails unless there is exactly one.
func (l *accessLog) only(t *testing.T) map[string]any {
	t.Helper()
	lines := l.requests(t)
	if len(lines) != 1 {
		t.Fatalf("%d access log lines, want 1: %s", len(lines), l.text())
	}
	return lines[0]
}

// wantFields checks that line has each field of want, and none of
// absent.
func wantFields(t *testing.T, line map[string]any, want map[string]any, absent ...string) {
	t.Helper()
	for k, v := range want {
		if got, ok := line[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v; line %v", k, got, ok, v, line)
		}
	}
	for _, k := range absent {
		if v, ok := line[k]; ok {
			t.Errorf("%s = %v, want none; line %v", k, v, line)
		}
	}
}

// The prompt of the access log tests, which no log line may show.
const secretPrompt = "the prompt is not for the log"

// TestAccessLogModelRequest: a model request, streamed or not, gets one
// access log line at info with who asked, what, where it went, how long
// it took and how it ended, its X-Request-Id and its trace's id; never
// its prompt or its key's secret.
func TestAccessLogModelRequest(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		log := &accessLog{}
		b := setup(t, setupOpts{deps: func(d *Deps) { d.Logger = log.logger() }})
		body := `{"model":"m","messages":[{"role":"user","content":"` + secretPrompt + `"}]}`
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + secretPrompt + `"}]}`
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+b.key)
		r.Header.Set("X-Request-Id", "client-1")
		traceID := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled})
		r = r.WithContext(trace.ContextWithSpanContext(r.Context(), sc))
		w := httptest.NewRecorder()
		b.srv.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		line := log.only(t)
		want := map[string]any{
			"level": "INFO", "request_id": w.Header().Get("X-Request-Id"), "client_request_id": "client-1",
			"method": "POST", "path": "/v1/chat/completions", "endpoint": "chat", "status": 200.0,
			"key_name": line["key_id"], "model": "m", "candidate": "up/m",
			"attempts": 1.0, "outcome": "ok", "stream": stream, "trace_id": traceID.String(),
		}
		absent := []string{"error"}
		if !stream {
			absent = append(absent, "ttfb_ms")
		}
		wantFields(t, line, want, absent...)
		for _, k := range []string{"duration_ms", "queue_wait_ms", "upstream_ms", "tokens_in", "tokens_out"} {
			if _, ok := line[k].(float64); !ok {
				t.Errorf("%s = %v, want a number", k, line[k])
			}
		}
		if _, ok := line["ttfb_ms"].(float64); stream && !ok {
			t.Errorf("ttfb_ms = %v on a stream, want a number", line["ttfb_ms"])
		}
		if line["request_id"] == "" || !strings.HasPrefix(line["key_id"].(string), "key_") {
			t.Errorf("line %v: no request id or key id", line)
		}
		text := log.text()
		for _, secret := range []string{secretPrompt, b.key, "Bearer"} {
			if strings.Contains(text, secret) {
				t.Errorf("the log shows %q: %s", secret, text)
			}
		}
	}
}

// TestAccessLogEndpoints: every dialect's model request, and a task
// submission, gets its line naming its endpoint and model.
func TestAccessLogEndpoints(t *testing.T) {
	t.Parallel()
	log := &accessLog{}
	b := setup(t, setupOpts{tasks: &task.Config{}, translateResponses: true, deps: func(d *Deps) { d.Logger = log.logger() }})
	for _, tc := range []struct {
		path, body, endpoint, model string
		status                      int
	}{
		{"/v1/responses", `{"model":"m","input":"` + secretPrompt + `"}`, "responses", "m", http.StatusOK},
		{"/v1/messages", `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"` + secretPrompt + `"}]}`, "messages", "m", http.StatusOK},
		{"/v1/tasks", `{"model":"v","input":{"prompt":"` + secretPrompt + `"}}`, "", "v", http.StatusAccepted},
	} {
		before := len(log.requests(t))
		resp := b.post(t, tc.path, tc.body, http.Header{"X-Api-Key": {b.key}, "Anthropic-Version": {"2023-06-01"}})
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d", tc.path, resp.StatusCode)
		}
		lines := log.waitRequests(t, before+1)
		if len(lines) != before+1 {
			t.Fatalf("%s: %d new access log lines, want 1", tc.path, len(lines)-before)
		}
		want := map[string]any{"path": tc.path, "model": tc.model, "status": float64(tc.status)}
		if tc.endpoint != "" {
			want["endpoint"], want["candidate"] = tc.endpoint, "up/m"
		}
		wantFields(t, lines[before], want, "error")
	}
	if text := log.text(); strings.Contains(text, secretPrompt) || strings.Contains(text, b.key) {
		t.Errorf("the log shows the prompt or the key: %s", text)
	}
}

// TestAccessLogRefusals: a request refused — its key (401), its body
// (400), a full queue (429), an upstream that timed out (504) — gets
// its line with the error code it was answered.
func TestAccessLogRefusals(t *testing.T) {
	t.Parallel()
	t.Run("unauthorized", func(t *testing.T) {
		t.Parallel()
		log := &accessLog{}
		b := setup(t, setupOpts{deps: func(d *Deps) { d.Logger = log.logger() }})
		b.key = "sk-not-a-key-of-ours"
		b.post(t, "/v1/chat/completions", chatJSON, nil)
		wantFields(t, log.only(t), map[string]any{"status": 401.0, "error": "unauthorized", "endpoint": "chat"}, "key_id", "model", "attempts")
		if strings.Contains(log.text(), b.key) {
			t.Errorf("the log shows the secret refused: %s", log.text())
		}
	})
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		log := &accessLog{}
		b := setup(t, setupOpts{deps: func(d *Deps) { d.Logger = log.logger() }})
		b.post(t, "/v1/chat/completions", `{"model":"m","messages":"`+secretPrompt+`"}`, nil)
		wantFields(t, log.only(t), map[string]any{"status": 400.0, "error": "invalid_request"}, "attempts")
		if strings.Contains(log.text(), secretPrompt) {
			t.Errorf("the log shows the prompt: %s", log.text())
		}
	})
	t.Run("queue full", func(t *testing.T) {
		t.Parallel()
		log := &accessLog{}
		b := setup(t, setupOpts{limits: weir.Limits{Concurrency: 1, QueueLimit: 1}, deps: func(d *Deps) { d.Logger = log.logger() }})
		scope := weir.PlatformModelScope("up/m")
		need := []admission.Candidate{{Needs: []admission.Need{{Scope: scope, Amount: 1}}}}
		if _, err := b.engine.TryAcquire(t.Context(), admission.Request{ID: "held", Candidates: need}); err != nil {
			t.Fatal(err)
		}
		if err := b.engine.Enqueue(t.Context(), admission.Request{ID: "queued", Candidates: need}, func(admission.Lease, error) {}); err != nil {
			t.Fatal(err)
		}
		b.post(t, "/v1/chat/completions", chatJSON, nil)
		wantFields(t, log.only(t), map[string]any{"status": 429.0, "error": "queue_full", "outcome": "queue_full", "model": "m", "attempts": 0.0})
	})
	t.Run("upstream timeout", func(t *testing.T) {
		t.Parallel()
		log := &accessLog{}
		clk := clock.NewFake(time.Unix(1_000_000, 0))
		b := setup(t, setupOpts{
			clock: clk, gwCfg: gateway.Config{UpstreamIdleTimeout: 10 * time.Second}, upstream: stallUpstream(nil),
			catalog: &weir.Catalog{
				Platforms:      []weir.Platform{{Name: "stall", Kind: "openai", BaseURL: "UP"}},
				PlatformModels: []weir.PlatformModel{{Name: "stall/m", Platform: "stall", Upstream: "stall-model"}},
				Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "stall/m"}}}},
			},
			deps: func(d *Deps) { d.Logger = log.logger() },
		})
		status, _, done := b.read(t, chatJSON)
		advanceUntil(t, clk, 5*time.Second, time.Minute, done)
		if *status != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504", *status)
		}
		line := log.only(t)
		wantFields(t, line, map[string]any{"status": 504.0, "error": "upstream_timeout", "candidate": "stall/m"})
		if line["attempts"].(float64) < 1 || line["upstream_ms"].(float64) < 10_000 {
			t.Errorf("attempts %v, upstream_ms %v: want an attempt that waited out the 10s idle timeout", line["attempts"], line["upstream_ms"])
		}
	})
}

// TestAccessLogOff: with NoAccessLog nothing is logged of a request
// that went well.
func TestAccessLogOff(t *testing.T) {
	t.Parallel()
	log := &accessLog{}
	b := setup(t, setupOpts{cfg: Config{NoAccessLog: true}, deps: func(d *Deps) { d.Logger = log.logger() }})
	if resp := b.post(t, "/v1/chat/completions", chatJSON, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if n := len(log.requests(t)); n != 0 {
		t.Errorf("%d access log lines with the access log off: %s", n, log.text())
	}
}

// TestAccessLogQuietRoutes: a probe's line is at debug, not info.
func TestAccessLogQuietRoutes(t *testing.T) {
	t.Parallel()
	log := &accessLog{}
	b := setup(t, setupOpts{deps: func(d *Deps) { d.Logger = log.logger() }})
	resp, err := http.Get(b.http.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	wantFields(t, log.only(t), map[string]any{"level": "DEBUG", "path": "/healthz", "status": 200.0}, "key_id", "error")
}

// TestAccessLogClientGone: a client that left before its answer started
// is logged 499, though nothing was written to it.
func TestAccessLogClientGone(t *testing.T) {
	t.Parallel()
	log := &accessLog{}
	arrived := make(chan struct{})
	b := setup(t, setupOpts{
		deps: func(d *Deps) { d.Logger = log.logger() },
		upstream: func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // the server sees a hang-up once the body is read
				close(arrived)
				<-r.Context().Done()
			})
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(chatJSON))
	r.Header.Set("Authorization", "Bearer "+b.key)
	served := make(chan struct{})
	go func() {
		defer close(served)
		b.srv.Handler().ServeHTTP(httptest.NewRecorder(), r)
	}()
	<-arrived
	cancel()
	<-served
	wantFields(t, log.only(t), map[string]any{"status": 499.0, "outcome": "cancelled", "attempts": 1.0})
}

// The answer's start is timed for a stream's ttfb_ms alone: an answer
// that is not a stream's reads no clock for it.
func TestAnswerStartTimedForStreamsOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		call  *gateway.Call
		reads int
	}{
		{"no call", nil, 0},
		{"a call", &gateway.Call{}, 0},
		{"a stream", &gateway.Call{Stream: true}, 1},
	} {
		clk := clock.NewFake(time.Unix(100, 0))
		ri := &reqInfo{}
		ri.access.call = c.call
		w := &statusWriter{ResponseWriter: httptest.NewRecorder(), ri: ri, clock: clk}
		w.WriteHeader(http.StatusOK)
		if clk.Reads() != c.reads || w.at.IsZero() != (c.reads == 0) {
			t.Errorf("%s: %d reads of the time, answer started at %v; want %d", c.name, clk.Reads(), w.at, c.reads)
		}
	}
}
