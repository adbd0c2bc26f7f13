package e2e

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/sqlite"
)

// TestGracefulShutdownDrains: on SIGTERM the gateway stops taking
// connections, lets the request in flight finish with its answer, and
// exits cleanly soon after.
func TestGracefulShutdownDrains(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	up.hold.Store(true)
	g := startGateway(t, "", oneModel(up.URL, "    concurrency: 1"))
	_, key := g.createKey(t)

	running := g.sendAsync(context.Background(), request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	waitFor(t, 5*time.Second, "the request to reach the upstream", func() bool { return len(up.Arrivals()) == 1 })

	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(g.URL, "http://")
	waitFor(t, 5*time.Second, "the gateway to stop accepting connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case <-g.exited:
		t.Fatalf("the gateway exited with a request in flight: %v", g.err)
	default:
	}

	up.release(t)
	if rep := await(t, running); rep.Status != http.StatusOK {
		t.Errorf("the request in flight at SIGTERM: status %d: %s", rep.Status, rep.Body)
	}
	drained := time.Now()
	select {
	case <-g.exited:
		if g.err != nil {
			t.Errorf("the gateway exited with %v after a graceful shutdown", g.err)
		}
		t.Logf("the gateway exited %s after its last request finished", time.Since(drained))
	case <-time.After(5 * time.Second):
		t.Errorf("the gateway had not exited 5s after its last request finished (shutdown hangs)")
	}
}

// TestUsageRecorded: every model request leaves a usage record (model,
// platform model, tokens, wait, outcome) in the gateway's database within
// a few flush intervals.
func TestUsageRecorded(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, mock.Config{})
	g := startGateway(t, "  usage_flush_interval: 100ms", oneModel(up.URL, ""))
	id, key := g.createKey(t)

	rep := g.do(t, request{Path: "/v1/chat/completions", Key: key, Body: chatBody("chat")})
	if rep.Status != http.StatusOK {
		t.Fatalf("status %d: %s", rep.Status, rep.Body)
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, g.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []weir.Usage
	waitFor(t, 5*time.Second, "the usage record to be stored", func() bool {
		got, err = db.UsageList(ctx, weir.UsageFilter{KeyID: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(got) > 0
	})
	u := got[0]
	if len(got) != 1 || u.RequestID != rep.Header.Get("X-Request-Id") || u.Model != "chat" || u.PlatformModel != "up/chat" ||
		u.Endpoint != "chat" || u.Status != http.StatusOK || u.Outcome != "ok" || u.PromptTokens == 0 || u.CompletionTokens == 0 {
		t.Errorf("usage records %+v, want one for request %s: chat on up/chat, 200 ok, with tokens", got, rep.Header.Get("X-Request-Id"))
	}
}

// TestSecondServeOnSameStorageRefused: the embedded store is one process's
// alone (at start it reclaims every job left running), so a second `weir
// serve` on the same database refuses to start, and says why, while the
// first goes on serving.
func TestSecondServeOnSameStorageRefused(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{}))
	cmd := exec.Command(weirBin, "serve", "-c", g.Config)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a second weir serve on %s started:\n%s", g.DB, out)
	}
	if !strings.Contains(string(out), "in use by another weir serve") || !strings.Contains(string(out), "waiting for it to exit") {
		t.Errorf("second weir serve failed without saying it waited and the storage is in use:\n%s", out)
	}
	if resp, err := http.Get(g.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the first gateway stopped serving: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// TestRestartWaitsForTheLock: a `weir serve` started while the previous
// one on the same database is still on its way out (killed, not yet gone)
// waits for its lock instead of failing, and serves once it is free.
func TestRestartWaitsForTheLock(t *testing.T) {
	t.Parallel()
	up := startVideoUpstream(t, mock.Config{})
	g := startGateway(t, "", videoCatalog(up.URL, taskOptions{}))
	cmd := exec.Command(weirBin, "serve", "-c", g.Config)
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(want string) {
		t.Helper()
		timeout := time.After(15 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the second weir serve exited before logging %q", want)
				}
				if strings.Contains(l, want) {
					return
				}
			case <-timeout:
				t.Fatalf("the second weir serve did not log %q within 15s", want)
			}
		}
	}
	next("waiting for it to exit")
	g.kill9(t)
	next(`"weir serving"`)
}
