package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weir-gateway/weir/config"
)

// syncBuffer is a bytes.Buffer several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startMain starts Main on cfg with a JSON logger at info into the
// returned buffer; stop stops it, at the latest when the test ends.
func startMain(t *testing.T, cfg *config.Config) (m *Main, stop func() error, logs *syncBuffer, err error) {
	t.Helper()
	cfg.Storage.Path = filepath.Join(t.TempDir(), "weir.db")
	logs = &syncBuffer{}
	m = &Main{Config: cfg, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	err = m.Start(t.Context())
	stop = func() error { return m.Stop(context.Background()) }
	t.Cleanup(func() { _ = stop() })
	return m, stop, logs, err
}

// closedPort is the URL of a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// TestServeBusyPort: an address another process holds is refused with
// what to do about it.
func TestServeBusyPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := config.Default()
	cfg.Server.Listen = ln.Addr().String()
	_, _, _, err = startMain(t, cfg)
	if err == nil || !strings.Contains(err.Error(), "--listen") || !strings.Contains(err.Error(), "WEIR_SERVER_LISTEN") {
		t.Fatalf("err %v, want a hint at --listen and WEIR_SERVER_LISTEN", err)
	}
}

// TestServeEmptyCatalogWarns: a gateway with no models serves (its admin
// and health endpoints work) but says that every model request will fail.
func TestServeEmptyCatalogWarns(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	_, _, logs, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"the catalog has no models`) {
		t.Errorf("no warning about the empty catalog in:\n%s", logs)
	}
}

// TestServeLogs: at the default level River's routine lines are not
// logged, and durations carry their unit.
func TestServeLogs(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.LogLevel = "info"
	_, stop, logs, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = stop() // River logs its start and stop
	sawRecovered := false
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line not JSON: %q", line)
		}
		if rec["component"] == "river" && rec["level"] == "INFO" {
			t.Errorf("River's info line logged at the default level: %s", line)
		}
		if rec["msg"] == "tasks recovered" {
			sawRecovered = true
			if _, ok := rec["took_ms"]; !ok {
				t.Errorf("recovery time without its unit: %s", line)
			}
		}
	}
	if !sawRecovered {
		t.Errorf("no tasks recovered line in:\n%s", logs)
	}
}

func TestRiverLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, tc := range []struct {
		level    string
		infoSeen bool
	}{{"info", false}, {"warn", false}, {"debug", true}, {"DEBUG", true}} {
		buf.Reset()
		l := riverLogger(base, tc.level).With("component", "river")
		l.Info("River client started")
		l.Warn("something River worries about")
		out := buf.String()
		if got := strings.Contains(out, "River client started"); got != tc.infoSeen {
			t.Errorf("level %s: info logged %v, want %v", tc.level, got, tc.infoSeen)
		}
		if !strings.Contains(out, "something River worries about") || !strings.Contains(out, `"component":"river"`) {
			t.Errorf("level %s: the warning lost: %s", tc.level, out)
		}
	}
}

// TestStopTwice: a second Stop (a signal during a failed start's cleanup,
// a test's deferred stop) returns the first's result and panics nothing.
func TestStopTwice(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	_, stop, _, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := stop()
	if second := stop(); second != first {
		t.Fatalf("second Stop returned %v, the first %v", second, first)
	}
}
