package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/serve"
)

// TestDemoBurst runs the demo's burst on a fast mock: every request is
// answered, and the report counts them and says "No 429s". Written to
// something that is not a terminal (a file, a pipe, this buffer), its
// progress comes as plain lines: no carriage return, no escape code.
func TestDemoBurst(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	err := runDemo(t.Context(), &out, demoOptions{listen: "127.0.0.1:0", dir: t.TempDir(), burst: 6, latency: 10 * time.Millisecond, exit: true})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"answers: 6 × HTTP 200", "the provider had 2 at once at most", "No 429s"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.ContainsAny(got, "\r\x1b") {
		t.Errorf("carriage returns or escape codes in plain output:\n%q", got)
	}
	progress := 0
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "  running [") {
			progress++
			if len(line) > 120 {
				t.Errorf("a progress line of %d bytes: %q", len(line), line)
			}
		}
	}
	if progress < 2 {
		t.Errorf("%d progress lines, want the first and the last at least:\n%s", progress, got)
	}
}

// TestProgressLine: on a terminal the line is redrawn in place; elsewhere
// a line is written when it has changed and a second has passed since the
// last, and the last line always.
func TestProgressLine(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var plain bytes.Buffer
	p := progressLine{w: &plain, every: time.Second}
	p.show(t0, "a ")
	p.show(t0.Add(500*time.Millisecond), "b") // too soon
	p.show(t0.Add(time.Second), "c")
	p.show(t0.Add(3*time.Second), "c") // unchanged
	p.show(t0.Add(3500*time.Millisecond), "d")
	p.done("e")
	if got, want := plain.String(), "a\nc\nd\ne\n"; got != want {
		t.Errorf("plain: %q, want %q", got, want)
	}

	var term bytes.Buffer
	p = progressLine{w: &term, inPlace: true, every: time.Second}
	p.show(t0, "long line")
	p.show(t0, "short")
	p.done("end")
	if got, want := term.String(), "\rlong line\rshort    \rend      \n"; got != want {
		t.Errorf("in place: %q, want %q", got, want)
	}
}

// TestFitBurst: a burst larger than the model's queue_limit, or longer
// than the default wait cap, gets the room it needs.
func TestFitBurst(t *testing.T) {
	t.Parallel()
	cfg := demoConfig("http://127.0.0.1:1/v1", "127.0.0.1:0", "")
	per := demoPer(1500 * time.Millisecond)
	fitBurst(cfg, 110, per)
	if got := demoQueueLimit(cfg); got < 110 {
		t.Errorf("queue_limit %d for a burst of 110", got)
	}
	if last := 55 * per; cfg.Server.DefaultMaxWait < last {
		t.Errorf("default_max_wait %s, but the last of the burst waits about %s", cfg.Server.DefaultMaxWait, last)
	}
}

// TestReportBurst: a burst that did not all get through is reported as it
// was, counted by status and code, never as "No 429s".
func TestReportBurst(t *testing.T) {
	t.Parallel()
	cfg := demoConfig("http://127.0.0.1:1/v1", "127.0.0.1:0", "")
	results := []burstResult{
		{status: 200, took: time.Second},
		{status: 200, waited: 2 * time.Second, took: 3 * time.Second},
		{status: 429, code: "queue_full", took: 10 * time.Millisecond},
		{status: 503, code: "queue_timeout", took: time.Minute},
		{status: 429, code: "queue_full", took: 10 * time.Millisecond},
	}
	var out bytes.Buffer
	reportBurst(&out, results, 2, cfg)
	got := out.String()
	for _, want := range []string{"2 × HTTP 200, 2 × HTTP 429 queue_full, 1 × HTTP 503 queue_timeout", "queued:  1 of 5", "Not every request got through"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "No 429s") {
		t.Errorf("said No 429s:\n%s", got)
	}
}

// lineWriter sends each write (a log line) to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// TestDemoLog: in the demo every request gets one line when it ends,
// a model request with its model and queue wait; River's and the
// gateway's routine lines are left out.
func TestDemoLog(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(mock.New(mock.Config{}))
	defer up.Close()
	cfg := demoConfig(up.URL+"/v1", "127.0.0.1:0", filepath.Join(t.TempDir(), "weir.db"))
	lines := make(lineWriter, 16)
	m := &serve.Main{Config: cfg, Logger: slog.New(newDemoLog(lines))}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	key := weir.APIKey{Name: "demo", Group: "default"}
	secret, err := serve.CreateKey(t.Context(), m.DB, &key)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+m.Addr()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The answer reaches the client before its line is written.
	chat := <-lines
	if !strings.Contains(chat, "POST   /v1/chat/completions") || !strings.Contains(chat, " 200 ") ||
		!strings.Contains(chat, "gpt-4o-mini, queued ") {
		t.Errorf("chat request logged as %q", chat)
	}
	resp, err = http.Get("http://" + m.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if health := <-lines; !strings.Contains(health, "GET    /healthz") {
		t.Errorf("the second line is %q, want the health check's", health)
	}
}
