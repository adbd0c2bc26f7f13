package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/serve"
)

// runTasks runs `weir tasks args...` as a fresh command (flags start at
// their defaults), wired as main wires it, and returns what it printed
// and its error.
func runTasks(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "weir", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(tasksCmd())
	requireSubcommands(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"tasks"}, args...))
	root.SetContext(t.Context())
	err := root.Execute()
	return out.String(), err
}

// TestTasksEmptyKey: `tasks --key $KEY list` with KEY unset is `tasks
// --key list`; it fails and says that --key took "list", rather than
// print help and exit 0. `--key "$KEY"` (an empty value) fails too,
// rather than fall back to WEIR_API_KEY unasked. No subcommand, or an
// unknown one, fails and lists them.
func TestTasksEmptyKey(t *testing.T) {
	t.Setenv("WEIR_API_KEY", "wk-from-the-environment")
	closed := closedPort(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--addr", closed, "--key", "list"}, []string{"weir tasks needs a subcommand", "(cancel, content, delete, list, show, wait)", `--key took "list"`, "unset variable"}},
		{[]string{"--addr", closed, "--key", "", "list"}, []string{"--key was given an empty value", "WEIR_API_KEY"}},
		{[]string{"--addr", closed}, []string{"weir tasks needs a subcommand (cancel, content, delete, list, show, wait)"}},
		{[]string{"--addr", closed, "lsit"}, []string{`weir tasks has no subcommand "lsit"`}},
	} {
		out, err := runTasks(t, tc.args...)
		if err == nil {
			t.Errorf("%q: no error; printed:\n%s", tc.args, out)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q, want %q in it", tc.args, err, want)
			}
		}
	}
}

// TestFetchHint: the follow-ups carry the key given with --key, so that
// they run as they are copied; with the key in WEIR_API_KEY they use it.
func TestFetchHint(t *testing.T) {
	t.Parallel()
	var given, env bytes.Buffer
	printFetchHint(&given, "http://127.0.0.1:8080", "task_1", "wk-secret")
	printFetchHint(&env, "http://127.0.0.1:8080", "task_1", "")
	for _, want := range []string{
		"tasks --addr http://127.0.0.1:8080 --key wk-secret content task_1",
		`curl -o task_1.mp4 http://127.0.0.1:8080/v1/videos/task_1/content -H "Authorization: Bearer wk-secret"`,
		"tasks --addr http://127.0.0.1:8080 --key wk-secret show task_1",
	} {
		if !strings.Contains(given.String(), want) {
			t.Errorf("with --key: no %q in\n%s", want, given.String())
		}
	}
	for _, want := range []string{
		"tasks --addr http://127.0.0.1:8080 content task_1",
		`-H "Authorization: Bearer $WEIR_API_KEY"`,
	} {
		if !strings.Contains(env.String(), want) {
			t.Errorf("with WEIR_API_KEY: no %q in\n%s", want, env.String())
		}
	}
}

// TestTasksNeedAKey: without --key or WEIR_API_KEY a tasks command says
// how to give one and where to get one, before asking the server.
func TestTasksNeedAKey(t *testing.T) {
	t.Setenv("WEIR_API_KEY", "")
	_, err := runTasks(t, "--addr", "http://127.0.0.1:1", "list")
	if err == nil || !strings.Contains(err.Error(), "--key") || !strings.Contains(err.Error(), "WEIR_API_KEY") ||
		!strings.Contains(err.Error(), "weir keys create") {
		t.Fatalf("err %v, want hints at --key, WEIR_API_KEY and weir keys create", err)
	}
}

// TestTasksWaitAndFetch: a refused key says so with the same hints; nothing
// listening names --addr; a wait for a video ends by saying how to fetch it,
// and `tasks content` saves it.
func TestTasksWaitAndFetch(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(mock.New(mock.Config{JobDuration: 200 * time.Millisecond}))
	defer up.Close()
	cfg := demoConfig(up.URL+"/v1", "127.0.0.1:0", "")
	m, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := weir.APIKey{Name: "t", Group: "default"}
	secret, err := serve.CreateKey(t.Context(), m.DB, &key)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr()

	if _, err := runTasks(t, "--addr", base, "--key", "wk-not-a-key", "list"); err == nil ||
		!strings.Contains(err.Error(), "unauthorized") || !strings.Contains(err.Error(), "weir keys create") {
		t.Errorf("a refused key: %v, want unauthorized with a hint", err)
	}
	ln := closedPort(t)
	if _, err := runTasks(t, "--addr", ln, "--key", secret, "list"); err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Errorf("nothing listening: %v, want a hint at --addr", err)
	}

	req, _ := http.NewRequest(http.MethodPost, base+"/v1/videos", strings.NewReader(`{"model":"sora-2","prompt":"a weir"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted || v.ID == "" {
		t.Fatalf("POST /v1/videos: %d %+v", resp.StatusCode, v)
	}

	out, err := runTasks(t, "--addr", base, "--key", secret, "wait", v.ID, "--every", "20ms")
	if err != nil {
		t.Fatalf("wait: %v\n%s", err, out)
	}
	if strings.Contains(out, "\r") {
		t.Errorf("wait drew in place on a buffer:\n%q", out)
	}
	for _, want := range []string{
		"weir tasks --addr " + base + " --key " + secret + " content " + v.ID,
		"curl -o " + v.ID + ".mp4 " + base + "/v1/videos/" + v.ID + "/content -H \"Authorization: Bearer " + secret + "\"",
		"succeeded",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wait printed no %q:\n%s", want, out)
		}
	}

	file := filepath.Join(t.TempDir(), "v.mp4")
	if out, err := runTasks(t, "--addr", base, "--key", secret, "content", v.ID, "-o", file); err != nil {
		t.Fatalf("content: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(file); err != nil || len(b) == 0 {
		t.Errorf("content saved %d bytes, err %v", len(b), err)
	}
}
