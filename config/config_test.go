package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// env is a fake environment for parse, so most tests need not touch the
// process environment and can run in parallel.
func env(kv ...string) lookupFunc {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// catalogYAML is a small valid catalog that tests append to or edit.
const catalogYAML = `
platforms:
  - name: a
    base_url: http://127.0.0.1:9090/v1
    api_key_env: A_KEY
  - name: b
    base_url: http://127.0.0.1:9090/v1
platform_models:
  - name: a/m
    platform: a
    upstream: m
    concurrency: 2
  - name: b/m
    platform: b
    upstream: m
models:
  - name: m
    kind: chat
    candidates:
      - platform_model: a/m
        priority: 1
      - platform_model: b/m
        weight: 3
groups:
  - name: premium
    priority: 5
`

func TestDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want func(c *Config)
	}{
		{"empty file", "", func(c *Config) {}},
		{"comments only", "# nothing\n", func(c *Config) {}},
		{"empty sections", "server:\nstorage:\n", func(c *Config) {}},
		{"one field keeps the rest", "server:\n  listen: 0.0.0.0:9000\n", func(c *Config) {
			c.Server.Listen = "0.0.0.0:9000"
		}},
		{"nested section keeps its sibling", "server:\n  cooldown:\n    failures: 5\n", func(c *Config) {
			c.Server.Cooldown.Failures = 5
		}},
		{"explicit zero is kept", "server:\n  cooldown:\n    failures: 0\n", func(c *Config) {
			c.Server.Cooldown.Failures = 0
		}},
		{"a bound's zero is no bound", "server:\n  default_max_wait: 0s\n  upstream_timeout: 0s\n  upstream_call_timeout: 0s\n", func(c *Config) {
			c.Server.DefaultMaxWait = NoBound
			c.Server.UpstreamTimeout = NoBound
			c.Server.UpstreamCallTimeout = NoBound
		}},
		{"durations", "server:\n  shutdown_timeout: 1m30s\n  usage_flush_interval: 250ms\n", func(c *Config) {
			c.Server.ShutdownTimeout = 90 * time.Second
			c.Server.UsageFlushInterval = 250 * time.Millisecond
		}},
		{"storage", "storage:\n  path: /var/lib/weir/weir.db\n", func(c *Config) {
			c.Storage.Path = "/var/lib/weir/weir.db"
		}},
		{"empty fleet section", "fleet:\n", func(c *Config) {}},
		{"fleet keeps its other defaults", "fleet:\n  term_ttl: 20s\n", func(c *Config) {
			c.Fleet.TermTTL = 20 * time.Second
		}},
		{"default group", "default_group: standard\n", func(c *Config) {
			c.DefaultGroup = "standard"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parse([]byte(tt.yaml), env())
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			tt.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDefaultValues(t *testing.T) {
	t.Parallel()
	// The documented defaults, spelled out once so that a changed default
	// is a deliberate edit here, in the field comments and in the example.
	want := &Config{
		Server: Server{
			Listen:             "127.0.0.1:8080",
			MaxBodyBytes:       10 * 1024 * 1024,
			ShutdownTimeout:    30 * time.Second,
			RetryBudget:        3,
			Cooldown:           Cooldown{Failures: 3, Duration: 30 * time.Second},
			MaxResponseBytes:   64 << 20,
			LogLevel:           "info",
			AccessLog:          true,
			AdminToken:         "",
			UsageFlushInterval: time.Second,
			KeyCacheTTL:        2 * time.Second,
			MaxEndUserBudgets:  10000,
			HeapFloor:          0,
			ReadHeaderTimeout:  30 * time.Second,
			BodyTimeout:        60 * time.Second,
			IdleTimeout:        120 * time.Second,
			AdminLoopback:      "auto",
			MetricsAuth:        false,
			MetricsSpendByKey:  false,
		},
		Storage: Storage{Driver: "sqlite", Path: "weir.db"},
		Fleet: Fleet{
			Replica: "", Listen: "", Advertise: "", Secret: "",
			TermTTL: 10 * time.Second, HeartbeatTimeout: 6 * time.Second, Poll: 5 * time.Second,
			Unavailable: "closed", ReleaseSilent: "call_timeout",
		},
		Edge: Edge{HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 6 * time.Second, ForgetAfter: 24 * time.Hour},
		Tasks: Tasks{
			Workers: 100, QueueLimit: 10_000, MaxWait: 24 * time.Hour, PollMin: 250 * time.Millisecond, PollMax: 10 * time.Second,
			MaxAttempts: 5, LeaseTTL: 5 * time.Minute, RescueAfter: 2 * time.Minute, Retention: 30 * 24 * time.Hour,
		},
		DefaultGroup: "default",
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() = %+v\nwant %+v", got, want)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	// The fleet's defaults are valid where they are used, too.
	pg := Default()
	pg.Storage = Storage{Driver: "postgres", DSN: "host=db"}
	if err := pg.Validate(); err != nil {
		t.Errorf("Default() on postgres: Validate() = %v", err)
	}
}

func TestFleetDecode(t *testing.T) {
	t.Parallel()
	data := `
storage:
  driver: postgres
  dsn: postgres://weir@db:5432/weir
fleet:
  replica: weir-1
  listen: 10.0.0.5:7946
  advertise: weir-1.internal:7946
  secret: ${FLEET_SECRET}
  term_ttl: 15s
  heartbeat_timeout: 9s
  poll: 1500ms
  unavailable: open
  release_silent: heartbeat
`
	c, err := parse([]byte(data), env("FLEET_SECRET", "0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	want := Fleet{
		Replica: "weir-1", Listen: "10.0.0.5:7946", Advertise: "weir-1.internal:7946", Secret: "0123456789abcdef",
		TermTTL: 15 * time.Second, HeartbeatTimeout: 9 * time.Second, Poll: 1500 * time.Millisecond,
		Unavailable: "open", ReleaseSilent: "heartbeat",
	}
	if c.Fleet != want {
		t.Errorf("fleet = %+v\nwant %+v", c.Fleet, want)
	}
}

// TestFleetListenFollowsTheAPI: with no fleet.listen, the fleet listener
// is on server.listen's host (a free port), so that a loopback API does
// not put the fleet's port on every interface; a fleet.listen given is
// taken as it is.
func TestFleetListenFollowsTheAPI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server, fleet string
		env           []string
		want          string
	}{
		{want: "127.0.0.1:0"}, // the defaults
		{server: "127.0.0.1:8080", want: "127.0.0.1:0"},
		{server: "[::1]:8080", want: "[::1]:0"},
		{server: "localhost:8080", want: "localhost:0"},
		{server: "10.0.0.5:8080", want: "10.0.0.5:0"},
		{server: "0.0.0.0:8080", want: "0.0.0.0:0"},
		{server: ":8080", want: ":0"},
		{server: "127.0.0.1:8080", env: []string{"WEIR_SERVER_LISTEN", "10.0.0.6:8080"}, want: "10.0.0.6:0"},
		{server: "127.0.0.1:8080", fleet: ":0", want: ":0"},
		{server: "127.0.0.1:8080", fleet: "10.0.0.5:7946", want: "10.0.0.5:7946"},
		{server: "127.0.0.1:8080", env: []string{"WEIR_FLEET_LISTEN", "0.0.0.0:7946"}, want: "0.0.0.0:7946"},
	} {
		data := "storage:\n  driver: postgres\n  dsn: postgres://weir@db:5432/weir\n"
		if tc.server != "" {
			data += fmt.Sprintf("server:\n  listen: %q\n", tc.server)
		}
		if tc.fleet != "" {
			data += fmt.Sprintf("fleet:\n  listen: %q\n", tc.fleet)
		}
		c, err := parse([]byte(data), env(tc.env...))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.FleetListen(); got != tc.want {
			t.Errorf("server.listen %q, fleet.listen %q, env %q: the fleet listens on %q; want %q", tc.server, tc.fleet, tc.env, got, tc.want)
		}
	}
}

// TestFleetIgnoredOnSQLite: on sqlite the fleet section is not used, so
// values that would be refused on postgres pass, but for negative
// durations, which mean nothing anywhere.
func TestFleetIgnoredOnSQLite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		want string // "" for valid
	}{
		{"fleet:\n", ""},
		{"fleet: {}\n", ""},
		{"fleet:\n  replica: ''\n  listen: ''\n  advertise: ''\n  secret: ''\n  term_ttl: 0s\n  heartbeat_timeout: 0s\n  poll: 0s\n", ""},
		{"fleet:\n  listen: nowhere\n  advertise: ':0'\n  secret: short\n  replica: 'a b'\n  poll: 1h\n", ""},
		{"fleet:\n  term_ttl: -1s\n", "fleet.term_ttl: must not be negative"},
		{"fleet:\n  heartbeat_timeout: -1s\n", "fleet.heartbeat_timeout: must not be negative"},
		{"fleet:\n  poll: -1s\n", "fleet.poll: must not be negative"},
	} {
		_, err := parse([]byte(tc.yaml), env())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.yaml, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%q: err = %v; want %q", tc.yaml, err, tc.want)
		}
	}
	// A Config built in code with no fleet section at all.
	c := Default()
	c.Fleet = Fleet{}
	if err := c.Validate(); err != nil {
		t.Errorf("sqlite, zero Fleet: Validate() = %v", err)
	}
}

func TestEntryDefaults(t *testing.T) {
	t.Parallel()
	c, err := parse([]byte(catalogYAML), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.Platforms[0].Kind != "openai" || c.Platforms[1].Kind != "openai" {
		t.Errorf("platform kinds = %q, %q; want openai", c.Platforms[0].Kind, c.Platforms[1].Kind)
	}
	cds := c.Models[0].Candidates
	if cds[0].Weight != 1 || cds[1].Weight != 3 {
		t.Errorf("weights = %d, %d; want 1 (default), 3", cds[0].Weight, cds[1].Weight)
	}
	if cds[1].Priority != 0 {
		t.Errorf("priority = %d; want 0 (default)", cds[1].Priority)
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env   string
		value string
		want  func(c *Config)
	}{
		{"WEIR_SERVER_LISTEN", ":9999", func(c *Config) { c.Server.Listen = ":9999" }},
		{"WEIR_SERVER_MAX_BODY_BYTES", "1024", func(c *Config) { c.Server.MaxBodyBytes = 1024 }},
		{"WEIR_SERVER_MAX_UPLOAD_BYTES", "2048", func(c *Config) { c.Server.MaxUploadBytes = 2048 }},
		{"WEIR_SERVER_DEFAULT_MAX_WAIT", "5s", func(c *Config) { c.Server.DefaultMaxWait = 5 * time.Second }},
		{"WEIR_SERVER_SHUTDOWN_TIMEOUT", "1m", func(c *Config) { c.Server.ShutdownTimeout = time.Minute }},
		{"WEIR_SERVER_READ_HEADER_TIMEOUT", "5s", func(c *Config) { c.Server.ReadHeaderTimeout = 5 * time.Second }},
		{"WEIR_SERVER_BODY_TIMEOUT", "2m", func(c *Config) { c.Server.BodyTimeout = 2 * time.Minute }},
		{"WEIR_SERVER_IDLE_TIMEOUT", "10s", func(c *Config) { c.Server.IdleTimeout = 10 * time.Second }},
		{"WEIR_SERVER_RETRY_BUDGET", "7", func(c *Config) { c.Server.RetryBudget = 7 }},
		{"WEIR_SERVER_COOLDOWN_FAILURES", "0", func(c *Config) { c.Server.Cooldown.Failures = 0 }},
		{"WEIR_SERVER_COOLDOWN_DURATION", "2m", func(c *Config) { c.Server.Cooldown.Duration = 2 * time.Minute }},
		{"WEIR_SERVER_UPSTREAM_TIMEOUT", "10s", func(c *Config) { c.Server.UpstreamTimeout = 10 * time.Second }},
		{"WEIR_SERVER_UPSTREAM_IDLE_TIMEOUT", "15s", func(c *Config) { c.Server.UpstreamIdleTimeout = 15 * time.Second }},
		{"WEIR_SERVER_UPSTREAM_CALL_TIMEOUT", "1h", func(c *Config) { c.Server.UpstreamCallTimeout = time.Hour }},
		{"WEIR_SERVER_STREAM_WRITE_TIMEOUT", "5s", func(c *Config) { c.Server.StreamWriteTimeout = 5 * time.Second }},
		{"WEIR_SERVER_STREAM_WRITE_TIMEOUT", "0s", func(c *Config) { c.Server.StreamWriteTimeout = NoBound }},
		{"WEIR_SERVER_MAX_RESPONSE_BYTES", "1048576", func(c *Config) { c.Server.MaxResponseBytes = 1 << 20 }},
		{"WEIR_SERVER_LOG_LEVEL", "debug", func(c *Config) { c.Server.LogLevel = "debug" }},
		{"WEIR_SERVER_ADMIN_TOKEN", "s3cret", func(c *Config) { c.Server.AdminToken = "s3cret" }},
		{"WEIR_SERVER_ADMIN_LOOPBACK", "false", func(c *Config) { c.Server.AdminLoopback = "false" }},
		{"WEIR_SERVER_METRICS_AUTH", "true", func(c *Config) { c.Server.MetricsAuth = true }},
		{"WEIR_SERVER_ACCESS_LOG", "false", func(c *Config) { c.Server.AccessLog = false }},
		{"WEIR_SERVER_METRICS_SPEND_BY_KEY", "true", func(c *Config) { c.Server.MetricsSpendByKey = true }},
		{"WEIR_SERVER_PUBLIC_URL", "https://weir.example.com", func(c *Config) { c.Server.PublicURL = "https://weir.example.com" }},
		{"WEIR_SERVER_USAGE_FLUSH_INTERVAL", "100ms", func(c *Config) { c.Server.UsageFlushInterval = 100 * time.Millisecond }},
		{"WEIR_SERVER_KEY_CACHE_TTL", "500ms", func(c *Config) { c.Server.KeyCacheTTL = 500 * time.Millisecond }},
		{"WEIR_SERVER_MAX_END_USER_BUDGETS", "20", func(c *Config) { c.Server.MaxEndUserBudgets = 20 }},
		{"WEIR_SERVER_HEAP_FLOOR", "134217728", func(c *Config) { c.Server.HeapFloor = 128 << 20 }},
		{"WEIR_STORAGE_DRIVER", "sqlite", func(c *Config) {}},
		{"WEIR_STORAGE_PATH", "/tmp/x.db", func(c *Config) { c.Storage.Path = "/tmp/x.db" }},
		{"WEIR_STORAGE_DSN", "postgres://weir:pw@db:5432/weir", func(c *Config) { c.Storage.DSN = "postgres://weir:pw@db:5432/weir" }},
		{"WEIR_FLEET_REPLICA", "weir-2", func(c *Config) { c.Fleet.Replica = "weir-2" }},
		{"WEIR_FLEET_LISTEN", "0.0.0.0:7946", func(c *Config) { c.Fleet.Listen = "0.0.0.0:7946" }},
		{"WEIR_FLEET_ADVERTISE", "weir-2.internal:7946", func(c *Config) { c.Fleet.Advertise = "weir-2.internal:7946" }},
		{"WEIR_FLEET_RELAY_ADVERTISE", "http://weir-2.internal:8080", func(c *Config) { c.Fleet.RelayAdvertise = "http://weir-2.internal:8080" }},
		{"WEIR_FLEET_SECRET", "fedcba9876543210", func(c *Config) { c.Fleet.Secret = "fedcba9876543210" }},
		{"WEIR_FLEET_TERM_TTL", "30s", func(c *Config) { c.Fleet.TermTTL = 30 * time.Second }},
		{"WEIR_FLEET_HEARTBEAT_TIMEOUT", "3s", func(c *Config) { c.Fleet.HeartbeatTimeout = 3 * time.Second }},
		{"WEIR_FLEET_POLL", "2s", func(c *Config) { c.Fleet.Poll = 2 * time.Second }},
		{"WEIR_FLEET_UNAVAILABLE", "open", func(c *Config) { c.Fleet.Unavailable = "open" }},
		{"WEIR_FLEET_RELEASE_SILENT", "heartbeat", func(c *Config) { c.Fleet.ReleaseSilent = "heartbeat" }},
		{"WEIR_EDGE_LISTEN", "127.0.0.1:8443", func(c *Config) { c.Edge.Listen = "127.0.0.1:8443" }},
		{"WEIR_EDGE_TLS_CERT", "/etc/weir/edge.crt", func(c *Config) { c.Edge.TLSCert = "/etc/weir/edge.crt" }},
		{"WEIR_EDGE_TLS_KEY", "/etc/weir/edge.key", func(c *Config) { c.Edge.TLSKey = "/etc/weir/edge.key" }},
		{"WEIR_EDGE_HEARTBEAT_INTERVAL", "1s", func(c *Config) { c.Edge.HeartbeatInterval = time.Second }},
		{"WEIR_EDGE_HEARTBEAT_TIMEOUT", "9s", func(c *Config) { c.Edge.HeartbeatTimeout = 9 * time.Second }},
		{"WEIR_EDGE_FORGET_AFTER", "1h", func(c *Config) { c.Edge.ForgetAfter = time.Hour }},
	}

	// Every override the code offers is tested here, and nothing else.
	var names, tested []string
	for _, o := range overrides(Default()) {
		names = append(names, o.env)
	}
	for _, tt := range tests {
		tested = append(tested, tt.env)
	}
	slices.Sort(names)
	slices.Sort(tested)
	tested = slices.Compact(tested)
	if !slices.Equal(names, tested) {
		t.Fatalf("overrides %v\ntested    %v", names, tested)
	}

	// The file says one thing, the environment another: the environment wins.
	file := []byte("server:\n  listen: 127.0.0.1:1\n  retry_budget: 2\n  default_max_wait: 1s\nstorage:\n  path: file.db\n" +
		"fleet:\n  replica: weir-1\n  listen: 127.0.0.1:7946\n  advertise: weir-1:7946\n  secret: 0123456789abcdef\n  term_ttl: 20s\n  heartbeat_timeout: 8s\n  poll: 4s\n" +
		"edge:\n  tls_cert: file.crt\n  tls_key: file.key\n")
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Parallel()
			base, err := parse(file, env())
			if err != nil {
				t.Fatal(err)
			}
			tt.want(base)
			got, err := parse(file, env(tt.env, tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, base) {
				t.Errorf("got %+v\nwant %+v", got, base)
			}
		})
	}
}

func TestEnvOverrideEmptyIsIgnored(t *testing.T) {
	t.Parallel()
	c, err := parse([]byte("server:\n  listen: 127.0.0.1:1\n"), env("WEIR_SERVER_LISTEN", "", "WEIR_SERVER_RETRY_BUDGET", ""))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:1" || c.Server.RetryBudget != 3 {
		t.Errorf("listen %q retry_budget %d: an empty variable changed them", c.Server.Listen, c.Server.RetryBudget)
	}
}

func TestEnvOverrideErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env, value, want string
	}{
		{"WEIR_SERVER_MAX_BODY_BYTES", "10MiB", `environment WEIR_SERVER_MAX_BODY_BYTES="10MiB": not an integer`},
		{"WEIR_SERVER_RETRY_BUDGET", "3.5", `environment WEIR_SERVER_RETRY_BUDGET="3.5": not an integer`},
		{"WEIR_SERVER_RETRY_BUDGET", "99999999999999999999", `environment WEIR_SERVER_RETRY_BUDGET="99999999999999999999": not an integer`},
		{"WEIR_SERVER_DEFAULT_MAX_WAIT", "30", `environment WEIR_SERVER_DEFAULT_MAX_WAIT="30": not a duration`},
		{"WEIR_SERVER_COOLDOWN_DURATION", "soon", `environment WEIR_SERVER_COOLDOWN_DURATION="soon": not a duration`},
		// Parses, but Validate rejects it, naming the field.
		{"WEIR_SERVER_RETRY_BUDGET", "0", `server.retry_budget: must be at least 1`},
		{"WEIR_SERVER_LOG_LEVEL", "loud", `server.log_level: unknown level "loud"`},
		{"WEIR_STORAGE_DRIVER", "mysql", `storage.driver: unknown driver "mysql": want sqlite or postgres`},
		{"WEIR_STORAGE_DRIVER", "postgres", `storage.dsn: required with driver postgres`},
		{"WEIR_FLEET_TERM_TTL", "10", `environment WEIR_FLEET_TERM_TTL="10": not a duration`},
		{"WEIR_FLEET_POLL", "-1s", `fleet.poll: must not be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			_, err := parse(nil, env(tt.env, tt.value))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestParseReadsProcessEnvironment checks the public entry points against
// the real environment (the other tests use a fake one).
func TestParseReadsProcessEnvironment(t *testing.T) {
	t.Setenv("WEIR_SERVER_LISTEN", "127.0.0.1:7777")
	t.Setenv("WEIR_STORAGE_PATH", "from-env.db")
	t.Setenv("WEIR_TEST_BASE_URL", "http://mock:9090/v1")
	t.Setenv("WEIR_TEST_KEY", "sk-test")
	path := filepath.Join(t.TempDir(), "weir.yaml")
	data := `
storage:
  path: from-file.db
platforms:
  - name: p
    base_url: ${WEIR_TEST_BASE_URL}
    api_key_env: WEIR_TEST_KEY
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:7777" || c.Storage.Path != "from-env.db" {
		t.Errorf("listen %q path %q: overrides not applied", c.Server.Listen, c.Storage.Path)
	}
	cat, err := c.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if p := cat.Platforms[0]; p.BaseURL != "http://mock:9090/v1" || p.APIKey != "sk-test" {
		t.Errorf("platform = %+v", p)
	}

	t.Setenv("WEIR_SERVER_MAX_BODY_BYTES", "lots")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "WEIR_SERVER_MAX_BODY_BYTES") {
		t.Errorf("Load with a bad override: err = %v; want it to name the variable", err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	if _, err := Load(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v; want os.ErrNotExist", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("server:\n  lisen: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Load(bad) = %v; want the file and the line", err)
	}
}

func TestStrictDecoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"unknown top-level field", "serverr:\n  listen: x\n", []string{`line 1: unknown field "serverr" at the top level`}},
		{"unknown server field", "server:\n  listen: 127.0.0.1:1\n  max_body: 5\n", []string{`line 3: unknown field "max_body" in server`}},
		{"unknown nested field", "server:\n  cooldown:\n    failure: 5\n", []string{`line 3: unknown field "failure" in server.cooldown`}},
		{"unknown platform field", "platforms:\n  - name: a\n    base_url: http://x\n    apikey: sk\n", []string{`line 4: unknown field "apikey" in platforms[]`}},
		{"unknown fleet field", "fleet:\n  ttl: 10s\n", []string{`line 2: unknown field "ttl" in fleet`}},
		{"unknown candidate field", "models:\n  - name: m\n    candidates:\n      - platform_model: x\n        prio: 1\n", []string{`line 5: unknown field "prio" in models[].candidates[]`}},
		{"lease_ttl is not a group field", "groups:\n  - name: g\n    lease_ttl: 5s\n", []string{`line 3: unknown field "lease_ttl" in groups[]`}},
		{"lease_ttl merged into a group", "platform_models:\n  - &limits\n    concurrency: 1\n    lease_ttl: 5s\ngroups:\n  - <<: *limits\n    name: g\n",
			[]string{`line 4: unknown field "lease_ttl" in groups[]`}},
		{"wrong type", "server:\n  retry_budget: many\n", []string{"line 2", "many"}},
		{"list for a section", "server:\n  - listen\n", []string{"line 2"}},
		{"syntax error", "server:\n  listen: [\n", []string{"line"}},
		{"two documents", "server:\n  listen: 127.0.0.1:1\n---\nserver:\n  listen: 127.0.0.1:2\n", []string{"more than one YAML document"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse([]byte(tt.yaml), env())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestBadDurations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		line string
	}{
		{"unit missing", "server:\n  default_max_wait: 30\n", "line 2"},
		{"not a duration", "server:\n  shutdown_timeout: thirty seconds\n", "line 2"},
		{"bad unit", "server:\n  cooldown:\n    duration: 30x\n", "line 3"},
		{"fleet term_ttl", "fleet:\n  term_ttl: 10\n", "line 2"},
		{"platform timeout", "platforms:\n  - name: a\n    base_url: http://x\n    timeout: 1 minute\n", "line 4"},
		{"platform model max_wait", "platform_models:\n  - name: a\n    max_wait: 5\n", "line 3"},
		{"group fairness_window", "groups:\n  - name: g\n    fairness_window: true\n", "line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse([]byte(tt.yaml), env())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range []string{tt.line, "time.Duration", `"30s"`} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// edit changes the parsed catalogYAML before Validate.
		edit func(c *Config)
		want string
	}{
		{"valid", func(c *Config) {}, ""},
		{"unknown platform", func(c *Config) { c.PlatformModels[1].Platform = "x" },
			`platform_models[1].platform: unknown platform "x"`},
		{"unknown platform model", func(c *Config) { c.Models[0].Candidates[1].PlatformModel = "x/m" },
			`models[0].candidates[1].platform_model: unknown platform model "x/m"`},
		{"candidate listed twice", func(c *Config) { c.Models[0].Candidates[1].PlatformModel = "a/m" },
			`models[0].candidates[1].platform_model: "a/m" listed twice`},
		{"no candidates, no nodes", func(c *Config) { c.Models[0].Candidates, c.Models[0].Nodes = nil, weir.NodesNever },
			`models[0].candidates: at least one candidate is required (nodes: never)`},
		{"no candidates for tasks", func(c *Config) { c.Models[0].Candidates, c.Models[0].Kind = nil, weir.KindVideo },
			`models[0].candidates: at least one candidate is required (edge nodes run no tasks)`},
		{"negative task backlog", func(c *Config) { c.Tasks.QueueLimit = -1 },
			`tasks.queue_limit: must not be negative (0: the default, 10000)`},
		{"default callback unsigned", func(c *Config) { c.Tasks.DefaultCallbackURL = "http://10.0.0.9/hooks" },
			`tasks.webhook_secret: required with tasks.default_callback_url: its events are signed as tasks' callbacks are`},
		{"default callback not a URL", func(c *Config) {
			c.Tasks.DefaultCallbackURL, c.Tasks.WebhookSecret = "hooks.internal/tasks", "whsec_c2VjcmV0"
		}, `tasks.default_callback_url: want an absolute http or https URL`},
		{"edge listen not host:port", func(c *Config) { c.Edge.Listen = "8443" },
			`edge.listen: "8443" is not host:port (e.g. "0.0.0.0:8443"; empty: no edge listener)`},
		{"edge cert without key", func(c *Config) { c.Edge.TLSCert = "edge.crt" },
			`edge.tls_cert: tls_cert and tls_key go together: give both, or neither for plaintext`},
		{"edge heartbeat timeout too short", func(c *Config) { c.Edge.HeartbeatTimeout = c.Edge.HeartbeatInterval },
			`edge.heartbeat_timeout: 2s is not longer than edge.heartbeat_interval 2s: one late heartbeat would declare a node gone`},
		{"negative edge forget_after", func(c *Config) { c.Edge.ForgetAfter = -time.Hour },
			`edge.forget_after: -1h0m0s is negative (a Go duration such as "24h"; 0: never forget a gone node)`},
		{"unknown nodes order", func(c *Config) { c.Models[0].Nodes = "sometimes" },
			`models[0].nodes: unknown order "sometimes": want first, last or never`},
		{"negative weight", func(c *Config) { c.Models[0].Candidates[0].Weight = -1 },
			`models[0].candidates[0].weight: must not be negative`},
		{"bad model kind", func(c *Config) { c.Models[0].Kind = "hologram" },
			`models[0].kind: unknown kind "hologram": want chat, embeddings, images, audio_speech, audio_transcription or video`},
		{"model without name", func(c *Config) { c.Models[0].Name = "" }, `models[0].name: required`},
		{"model twice", func(c *Config) { c.Models = append(c.Models, c.Models[0]) },
			`models[1].name: model "m" defined twice`},
		{"platform twice", func(c *Config) { c.Platforms[1].Name = "a" },
			`platforms[1].name: platform "a" defined twice`},
		{"platform without name", func(c *Config) { c.Platforms[0].Name = "" }, `platforms[0].name: required`},
		{"platform kind", func(c *Config) { c.Platforms[0].Kind = "carrier-pigeon" },
			`platforms[0].kind: unknown kind "carrier-pigeon": want one of openai, gemini, azure, anthropic, bedrock`},
		{"bedrock with a region and no base_url", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "bedrock", Region: "us-east-1", AccessKeyIDEnv: "AWS_KEY_ID", SecretAccessKeyEnv: "AWS_SECRET", SessionTokenEnv: "AWS_TOKEN"}
		}, ""},
		{"bedrock on the default chain", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "bedrock", Region: "us-east-1", BaseURL: "https://vpce.example.com"}
		}, ""},
		{"bedrock without a region", func(c *Config) { c.Platforms[0] = Platform{Name: "a", Kind: "bedrock"} },
			`platforms[0].region: required for a bedrock platform`},
		{"bedrock with half a key pair", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "bedrock", Region: "us-east-1", AccessKeyIDEnv: "AWS_KEY_ID"}
		}, `platforms[0].secret_access_key_env: access_key_id_env and secret_access_key_env name an AWS key pair: both or neither`},
		{"bedrock with a key pasted in", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "bedrock", Region: "us-east-1", AccessKeyIDEnv: "AKIA/EXAMPLE", SecretAccessKeyEnv: "S"}
		}, `platforms[0].access_key_id_env: not an environment variable name`},
		{"bedrock session token without a pair", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "bedrock", Region: "us-east-1", SessionTokenEnv: "T"}
		}, `platforms[0].session_token_env: a session token goes with access_key_id_env and secret_access_key_env`},
		{"bedrock with a pair and an API key", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "bedrock", Region: "us-east-1", AccessKeyIDEnv: "K", SecretAccessKeyEnv: "S", APIKeyEnv: "A"}
		}, `platforms[0].api_key_env: a bedrock platform signs with its key pair or sends an API key, not both`},
		{"azure signed in with entra id", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "azure", BaseURL: "https://r.openai.azure.com",
				TenantID: "t", ClientID: "c", ClientSecretEnv: "AZURE_SECRET", TokenURL: "https://login.microsoftonline.us/t/oauth2/v2.0/token"}
		}, ""},
		{"entra id without a secret", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "azure", BaseURL: "https://r.openai.azure.com", TenantID: "t", ClientID: "c"}
		}, `platforms[0].client_secret_env: tenant_id, client_id and client_secret_env sign in with Microsoft Entra ID: all three or none`},
		{"entra id without a tenant", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "azure", BaseURL: "https://r.openai.azure.com", ClientID: "c", ClientSecretEnv: "S"}
		}, `platforms[0].client_secret_env: tenant_id, client_id and client_secret_env sign in with Microsoft Entra ID: all three or none`},
		{"entra id secret pasted in", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "azure", BaseURL: "https://r.openai.azure.com", TenantID: "t", ClientID: "c", ClientSecretEnv: "abc~secret"}
		}, `platforms[0].client_secret_env: not an environment variable name; put the key in a variable and name the variable here`},
		{"entra id and an API key", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "azure", BaseURL: "https://r.openai.azure.com", TenantID: "t", ClientID: "c", ClientSecretEnv: "S", APIKeyEnv: "K"}
		}, `platforms[0].api_key_env: an azure platform signs in with Microsoft Entra ID or sends an API key, not both`},
		{"a token url alone", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "azure", BaseURL: "https://r.openai.azure.com", TokenURL: "https://login.example.com/token"}
		}, `platforms[0].token_url: a token_url goes with tenant_id, client_id and client_secret_env`},
		{"entra id on openai", func(c *Config) {
			c.Platforms[0].TenantID, c.Platforms[0].ClientID, c.Platforms[0].ClientSecretEnv = "t", "c", "S"
		},
			`platforms[0].tenant_id: tenant_id, client_id, client_secret_env and token_url are an azure platform's (Microsoft Entra ID)`},
		{"a region on openai", func(c *Config) { c.Platforms[0].Region = "us-east-1" },
			`platforms[0].region: region and AWS keys are a bedrock platform's`},
		{"responses neither native nor translate", func(c *Config) { c.Platforms[0].Responses = "passthrough" },
			`platforms[0].responses: "passthrough": want native or translate`},
		{"responses on gemini", func(c *Config) {
			c.Platforms[0] = Platform{Name: "a", Kind: "gemini", BaseURL: "http://g", Responses: "native"}
		}, `platforms[0].responses: only an openai or azure platform may speak the Responses API; a gemini platform is always sent it translated`},
		{"embeddings on bedrock", func(c *Config) {
			c.Platforms[1] = Platform{Name: "b", Kind: "bedrock", Region: "us-east-1"}
			c.Models[0].Kind = weir.KindEmbeddings
		}, `models[0].candidates[1].platform_model: "b/m" is on platform "b" of kind bedrock, which serves no embeddings models`},
		{"no base_url", func(c *Config) { c.Platforms[0].BaseURL = "" }, `platforms[0].base_url: required`},
		{"relative base_url", func(c *Config) { c.Platforms[0].BaseURL = "127.0.0.1:9090/v1" },
			`platforms[0].base_url: "127.0.0.1:9090/v1" is not an http or https URL`},
		{"key pasted into api_key_env", func(c *Config) { c.Platforms[0].APIKeyEnv = "sk-abc123" },
			`platforms[0].api_key_env: not an environment variable name`},
		{"negative platform timeout", func(c *Config) { c.Platforms[0].Timeout = -time.Second },
			`platforms[0].timeout: must not be negative`},
		{"negative platform idle timeout", func(c *Config) { c.Platforms[0].IdleTimeout = -time.Second },
			`platforms[0].idle_timeout: must not be negative`},
		{"negative platform call timeout", func(c *Config) { c.Platforms[0].CallTimeout = -time.Second },
			`platforms[0].call_timeout: must not be negative`},
		{"platform model twice", func(c *Config) { c.PlatformModels[1].Name = "a/m" },
			`platform_models[1].name: platform model "a/m" defined twice`},
		{"no upstream", func(c *Config) { c.PlatformModels[0].Upstream = "" },
			`platform_models[0].upstream: required`},
		{"negative concurrency", func(c *Config) { c.PlatformModels[0].Concurrency = -1 },
			`platform_models[0].concurrency: must not be negative (0 means no limit)`},
		{"negative tpm", func(c *Config) { c.PlatformModels[1].TPM = -1 },
			`platform_models[1].tpm: must not be negative`},
		{"negative lease_ttl", func(c *Config) { c.PlatformModels[0].LeaseTTL = -time.Second },
			`platform_models[0].lease_ttl: must not be negative`},
		{"negative price", func(c *Config) { c.PlatformModels[1].Price.Output = -1 },
			`platform_models[1].price.output: must not be negative`},
		{"price of an image keyed by nothing", func(c *Config) { c.PlatformModels[0].Price.Images = map[string]weir.Money{"/hd": 1} },
			`platform_models[0].price.images: "/hd" is not a size, size/quality or *`},
		{"negative node price", func(c *Config) { c.Models[0].NodePrice.Input = -1 },
			`models[0].node_price.input: must not be negative`},
		{"group without name", func(c *Config) { c.Groups[0].Name = "" }, `groups[0].name: required`},
		{"group twice", func(c *Config) { c.Groups = append(c.Groups, c.Groups[0]) },
			`groups[1].name: group "premium" defined twice`},
		{"negative group queue_limit", func(c *Config) { c.Groups[0].QueueLimit = -1 },
			`groups[0].queue_limit: must not be negative`},
		{"negative group max_wait", func(c *Config) { c.Groups[0].MaxWait = -time.Second },
			`groups[0].max_wait: must not be negative`},
		{"empty default group", func(c *Config) { c.DefaultGroup = "" }, `default_group: required`},
		{"bad listen", func(c *Config) { c.Server.Listen = "8080" }, `server.listen: "8080" is not host:port`},
		{"zero body limit", func(c *Config) { c.Server.MaxBodyBytes = 0 }, `server.max_body_bytes: must be positive`},
		{"negative max wait", func(c *Config) { c.Server.DefaultMaxWait = -time.Second }, `server.default_max_wait: must not be negative`},
		{"no bound on max wait", func(c *Config) { c.Server.DefaultMaxWait = NoBound }, ""},
		{"bad admin loopback", func(c *Config) { c.Server.AdminLoopback = "yes" }, `server.admin_loopback: "yes": want auto, true or false`},
		{"public url", func(c *Config) { c.Server.PublicURL = "https://weir.example.com" }, ""},
		{"public url with port and slash", func(c *Config) { c.Server.PublicURL = "http://10.0.0.5:8080/" }, ""},
		{"public url no scheme", func(c *Config) { c.Server.PublicURL = "weir.example.com" }, `server.public_url: "weir.example.com": want an http:// or https:// URL`},
		{"public url ftp", func(c *Config) { c.Server.PublicURL = "ftp://weir.example.com" }, `server.public_url: "ftp://weir.example.com": want an http:// or https:// URL`},
		{"public url path", func(c *Config) { c.Server.PublicURL = "https://example.com/weir" }, `server.public_url: "https://example.com/weir": want the base URL only`},
		{"public url no host", func(c *Config) { c.Server.PublicURL = "https://:443" }, `server.public_url: "https://:443": no host`},
		{"public url user", func(c *Config) { c.Server.PublicURL = "https://u:p@example.com" }, `server.public_url: a user or password has no place in a public URL`},
		{"public url bad port", func(c *Config) { c.Server.PublicURL = "https://example.com:99999" }, `server.public_url: "https://example.com:99999": port "99999" is not a port`},
		{"zero header timeout", func(c *Config) { c.Server.ReadHeaderTimeout = 0 }, `server.read_header_timeout: must be positive`},
		{"zero body timeout", func(c *Config) { c.Server.BodyTimeout = 0 }, `server.body_timeout: must be positive`},
		{"zero idle timeout", func(c *Config) { c.Server.IdleTimeout = 0 }, `server.idle_timeout: must be positive`},
		{"cooldown without duration", func(c *Config) { c.Server.Cooldown.Duration = 0 },
			`server.cooldown.duration: must be positive while cooldown.failures is set`},
		{"cooldown disabled", func(c *Config) { c.Server.Cooldown = Cooldown{} }, ""},
		{"no key cache ttl", func(c *Config) { c.Server.KeyCacheTTL = 0 }, "server.key_cache_ttl"},
		{"no end users' budgets", func(c *Config) { c.Server.MaxEndUserBudgets = 0 }, "server.max_end_user_budgets"},
		{"negative heap floor", func(c *Config) { c.Server.HeapFloor = -1 }, "server.heap_floor"},
		{"no flush interval", func(c *Config) { c.Server.UsageFlushInterval = 0 },
			`server.usage_flush_interval: must be positive`},
		{"empty storage path", func(c *Config) { c.Storage.Path = "" }, `storage.path: required`},
		{"postgres without a dsn", func(c *Config) { c.Storage.Driver = "postgres" }, `storage.dsn: required with driver postgres`},
		{"postgres with a blank dsn", func(c *Config) { c.Storage.Driver, c.Storage.DSN = "postgres", "  " }, `storage.dsn: required`},
		{"postgres needs no path", func(c *Config) {
			c.Storage = Storage{Driver: "postgres", DSN: "host=db user=weir dbname=weir"}
		}, ""},
		{"unknown driver", func(c *Config) { c.Storage.Driver = "mysql" }, `storage.driver: unknown driver "mysql": want sqlite or postgres`},

		// The fleet section is checked in full on postgres only.
		{"fleet set in full", onPostgres(func(f *Fleet) {
			*f = Fleet{Replica: "weir-1.eu/α", Listen: "[::]:7946", Advertise: "[fd00::5]:7946", Secret: strings.Repeat("s", 16),
				TermTTL: time.Second, HeartbeatTimeout: time.Second, Poll: time.Second}
		}), ""},
		{"fleet left empty on postgres", onPostgres(func(f *Fleet) { f.Replica, f.Listen, f.Advertise, f.Secret = "", "", "", "" }), ""},
		{"short term_ttl", onPostgres(func(f *Fleet) { f.TermTTL, f.Poll = 999*time.Millisecond, 500*time.Millisecond }),
			`fleet.term_ttl: 999ms is too short: give at least 1s`},
		{"zero term_ttl", onPostgres(func(f *Fleet) { f.TermTTL = 0 }), `fleet.term_ttl: 0s is too short: give at least 1s`},
		{"negative term_ttl", onPostgres(func(f *Fleet) { f.TermTTL = -time.Second }), `fleet.term_ttl: -1s is too short`},
		{"short heartbeat_timeout", onPostgres(func(f *Fleet) { f.HeartbeatTimeout = 100 * time.Millisecond }),
			`fleet.heartbeat_timeout: 100ms is too short: give at least 1s`},
		{"zero poll", onPostgres(func(f *Fleet) { f.Poll = 0 }), `fleet.poll: must be positive`},
		{"negative poll", onPostgres(func(f *Fleet) { f.Poll = -time.Second }), `fleet.poll: must be positive`},
		{"poll longer than the term", onPostgres(func(f *Fleet) { f.Poll = 11 * time.Second }),
			`fleet.poll: 11s is longer than fleet.term_ttl 10s`},
		{"poll as long as the term", onPostgres(func(f *Fleet) { f.Poll = f.TermTTL }), ""},
		{"long replica", onPostgres(func(f *Fleet) { f.Replica = strings.Repeat("r", 101) }),
			`fleet.replica: 101 bytes, more than 100`},
		{"replica of 100 bytes", onPostgres(func(f *Fleet) { f.Replica = strings.Repeat("r", 100) }), ""},
		{"replica with a space", onPostgres(func(f *Fleet) { f.Replica = "weir 1" }),
			`fleet.replica: "weir 1" contains whitespace or a control character`},
		{"blank replica", onPostgres(func(f *Fleet) { f.Replica = " " }),
			`fleet.replica: " " contains whitespace or a control character`},
		{"replica with a newline", onPostgres(func(f *Fleet) { f.Replica = "weir-1\n" }),
			`fleet.replica: "weir-1\n" contains whitespace or a control character`},
		{"replica with a NUL", onPostgres(func(f *Fleet) { f.Replica = "weir\x001" }),
			`fleet.replica: "weir\x001" contains whitespace or a control character`},
		{"replica not UTF-8", onPostgres(func(f *Fleet) { f.Replica = "weir\xff" }), `fleet.replica: "weir\xff" is not UTF-8`},
		{"bad fleet listen", onPostgres(func(f *Fleet) { f.Listen = "7946" }), `fleet.listen: "7946" is not host:port`},
		{"bad advertise", onPostgres(func(f *Fleet) { f.Advertise = "weir-1" }), `fleet.advertise: "weir-1" is not host:port`},
		{"advertise without a host", onPostgres(func(f *Fleet) { f.Advertise = ":7946" }),
			`fleet.advertise: ":7946" has no host the others can dial`},
		{"advertise of any address", onPostgres(func(f *Fleet) { f.Advertise = "0.0.0.0:7946" }),
			`fleet.advertise: "0.0.0.0:7946" has no host the others can dial`},
		{"advertise of any IPv6 address", onPostgres(func(f *Fleet) { f.Advertise = "[::]:7946" }),
			`fleet.advertise: "[::]:7946" has no host the others can dial`},
		{"relay_advertise", onPostgres(func(f *Fleet) { f.RelayAdvertise = "https://weir-1.internal:8443/" }), ""},
		{"relay_advertise not a URL", onPostgres(func(f *Fleet) { f.RelayAdvertise = "weir-1:8080" }),
			`fleet.relay_advertise: "weir-1:8080" is not a base URL`},
		{"relay_advertise with a path", onPostgres(func(f *Fleet) { f.RelayAdvertise = "http://weir-1:8080/api" }),
			`fleet.relay_advertise: "http://weir-1:8080/api" is not a base URL`},
		{"relay_advertise with a user", onPostgres(func(f *Fleet) { f.RelayAdvertise = "http://u:p@weir-1:8080" }),
			`fleet.relay_advertise: a base URL without a user or password`},
		{"relay_advertise of any address", onPostgres(func(f *Fleet) { f.RelayAdvertise = "http://0.0.0.0:8080" }),
			`fleet.relay_advertise: "http://0.0.0.0:8080" has no host the others can reach`},
		{"advertise port 0", onPostgres(func(f *Fleet) { f.Advertise = "weir-1:0" }),
			`fleet.advertise: "weir-1:0": the port must be a number from 1 to 65535`},
		{"advertise without a port", onPostgres(func(f *Fleet) { f.Advertise = "weir-1:" }),
			`fleet.advertise: "weir-1:": the port must be a number from 1 to 65535`},
		{"advertise port too big", onPostgres(func(f *Fleet) { f.Advertise = "weir-1:65536" }),
			`fleet.advertise: "weir-1:65536": the port must be a number from 1 to 65535`},
		{"short secret", onPostgres(func(f *Fleet) { f.Secret = "sk-abc123" }),
			`fleet.secret: 9 bytes, fewer than 16: the secret authenticates the replicas to each other`},
		{"fleet unavailable open", onPostgres(func(f *Fleet) { f.Unavailable = "open" }), ""},
		{"fleet unavailable unknown", onPostgres(func(f *Fleet) { f.Unavailable = "ajar" }),
			`fleet.unavailable: "ajar" is not closed or open`},
		{"fleet unavailable unknown on sqlite", func(c *Config) { c.Fleet.Unavailable = "Open" },
			`fleet.unavailable: "Open" is not closed or open`},
		{"fleet release_silent heartbeat", onPostgres(func(f *Fleet) { f.ReleaseSilent = "heartbeat" }), ""},
		{"fleet release_silent unknown", onPostgres(func(f *Fleet) { f.ReleaseSilent = "never" }),
			`fleet.release_silent: "never" is not call_timeout or heartbeat`},
		{"negative fleet duration on sqlite", func(c *Config) { c.Fleet.HeartbeatTimeout = -time.Second },
			`fleet.heartbeat_timeout: must not be negative`},
		{"fleet nonsense ignored on sqlite", func(c *Config) {
			c.Fleet = Fleet{Replica: "a b", Listen: "x", Advertise: ":0", Secret: "short", Poll: time.Hour}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parse([]byte(catalogYAML), env())
			if err != nil {
				t.Fatal(err)
			}
			tt.edit(c)
			err = c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v; want %q", err, tt.want)
			}
			if !errors.Is(err, weir.ErrInvalid) {
				t.Errorf("Validate() = %v; want it to match weir.ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "sk-abc123") {
				t.Errorf("Validate() = %v: echoes what may be a credential", err)
			}
			// Catalog validates first, so it reports the same problem.
			if _, err := c.Catalog(); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Catalog() = %v; want %q", err, tt.want)
			}
		})
	}
}

// onPostgres returns an edit for TestValidate that puts storage on
// PostgreSQL, where the fleet section is used, and then edits the fleet.
func onPostgres(edit func(f *Fleet)) func(c *Config) {
	return func(c *Config) {
		c.Storage = Storage{Driver: "postgres", DSN: "host=db user=weir dbname=weir"}
		edit(&c.Fleet)
	}
}

func TestParseValidates(t *testing.T) {
	t.Parallel()
	data := strings.Replace(catalogYAML, "platform: b\n", "platform: x\n", 1)
	_, err := parse([]byte(data), env())
	if err == nil || err.Error() != `platform_models[1].platform: unknown platform "x"` {
		t.Errorf("err = %v", err)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	lookup := env("HOST", "mock", "PORT", "9090", "EMPTY", "", "DOLLAR", "a$b")
	tests := []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "price $5 and $HOST", want: "price $5 and $HOST"},
		{in: "${HOST}", want: "mock"},
		{in: "http://${HOST}:${PORT}/v1", want: "http://mock:9090/v1"},
		{in: "${EMPTY}", want: ""},
		{in: "${DOLLAR}", want: "a$b"},
		{in: "${MISSING:-fallback}", want: "fallback"},
		{in: "${EMPTY:-fallback}", want: "fallback"},
		{in: "${HOST:-fallback}", want: "mock"},
		{in: "${MISSING:-}", want: ""},
		{in: "$${HOST}", want: "${HOST}"},
		{in: "x$${HOST}${HOST}", want: "x${HOST}mock"},
		{in: "${MISSING}", err: "${MISSING} is not set"},
		{in: "${HOST", err: `unclosed "${HOST"`},
		{in: "${}", err: "bad reference ${}"},
		{in: "${1X}", err: "bad reference ${1X}"},
		{in: "${A-B}", err: "bad reference ${A-B}"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, lookup)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("expand(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
		case err != nil || got != tt.want:
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestExpandInFile(t *testing.T) {
	t.Parallel()
	data := `
server:
  admin_token: ${TOKEN}
  log_level: ${LEVEL:-warn}
storage:
  path: ${DATA_DIR}/weir.db
platforms:
  - name: ${PLATFORM}
    base_url: http://${HOST}/v1
    api_key_env: ${KEY_VAR}
platform_models:
  - name: pm
    platform: ${PLATFORM}
    upstream: ${UPSTREAM:-gpt-4o-mini}
`
	c, err := parse([]byte(data), env("TOKEN", "t0k", "DATA_DIR", "/data", "PLATFORM", "mock",
		"HOST", "127.0.0.1:9090", "KEY_VAR", "MOCK_KEY", "MOCK_KEY", "sk-1"))
	if err != nil {
		t.Fatal(err)
	}
	got := []string{c.Server.AdminToken, c.Server.LogLevel, c.Storage.Path, c.Platforms[0].Name,
		c.Platforms[0].BaseURL, c.Platforms[0].APIKeyEnv, c.PlatformModels[0].Platform, c.PlatformModels[0].Upstream}
	want := []string{"t0k", "warn", "/data/weir.db", "mock", "http://127.0.0.1:9090/v1", "MOCK_KEY", "mock", "gpt-4o-mini"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}

	// The environment override comes after expansion and wins.
	c, err = parse([]byte("server:\n  admin_token: ${TOKEN}\n"), env("TOKEN", "file", "WEIR_SERVER_ADMIN_TOKEN", "env"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.AdminToken != "env" {
		t.Errorf("admin_token = %q; want the override", c.Server.AdminToken)
	}

	// An unset variable is an error naming the field.
	_, err = parse([]byte("platforms:\n  - name: a\n    base_url: http://${HOST}/v1\n"), env())
	if err == nil || err.Error() != "platforms[0].base_url: ${HOST} is not set (write ${HOST:-} to allow it to be empty)" {
		t.Errorf("err = %v", err)
	}

	// Numbers are not expanded: the type is checked first.
	if _, err := parse([]byte("server:\n  retry_budget: ${N}\n"), env("N", "3")); err == nil {
		t.Error("expanded ${N} in a number")
	}
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	c, err := parse([]byte(catalogYAML+"    max_wait: 10s\n    round_robin: true\n"), env())
	if err != nil {
		t.Fatal(err)
	}
	c.Platforms[1].Timeout, c.Platforms[1].IdleTimeout, c.Platforms[1].CallTimeout = time.Second, 2*time.Second, 3*time.Second
	c.Platforms[1].APIVersion = "2025-04-01-preview"
	c.Platforms[1].Responses = "translate"
	cat, err := c.catalog(env("A_KEY", "sk-a"))
	if err != nil {
		t.Fatal(err)
	}
	want := weir.Catalog{
		Platforms: []weir.Platform{
			{Name: "a", Kind: "openai", BaseURL: "http://127.0.0.1:9090/v1", APIKey: "sk-a"},
			{Name: "b", Kind: "openai", BaseURL: "http://127.0.0.1:9090/v1",
				Timeout: time.Second, IdleTimeout: 2 * time.Second, CallTimeout: 3 * time.Second, APIVersion: "2025-04-01-preview",
				TranslateResponses: true},
		},
		PlatformModels: []weir.PlatformModel{
			{Name: "a/m", Platform: "a", Upstream: "m", Limits: weir.Limits{Concurrency: 2}},
			{Name: "b/m", Platform: "b", Upstream: "m"},
		},
		Models: []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{
			{PlatformModel: "a/m", Priority: 1, Weight: 1},
			{PlatformModel: "b/m", Weight: 3},
		}}},
		Groups: []weir.Group{
			{Name: "premium", Priority: 5, Limits: weir.Limits{MaxWait: 10 * time.Second}, RoundRobin: true},
			{Name: "default"}, // implicit
		},
	}
	if !reflect.DeepEqual(cat, want) {
		t.Errorf("catalog\n got %+v\nwant %+v", cat, want)
	}

	// A missing credential variable is an empty key, not an error.
	cat, err = c.catalog(env())
	if err != nil {
		t.Fatal(err)
	}
	if cat.Platforms[0].APIKey != "" {
		t.Errorf("APIKey = %q; want empty", cat.Platforms[0].APIKey)
	}

	// A defined default group is not added twice, and keeps its limits.
	c.DefaultGroup = "premium"
	cat, err = c.catalog(env())
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Groups) != 1 || cat.Groups[0].Priority != 5 {
		t.Errorf("groups = %+v; want premium alone", cat.Groups)
	}
}

// TestCatalogFailOpen: an entry's fail_open is its own when it says,
// fleet.unavailable's otherwise, the implicit default group's included.
func TestCatalogFailOpen(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, fleet, pm, group string
		wantPM, wantGroup      bool
	}{
		{"default closed", "", "", "", false, false},
		{"entries say", "", "    fail_open: true\n", "    fail_open: true\n", true, true},
		{"fleet open", "fleet:\n  unavailable: open\n", "", "", true, true},
		{"an entry overrides the fleet", "fleet:\n  unavailable: open\n", "    fail_open: false\n", "", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := tt.fleet + `
platforms:
  - name: a
    base_url: http://127.0.0.1:9090/v1
platform_models:
  - name: a/m
    platform: a
    upstream: m
    concurrency: 4
` + tt.pm + `models:
  - name: m
    kind: chat
    candidates:
      - platform_model: a/m
groups:
  - name: team
    concurrency: 4
` + tt.group
			c, err := parse([]byte(data), env())
			if err != nil {
				t.Fatal(err)
			}
			c.DefaultGroup = "other" // implicit: takes fleet.unavailable
			cat, err := c.catalog(env())
			if err != nil {
				t.Fatal(err)
			}
			if got := cat.PlatformModels[0].FailOpen; got != tt.wantPM {
				t.Errorf("platform model FailOpen = %v; want %v", got, tt.wantPM)
			}
			if got := cat.Groups[0].FailOpen; got != tt.wantGroup {
				t.Errorf("group FailOpen = %v; want %v", got, tt.wantGroup)
			}
			if got, want := cat.Groups[1].FailOpen, tt.fleet != ""; got != want {
				t.Errorf("implicit group FailOpen = %v; want %v", got, want)
			}
		})
	}
}

// TestCatalogShadow: shadow is a platform model's and a group's own,
// beside their limits, and off unless it says; it takes a boolean only.
func TestCatalogShadow(t *testing.T) {
	t.Parallel()
	data := `
platforms:
  - name: a
    base_url: http://127.0.0.1:9090/v1
platform_models:
  - name: a/new
    platform: a
    upstream: m
    concurrency: 1
    shadow: true
  - name: a/old
    platform: a
    upstream: m
    concurrency: 1
models:
  - name: m
    kind: chat
    candidates:
      - platform_model: a/new
      - platform_model: a/old
groups:
  - name: team
    rpm: 60
    shadow: true
`
	c, err := parse([]byte(data), env())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.catalog(env())
	if err != nil {
		t.Fatal(err)
	}
	if !cat.PlatformModels[0].Shadow || cat.PlatformModels[1].Shadow || !cat.Groups[0].Shadow {
		t.Errorf("shadow: platform models %v, %v, group %v; want true, false, true",
			cat.PlatformModels[0].Shadow, cat.PlatformModels[1].Shadow, cat.Groups[0].Shadow)
	}
	if _, err := parse([]byte("groups:\n  - name: g\n    shadow: 3\n"), env()); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("shadow: 3 gave %v; want an error naming line 3", err)
	}
}

func TestCatalogFromCode(t *testing.T) {
	t.Parallel()
	// A Config built in code, without Parse's per-entry defaults.
	c := Default()
	c.Platforms = []Platform{{Name: "p", BaseURL: "https://api.example.com/v1"}}
	c.PlatformModels = []PlatformModel{{Name: "p/m", Platform: "p", Upstream: "m"}}
	c.Models = []Model{{Name: "m", Kind: weir.KindEmbeddings, Candidates: []Candidate{{PlatformModel: "p/m"}}}}
	cat, err := c.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if cat.Platforms[0].Kind != "openai" || cat.Models[0].Candidates[0].Weight != 1 {
		t.Errorf("catalog = %+v; want kind openai and weight 1", cat)
	}
}

func TestCatalogReadsBedrockKeys(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Platforms = []Platform{{Name: "aws", Kind: "bedrock", Region: "eu-west-3",
		AccessKeyIDEnv: "AWS_KEY_ID", SecretAccessKeyEnv: "AWS_SECRET", SessionTokenEnv: "AWS_TOKEN"}}
	c.PlatformModels = []PlatformModel{{Name: "aws/haiku", Platform: "aws", Upstream: "anthropic.claude-3-haiku-20240307-v1:0"}}
	c.Models = []Model{{Name: "haiku", Kind: weir.KindChat, Candidates: []Candidate{{PlatformModel: "aws/haiku"}}}}
	vars := map[string]string{"AWS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET": "s3cret", "AWS_TOKEN": "tok"}
	cat, err := c.catalog(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	p := cat.Platforms[0]
	if p.Kind != "bedrock" || p.Region != "eu-west-3" || p.BaseURL != "" ||
		p.AccessKeyID != "AKIDEXAMPLE" || p.SecretAccessKey != "s3cret" || p.SessionToken != "tok" || p.APIKey != "" {
		t.Errorf("platform %+v", p)
	}
	if err := cat.Validate(); err != nil {
		t.Errorf("the catalog does not validate: %v", err)
	}
}

func TestCatalogReadsEntraSecret(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Platforms = []Platform{{Name: "az", Kind: "azure", BaseURL: "https://r.openai.azure.com",
		TenantID: "tenant-1", ClientID: "client-1", ClientSecretEnv: "AZURE_SECRET"}}
	c.PlatformModels = []PlatformModel{{Name: "az/gpt", Platform: "az", Upstream: "gpt-dep"}}
	c.Models = []Model{{Name: "gpt", Kind: weir.KindChat, Candidates: []Candidate{{PlatformModel: "az/gpt"}}}}
	vars := map[string]string{"AZURE_SECRET": "s3cret"}
	cat, err := c.catalog(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	p := cat.Platforms[0]
	if p.TenantID != "tenant-1" || p.ClientID != "client-1" || p.ClientSecret != "s3cret" || p.TokenURL != "" || p.APIKey != "" {
		t.Errorf("platform %+v", p)
	}
	if err := cat.Validate(); err != nil {
		t.Errorf("the catalog does not validate: %v", err)
	}
}

// TestAdminLoopbackTrusted: "auto" trusts loopback clients only when the
// gateway listens on a loopback address; true and false say so whatever
// it listens on. The file takes YAML booleans as well as strings.
func TestAdminLoopbackTrusted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		want bool
	}{
		{"server:\n  listen: 127.0.0.1:8080\n", true},
		{"server:\n  listen: 127.0.0.2:8080\n", true},
		{"server:\n  listen: '[::1]:8080'\n", true},
		{"server:\n  listen: localhost:8080\n", true},
		{"server:\n  listen: 0.0.0.0:8080\n", false},
		{"server:\n  listen: ':8080'\n", false},
		{"server:\n  listen: '[::]:8080'\n", false},
		{"server:\n  listen: 10.0.0.5:8080\n", false},
		{"server:\n  listen: gateway.internal:8080\n", false},
		{"server:\n  listen: 0.0.0.0:8080\n  admin_loopback: true\n", true},
		{"server:\n  listen: 127.0.0.1:8080\n  admin_loopback: false\n", false},
		{"server:\n  listen: 127.0.0.1:8080\n  admin_loopback: \"false\"\n", false},
		{"server:\n  listen: 0.0.0.0:8080\n  admin_loopback: auto\n", false},
	} {
		c, err := parse([]byte(tc.yaml), env())
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Server.AdminLoopbackTrusted(); got != tc.want {
			t.Errorf("%q: trusted %v, want %v", tc.yaml, got, tc.want)
		}
	}
}
