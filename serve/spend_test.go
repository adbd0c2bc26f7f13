package serve

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/sqlite"
)

// TestRecoverAfter: the horizon of the spend journal is the longest call
// timeout, a platform's or the server's (10m unset), two flushes and a
// minute; none when calls have no bound.
func TestRecoverAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what      string
		server    time.Duration
		platforms []time.Duration
		want      time.Duration
	}{
		{"the default", 0, nil, 10*time.Minute + 2*time.Second + time.Minute},
		{"the server's", 3 * time.Minute, []time.Duration{0, time.Minute}, 3*time.Minute + 2*time.Second + time.Minute},
		{"a platform's longer", 3 * time.Minute, []time.Duration{0, time.Hour}, time.Hour + 2*time.Second + time.Minute},
		{"no bound", config.NoBound, []time.Duration{time.Minute}, 0},
	} {
		cfg := config.Default()
		cfg.Server.UpstreamCallTimeout = tc.server
		for _, d := range tc.platforms {
			cfg.Platforms = append(cfg.Platforms, config.Platform{CallTimeout: d})
		}
		if got := recoverAfter(cfg, time.Second); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, got, tc.want)
		}
	}
}

// TestServeRecoversSpend: serve on SQLite counts at their estimate the
// reservations an earlier process left, as it starts, and says so.
func TestServeRecoversSpend(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weir.db")
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	k := weir.APIKey{ID: "key-1", Hash: strings.Repeat("a", 64), Group: "default", CreatedAt: at}
	r := weir.Reservation{RequestID: "req-1", KeyID: k.ID, Group: "default", Model: "m", Estimate: weir.MoneyScale, At: at}
	if err := db.KeyCreate(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if err := db.SpendReserve(t.Context(), []weir.Reservation{r}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Path = path
	logs := &syncBuffer{}
	m := &Main{Config: cfg, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	t.Cleanup(func() { _ = m.Stop(context.Background()) })
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	list, err := m.DB.UsageList(t.Context(), weir.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].RequestID != r.RequestID || list[0].Cost != r.Estimate ||
		list[0].Outcome != weir.OutcomeInterrupted || !list[0].At.Equal(at) {
		t.Errorf("usage after start = %+v, want the reservation counted at its estimate and time", list)
	}
	found := false
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line not JSON: %q", line)
		}
		if strings.HasPrefix(rec["msg"].(string), "spend recovered") {
			found = rec["level"] == "INFO" && rec["requests"] == float64(1)
		}
	}
	if !found {
		t.Errorf("no info line of one request recovered in:\n%s", logs)
	}
}
