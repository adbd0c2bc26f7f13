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

// The client tests drive Weir with real client libraries in Node
// (clients/*.mjs): the openai SDK's Responses API, Anthropic's SDK and the
// Vercel AI SDK's default OpenAI model. Without Node or `npm ci` in
// e2e/clients they are skipped and say so loudly, unless
// WEIR_TEST_CLIENTS=require (as .ci/run sets), where they fail instead.

// clientsReady reports what is missing to run the client tests, or "".
func clientsReady() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	for _, pkg := range []string{"openai", "@anthropic-ai/sdk", "ai", "@ai-sdk/openai"} {
		if _, err := os.Stat(filepath.Join("clients", "node_modules", pkg)); err != nil {
			return pkg + " is not installed (npm ci in e2e/clients)"
		}
	}
	return ""
}

// runClient runs clients/script against the gateway at url with key,
// asking for model, and fails the test with the script's output if any
// of its checks failed. env adds to the script's environment.
func runClient(t *testing.T, script, url, key, model string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = "clients"
	cmd.Env = append(append(os.Environ(), "WEIR_URL="+url, "WEIR_KEY="+key, "WEIR_MODEL="+model), env...)
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("%s:\n%s", script, out.String())
	if err != nil {
		t.Fatalf("%s failed: %v", script, err)
	}
}

// TestClientLibraries: each client library, unchanged but for its base
// URL and key, against Weir in front of each kind of upstream: an
// OpenAI-compatible platform, an Anthropic one (kind anthropic) and an
// edge node's runtime, all served by mocks.
func TestClientLibraries(t *testing.T) {
	if missing := clientsReady(); missing != "" {
		if os.Getenv("WEIR_TEST_CLIENTS") == "require" {
			t.Fatalf("WEIR_TEST_CLIENTS=require, but %s", missing)
		}
		fmt.Printf("\n*** SKIPPING the client library tests (TestClientLibraries): %s. .ci/run installs what they need. ***\n\n", missing)
		t.Skipf("SKIPPED: the client library tests: %s", missing)
	}
	t.Parallel()
	up := startUpstream(t, mock.Config{CompletionTokens: 8})
	rt := startUpstream(t, mock.Config{CompletionTokens: 8})
	catalog := nodeCatalog() + fmt.Sprintf(`  - name: chat
    kind: chat
    candidates:
      - platform_model: up/chat
  - name: claude
    kind: chat
    candidates:
      - platform_model: ant/claude
platforms:
  - name: up
    base_url: %[1]s
  - name: ant
    kind: anthropic
    base_url: %[1]s
    api_key_env: E2E_ANTHROPIC_KEY
platform_models:
  - name: up/chat
    platform: up
    upstream: gpt-4o-mini
  - name: ant/claude
    platform: ant
    upstream: claude-sonnet-4-5
`, up.URL)
	g := startGatewayEnv(t, []string{"E2E_ANTHROPIC_KEY=ant-key"}, "", catalog)
	_, secret := g.createKey(t)
	n := newNode(t, g, "gpu", rt.URL, 4)
	g.serving(t, n.id, 0)
	for _, model := range []string{"chat", "claude", "local"} {
		for _, script := range []string{"responses.mjs", "anthropic.mjs", "vercel.mjs"} {
			t.Run(model+"/"+script, func(t *testing.T) {
				var env []string
				if model == "claude" {
					// Messages requests pass through to it: thinking too.
					env = append(env, "WEIR_NATIVE_MESSAGES=1")
				}
				runClient(t, script, g.URL, secret, model, env...)
			})
		}
	}
}
