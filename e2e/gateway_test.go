package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gateway is one `weir serve` process with its own config file and
// SQLite database in a temporary directory.
type gateway struct {
	// URL is where it serves, e.g. http://127.0.0.1:41234.
	URL    string
	Config string // the config file's path
	DB     string // the SQLite database's path

	server string   // extra lines of the config's server section
	env    []string // added to the process's environment
	bin    string   // the weir binary it runs; "" for weirBin
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed

	mu   sync.Mutex
	logs []logLine
}

// logLine is one JSON log line from the gateway's stderr.
type logLine struct {
	raw string
	msg string
}

// startGateway writes a config of server (extra lines for the server
// section, indented by two spaces, or "") and catalog (the platforms,
// platform_models, models and groups sections), starts `weir serve` on it
// and waits until it logs where it listens. The process is killed when the
// test ends.
func startGateway(t *testing.T, server, catalog string) *gateway {
	t.Helper()
	return startGatewayEnv(t, nil, server, catalog)
}

// startGatewayEnv is startGateway with env (KEY=value) added to the
// process's environment: the platforms' credentials.
func startGatewayEnv(t *testing.T, env []string, server, catalog string) *gateway {
	t.Helper()
	dir := t.TempDir()
	g := &gateway{
		Config: filepath.Join(dir, "weir.yaml"),
		DB:     filepath.Join(dir, "weir.db"),
		server: server,
		env:    env,
		exited: make(chan struct{}),
	}
	g.writeConfig(t, catalog)
	g.launch(t, "weir serve")
	return g
}

// launch starts `weir serve` on g's config, collects its log lines, waits
// until it logs where it listens, and kills it when the test ends. name
// labels the process in failure messages.
func (g *gateway) launch(t *testing.T, name string) {
	t.Helper()
	bin := g.bin
	if bin == "" {
		bin = weirBin
	}
	g.cmd = exec.Command(bin, "serve", "-c", g.Config)
	g.cmd.Env = append(cleanEnv(), g.env...)
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var v struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			_ = json.Unmarshal(sc.Bytes(), &v)
			g.mu.Lock()
			g.logs = append(g.logs, logLine{raw: sc.Text(), msg: v.Msg})
			g.mu.Unlock()
			if v.Msg == "weir serving" && v.Addr != "" {
				select {
				case addr <- v.Addr:
				default:
				}
			}
		}
		g.err = g.cmd.Wait() // after the last read of the pipe, as Wait requires
		close(g.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-g.exited:
		default:
			_ = g.cmd.Process.Kill()
			<-g.exited
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, g.log())
		}
	})
	select {
	case a := <-addr:
		g.URL = "http://" + a
	case <-g.exited:
		t.Fatalf("%s exited before serving: %v\n%s", name, g.err, g.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not log its address within 30s\n%s", name, g.log())
	}
}

// writeConfig writes the config file with the given catalog.
func (g *gateway) writeConfig(t *testing.T, catalog string) {
	t.Helper()
	text := fmt.Sprintf("server:\n  listen: 127.0.0.1:0\n  log_level: info\n%s\nstorage:\n  path: %s\n\n%s\n",
		g.server, g.DB, catalog)
	if err := os.WriteFile(g.Config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload rewrites the config with catalog, sends SIGHUP and waits until
// the gateway logs that it reloaded.
func (g *gateway) reload(t *testing.T, catalog string) {
	t.Helper()
	g.writeConfig(t, catalog)
	before := g.logCount("catalog reloaded")
	failed := g.logCount("reload failed; keeping the running catalog")
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the gateway to log the reload", func() bool {
		if g.logCount("reload failed; keeping the running catalog") > failed {
			t.Fatalf("the reload failed:\n%s", g.log())
		}
		return g.logCount("catalog reloaded") > before
	})
}

func (g *gateway) logCount(msg string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, l := range g.logs {
		if l.msg == msg {
			n++
		}
	}
	return n
}

func (g *gateway) log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var b strings.Builder
	for _, l := range g.logs {
		b.WriteString(l.raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// cleanEnv is the test's environment without WEIR_* variables, which
// would override the config files the tests write.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEIR_") {
			env = append(env, kv)
		}
	}
	return env
}

// runWeir runs a weir subcommand to completion and returns its output.
func runWeir(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(weirBin, args...)
	cmd.Env = cleanEnv()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("weir %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// createKey runs `weir keys create` on the gateway's config and returns
// the new key's id and secret.
func (g *gateway) createKey(t *testing.T, args ...string) (id, secret string) {
	t.Helper()
	out := runWeir(t, append([]string{"keys", "create", "-c", g.Config}, args...)...)
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "id:"); ok {
			id = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "secret:"); ok {
			secret = strings.TrimSpace(v)
		}
	}
	if id == "" || secret == "" {
		t.Fatalf("no id and secret in the output of weir keys create:\n%s", out)
	}
	return id, secret
}

// scopeView is one scope in /admin/queues.
type scopeView struct {
	Name     string `json:"name"`
	Limit    int64  `json:"limit"`
	InFlight int64  `json:"in_flight"`
	Leases   int    `json:"leases"`
	Waiting  int    `json:"waiting"`
}

// scopes fetches /admin/queues.
func (g *gateway) scopes(t *testing.T) map[string]scopeView {
	t.Helper()
	resp, err := client.Get(g.URL + "/admin/queues")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/queues: %s", resp.Status)
	}
	var v struct {
		Scopes []scopeView `json:"scopes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET /admin/queues: %v", err)
	}
	m := make(map[string]scopeView, len(v.Scopes))
	for _, s := range v.Scopes {
		m[s.Name] = s
	}
	return m
}

// scope fetches one scope from /admin/queues.
func (g *gateway) scope(t *testing.T, name string) scopeView {
	t.Helper()
	s, ok := g.scopes(t)[name]
	if !ok {
		t.Fatalf("/admin/queues has no scope %s", name)
	}
	return s
}

// waitFor polls cond every 10ms until it holds, failing the test if it
// does not within the given time. It returns how long it took.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("waited %s for %s", within, what)
		}
		<-tick.C
	}
	return time.Since(start)
}
