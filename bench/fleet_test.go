package bench

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/loadgen"
)

// The children's catalog is the in-process gateway's: the same scopes
// and limits, so that serve and fleet differ from weir only in how Weir
// runs.
func TestOverheadCatalogYAMLIsOverheadCatalog(t *testing.T) {
	t.Parallel()
	const mockURL = "http://127.0.0.1:9/v1"
	file := serveFile{Server: overheadServer, Storage: sqliteStorage("/tmp/x.db"), Rest: overheadCatalogYAML(mockURL)}
	got, err := config.Parse([]byte(file.text()))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, file.text())
	}
	want := overheadCatalog(mockURL, "/tmp/x.db")
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, part := range []struct {
		name      string
		got, want any
	}{
		{"platforms", got.Platforms, want.Platforms},
		{"platform_models", got.PlatformModels, want.PlatformModels},
		{"models", got.Models, want.Models},
		{"groups", got.Groups, want.Groups},
		{"default_max_wait", got.Server.DefaultMaxWait, want.Server.DefaultMaxWait},
		{"storage", got.Storage, want.Storage},
	} {
		if !reflect.DeepEqual(part.got, part.want) {
			t.Errorf("%s: file gives %+v, overheadCatalog %+v", part.name, part.got, part.want)
		}
	}
	if got.Server.Listen != "127.0.0.1:0" || got.Server.LogLevel != "info" {
		t.Errorf("server listens on %q, logs at %q; want 127.0.0.1:0 and info (the serving line names the port)", got.Server.Listen, got.Server.LogLevel)
	}
}

func TestFleetStorageMakesAReplica(t *testing.T) {
	t.Parallel()
	dsn := withParam("postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "search_path", "weir_bench_x")
	file := serveFile{Storage: fleetStorage(dsn, "r1"), Rest: overheadCatalogYAML("http://127.0.0.1:9/v1")}
	cfg, err := config.Parse([]byte(file.text()))
	if err != nil {
		t.Fatalf("%v in:\n%s", err, file.text())
	}
	if cfg.Storage.Driver != "postgres" || cfg.Storage.DSN != dsn {
		t.Errorf("storage %+v, want driver postgres on %s", cfg.Storage, dsn)
	}
	if cfg.Fleet.Replica != "r1" || cfg.Fleet.Listen != "127.0.0.1:0" {
		t.Errorf("fleet %+v, want replica r1 listening on 127.0.0.1:0", cfg.Fleet)
	}
	if d := config.Default().Fleet; cfg.Fleet.TermTTL != d.TermTTL || cfg.Fleet.HeartbeatTimeout != d.HeartbeatTimeout {
		t.Errorf("fleet timings %+v, want the defaults", cfg.Fleet)
	}
	if got := withParam("host=/tmp dbname=test", "search_path", "s"); got != "host=/tmp dbname=test search_path=s" {
		t.Errorf("key=value DSN: %q", got)
	}
}

func TestFleetConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fleet FleetConfig
		want  string
	}{
		{FleetConfig{Replicas: -1, DSN: "x"}, "--fleet"},
		{FleetConfig{Replicas: 2}, "--dsn"},
	} {
		if err := tc.fleet.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: want an error naming %s, got %v", tc.fleet, tc.want, err)
		}
	}
	if err := (FleetConfig{}).validate(); err != nil {
		t.Errorf("no fleet: %v", err)
	}
	// A fleet runs children, so Overhead then needs the weir binary.
	c := OverheadConfig{
		Weir: Weir{Start: noStart, CreateKey: noKey},
		Rate: 100, Duration: time.Second, Rounds: 1, Concurrency: 8, ProfileTarget: "weir",
		Fleet: FleetConfig{Replicas: 2, DSN: "postgres://x"},
	}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "Weir.Exe") {
		t.Errorf("a fleet without the weir binary: want an error naming Weir.Exe, got %v", err)
	}
}

func TestFleetVerdictOnFleetsLine(t *testing.T) {
	t.Parallel()
	lat := func(p50, p99 time.Duration) row { return row{lat: loadgen.Percentiles{P50: p50, P99: p99}} }
	for _, tc := range []struct {
		fleet row
		want  string
	}{
		{lat(2*time.Millisecond, 5*time.Millisecond), "p50 2.00x, p99 2.00x (target <= 2x: met)"},
		{lat(3*time.Millisecond, 3*time.Millisecond), "p50 4.00x, p99 1.00x (target <= 2x: missed)"},
	} {
		rows := map[string]row{
			"direct": lat(time.Millisecond, time.Millisecond),
			"serve":  lat(1500*time.Microsecond, 3*time.Millisecond),
			"fleet":  tc.fleet,
		}
		var b strings.Builder
		printOverhead(&b, "fleet", rows)
		if !strings.Contains(b.String(), "fleet/serve added: "+tc.want) {
			t.Errorf("fleet's line %q, want it to end %q", b.String(), tc.want)
		}
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	deadline := time.Now().Add(5 * time.Second)
	for cpuTime(os.Getpid()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no CPU time read from /proc/<pid>/stat after 5s of spinning")
		}
		for i := 0; i < 1e6; i++ {
			_ = i * i
		}
	}
}
