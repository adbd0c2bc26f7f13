package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-gateway/weir/provider/mock"
)

// The console's browser test drives the page in Debian's chromium
// through playwright-core (browser/console.mjs). Without chromium, Node
// or `npm ci` in e2e/browser, it is skipped and says so loudly, unless
// WEIR_TEST_BROWSER=require (as .ci/run sets), where it fails instead.

const chromiumPath = "/usr/bin/chromium"

// browserReady reports what is missing to run the browser test, or "".
func browserReady() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		return chromiumPath + " is missing (apt-get install chromium)"
	}
	if _, err := os.Stat(filepath.Join("browser", "node_modules", "playwright-core")); err != nil {
		return "playwright-core is not installed (npm ci in e2e/browser)"
	}
	return ""
}

// TestConsoleInBrowser: log in, watch a burst queue up and drain live on a
// capacity-2 model, open its scope's queue and see positions change,
// cancel a queued task, create and revoke keys, drain and resume a
// platform model, and be refused without the token. Screenshots of each
// view go to $WEIR_SCREENSHOTS, or e2e/browser/screenshots.
func TestConsoleInBrowser(t *testing.T) {
	if missing := browserReady(); missing != "" {
		if os.Getenv("WEIR_TEST_BROWSER") == "require" {
			t.Fatalf("WEIR_TEST_BROWSER=require, but %s", missing)
		}
		fmt.Printf("\n*** SKIPPING the console's browser tests (TestConsoleInBrowser): %s. .ci/run installs what they need. ***\n\n", missing)
		t.Skipf("SKIPPED: the console's browser tests: %s", missing)
	}
	up := startUpstream(t, mock.Config{Latency: 700 * time.Millisecond, JobDuration: 5 * time.Minute})
	const token = "console-test-token"
	g := startGateway(t, "  admin_token: "+token, fmt.Sprintf(`tasks:
  workers: 4
  poll_min: 50ms
  poll_max: 250ms
platforms:
  - name: up
    base_url: %[1]s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
    concurrency: 2
    queue_limit: 50
  - name: up/video
    platform: up
    upstream: sora-2
    concurrency: 1
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
  - name: sora-2
    kind: video
    candidates:
      - platform_model: up/video
`, up.URL))
	_, key := g.createKey(t, "--name", "burst")
	doomedID, doomed := g.createKey(t, "--name", "doomed")

	shots := os.Getenv("WEIR_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join("browser", "screenshots")
	}
	shots, err := filepath.Abs(shots)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "console.mjs")
	cmd.Dir = "browser"
	cmd.Env = append(os.Environ(),
		"WEIR_URL="+g.URL, "WEIR_ADMIN_TOKEN="+token, "WEIR_KEY="+key, "WEIR_KEY_NAME=burst",
		"WEIR_REVOKE_KEY_ID="+doomedID, "WEIR_REVOKE_KEY="+doomed, "WEIR_SHOTS="+shots,
		"WEIR_CHAT_MODEL=chat", "WEIR_CHAT_SCOPE=pm:up/chat", "WEIR_VIDEO_MODEL=sora-2", "WEIR_CHROMIUM="+chromiumPath)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("browser test output:\n%s", out.String())
	if err != nil {
		t.Fatalf("the browser test failed: %v (screenshots in %s)", err, shots)
	}
	t.Logf("screenshots of each view are in %s", shots)
}
