package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// platform model, see the burst's spend against its group's budget, and
// be refused without the token. Screenshots of each
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
    price: {input: 1000, output: 1000}
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
budgets:
  - subject: group:default
    budget: 0.000001/day
    mode: soft
    alerts: [50]
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

// TestRebindingRefused: a `weir serve` on loopback with no admin token
// trusts loopback clients. A page of another site whose name has been made
// to resolve to 127.0.0.1 (DNS rebinding) reaches it as a loopback client,
// same-origin in its browser's eyes, naming its own host: it must get
// nothing — not the console's page and its CSRF token, not the queues —
// and change nothing. Loopback names still get in, and with an admin token
// the token is what counts, whatever the Host.
func TestRebindingRefused(t *testing.T) {
	up := startUpstream(t, mock.Config{})
	catalog := fmt.Sprintf(`platforms:
  - name: up
    base_url: %s
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
    concurrency: 2
models:
  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
`, up.URL)
	g := startGateway(t, "", catalog)
	_, key := g.createKey(t, "--name", "app")
	port := g.URL[strings.LastIndex(g.URL, ":")+1:]
	send := func(g *gateway, method, path, host, body string, hdr map[string]string) *reply {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, g.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s for Host %s: %v", method, path, host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return &reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}

	// The attacker's page, at http://evil.example:PORT, now resolving to
	// 127.0.0.1: its requests are same-origin to its browser.
	evil := "evil.example:" + port
	// It reads the CSRF token, as the console's own page does, if it can.
	var session struct{ CSRF string }
	_ = json.Unmarshal(send(g, "GET", "/console/api/session", evil, "", nil).Body, &session)
	if session.CSRF == "" {
		session.CSRF = strings.Repeat("0", 64)
	}
	page := map[string]string{"Origin": "http://" + evil, "Sec-Fetch-Site": "same-origin", "X-Weir-Csrf": session.CSRF}
	for _, rq := range []struct{ method, path, body string }{
		{"GET", "/", ""},
		{"GET", "/console/api/session", ""},
		{"GET", "/console/api/keys", ""},
		{"GET", "/admin/queues", ""},
		{"GET", "/admin/nodes", ""},
		{"POST", "/console/api/keys", `{"name":"rebound"}`},
		{"POST", "/console/api/limit", `{"scope":"pm:up/chat","limit":0}`},
		{"POST", "/console/api/drain", `{"platform_model":"up/chat","drained":true}`},
	} {
		rep := send(g, rq.method, rq.path, evil, rq.body, page)
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(rep.Body, &e); rep.Status != http.StatusForbidden || err != nil || e.Error.Code != "forbidden" ||
			!strings.Contains(e.Error.Message, "DNS rebinding") || strings.Contains(string(rep.Body), "weir-csrf") {
			t.Errorf("%s %s for Host %s: %d %s; want 403 forbidden naming DNS rebinding", rq.method, rq.path, evil, rep.Status, rep.Body)
		}
	}
	// Nothing changed: no key, the limit and the drain as they were.
	if pm := g.scope(t, "pm:up/chat"); pm.Limit != 2 {
		t.Errorf("the limit of pm:up/chat is %d; want 2", pm.Limit)
	}
	if rep := send(g, "GET", "/console/api/keys", "127.0.0.1:"+port, "", nil); rep.Status != 200 || strings.Contains(string(rep.Body), "rebound") {
		t.Errorf("keys: %d %s; want no key made", rep.Status, rep.Body)
	}
	if rep := g.do(t, request{Path: "/v1/chat/completions", Body: chatBody("chat"), Key: key, Header: map[string]string{"X-Weir-Max-Wait": "5s"}}); rep.Status != 200 {
		t.Errorf("a chat after the attempts: %d %s; want 200 (not drained)", rep.Status, rep.Body)
	}

	// The loopback names get the page, and its actions work.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		rep := send(g, "GET", "/", host, "", nil)
		if rep.Status != 200 || !strings.Contains(string(rep.Body), `name="weir-csrf"`) {
			t.Errorf("GET / for Host %s: %d; want the console's page", host, rep.Status)
		}
		if rep := send(g, "GET", "/admin/queues", host, "", nil); rep.Status != 200 {
			t.Errorf("GET /admin/queues for Host %s: %d", host, rep.Status)
		}
		var s struct{ CSRF string }
		_ = json.Unmarshal(send(g, "GET", "/console/api/session", host, "", nil).Body, &s)
		own := map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin", "X-Weir-Csrf": s.CSRF}
		if rep := send(g, "POST", "/console/api/drain", host, `{"platform_model":"up/chat","drained":false}`, own); rep.Status != 200 {
			t.Errorf("an action from the console's own page at %s: %d %s", host, rep.Status, rep.Body)
		}
	}

	// With an admin token, the token opens it by any name.
	const token = "rebinding-test-token"
	gt := startGateway(t, "  admin_token: "+token, catalog)
	tokenEvil := "evil.example:" + gt.URL[strings.LastIndex(gt.URL, ":")+1:]
	bearer := map[string]string{"Authorization": "Bearer " + token}
	for _, path := range []string{"/admin/queues", "/console/api/session"} {
		if rep := send(gt, "GET", path, tokenEvil, "", bearer); rep.Status != 200 {
			t.Errorf("GET %s with the token, Host %s: %d %s", path, tokenEvil, rep.Status, rep.Body)
		}
		if rep := send(gt, "GET", path, tokenEvil, "", nil); rep.Status != http.StatusUnauthorized {
			t.Errorf("GET %s without the token, Host %s: %d", path, tokenEvil, rep.Status)
		}
	}
}
