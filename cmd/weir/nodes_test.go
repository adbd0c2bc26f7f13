package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/keys"
	"github.com/weir-gateway/weir/sqlite"
)

// runNodes runs `weir nodes args...` as a fresh command (flags start at
// their defaults) and returns what it printed and its error.
func runNodes(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := nodesCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SetContext(t.Context())
	err := cmd.Execute()
	return out.String(), err
}

// nodesConfig writes a config naming a new SQLite file and returns the
// config's path and the database's.
func nodesConfig(t *testing.T) (cfgPath, dbPath string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath, dbPath = filepath.Join(dir, "weir.yaml"), filepath.Join(dir, "weir.db")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("storage:\n  driver: sqlite\n  path: %q\n", dbPath)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, dbPath
}

// storedNodes opens the database the commands wrote and lists its nodes.
func storedNodes(t *testing.T, dbPath string) []weir.Node {
	t.Helper()
	db, err := sqlite.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns, err := db.NodeList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestNodesCreateListRevoke: create prints the id, the name and the token
// once, with where to put it; the store keeps the token's hash; list shows
// the node; revoke by name, then by id, marks it revoked once.
func TestNodesCreateListRevoke(t *testing.T) {
	t.Parallel()
	cfg, dbPath := nodesConfig(t)

	out, err := runNodes(t, "create", "-c", cfg, "--name", "gpu-box 1")
	if err != nil {
		t.Fatalf("nodes create: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`(?m)^id: +(node_[0-9a-f]{12})$`).FindStringSubmatch(out)
	token := regexp.MustCompile(`(?m)^token: +(wn-[0-9A-Za-z]{40})$`).FindStringSubmatch(out)
	if id == nil || token == nil || !strings.Contains(out, "name:  gpu-box 1\n") ||
		!strings.Contains(out, "token: in\nnode.yaml") || !strings.Contains(out, "WEIR_NODE_TOKEN") {
		t.Fatalf("nodes create printed:\n%s\nwant the id, the name, the token, and where to put it", out)
	}
	ns := storedNodes(t, dbPath)
	if len(ns) != 1 || ns[0].ID != id[1] || ns[0].Name != "gpu-box 1" || ns[0].Hash != keys.Hash(token[1]) ||
		ns[0].Prefix != token[1][:keys.PrefixLen] || !ns[0].Active() {
		t.Fatalf("stored %+v; want node %s, active, with the token's hash and prefix", ns, id[1])
	}
	if strings.Contains(fmt.Sprintf("%+v", ns[0]), token[1]) {
		t.Errorf("the token itself is stored: %+v", ns[0])
	}

	if _, err := runNodes(t, "create", "-c", cfg, "--name", "another"); err != nil {
		t.Fatal(err)
	}
	out, err = runNodes(t, "list", "-c", cfg)
	if err != nil {
		t.Fatalf("nodes list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID +NAME +PREFIX +CREATED +REVOKED$`).MatchString(lines[0]) ||
		!strings.HasPrefix(lines[1], "node_") || !strings.Contains(lines[1], " another ") ||
		!strings.Contains(lines[2], id[1]+"  gpu-box 1  "+token[1][:keys.PrefixLen]+"…") || !strings.HasSuffix(lines[2], " -") {
		t.Errorf("nodes list:\n%s\nwant a header, then the nodes by name, active", out)
	}

	out, err = runNodes(t, "revoke", "-c", cfg, "gpu-box 1")
	if err != nil || out != fmt.Sprintf("revoked node %s (gpu-box 1)\n", id[1]) {
		t.Fatalf("nodes revoke by name: %v\n%s", err, out)
	}
	revoked := storedNodes(t, dbPath)[1]
	if revoked.ID != id[1] || revoked.Active() {
		t.Fatalf("after revoke: %+v, want node %s revoked", revoked, id[1])
	}
	out, err = runNodes(t, "revoke", "-c", cfg, id[1])
	if err != nil || !strings.Contains(out, "already revoked") {
		t.Errorf("nodes revoke by id of a revoked node: %v\n%s; want success saying so", err, out)
	}
	if again := storedNodes(t, dbPath)[1]; !again.RevokedAt.Equal(revoked.RevokedAt) {
		t.Errorf("a second revoke moved RevokedAt from %v to %v", revoked.RevokedAt, again.RevokedAt)
	}
	if other := storedNodes(t, dbPath)[0]; !other.Active() {
		t.Errorf("revoking one node revoked %q too", other.Name)
	}
	out, err = runNodes(t, "list", "-c", cfg)
	if err != nil || !strings.Contains(out, revoked.RevokedAt.Format("2006-01-02T15:04:05Z")) {
		t.Errorf("nodes list after revoke: %v\n%s; want the revocation time", err, out)
	}
}

// TestNodesBadInput: each mistake is an error that says what is wrong,
// and changes nothing.
func TestNodesBadInput(t *testing.T) {
	t.Parallel()
	cfg, dbPath := nodesConfig(t)
	if _, err := runNodes(t, "create", "-c", cfg, "--name", "gpu-1"); err != nil {
		t.Fatal(err)
	}
	before := storedNodes(t, dbPath)

	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"create", "-c", cfg}, "--name is required"},
		{[]string{"create", "-c", cfg, "--name", ""}, "--name is required"},
		{[]string{"create", "-c", cfg, "--name", " gpu-2"}, "name: "},
		{[]string{"create", "-c", cfg, "--name", "node_0123456789ab"}, "shape of a node id"},
		{[]string{"create", "-c", cfg, "--name", strings.Repeat("x", 101)}, "name: "},
		{[]string{"create", "-c", cfg, "--name", "gpu-1"}, `a node named "gpu-1" exists already`},
		{[]string{"create", "-c", cfg, "--name", "x", "extra"}, "unknown command"},
		{[]string{"revoke", "-c", cfg, "gpu-9"}, `no node with id or name "gpu-9"`},
		{[]string{"revoke", "-c", cfg, "node_0123456789ab"}, `no node with id or name "node_0123456789ab"`},
		{[]string{"revoke", "-c", cfg}, "accepts 1 arg"},
		{[]string{"list", "-c", filepath.Join(t.TempDir(), "missing.yaml")}, "-c FILE"},
	} {
		out, err := runNodes(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weir nodes %q: %v\n%s\nwant an error saying %q", tc.args, err, out, tc.want)
		}
		if strings.Contains(out, "wn-") {
			t.Errorf("weir nodes %q printed a token:\n%s", tc.args, out)
		}
	}
	if _, err := runNodes(t, "revoke", "-c", cfg, "gpu-9"); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("revoke of an unknown node: %v, want ErrNotFound", err)
	}
	after := storedNodes(t, dbPath)
	if len(after) != len(before) || after[0] != before[0] {
		t.Errorf("nodes after the mistakes: %+v, want %+v", after, before)
	}
}

// TestNodesRegistered: the weir command has the nodes subcommands.
func TestNodesRegistered(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"create", "list", "revoke", "forget"} {
		cmd, _, err := rootCmd.Find([]string{"nodes", sub})
		if err != nil || cmd.Name() != sub || cmd.Parent().Name() != "nodes" {
			t.Errorf("weir nodes %s: %v, %v", sub, cmd, err)
		}
	}
}

// TestNodesForget: weir nodes forget asks the admin API to forget the
// node, by id or name (escaped in the path), prints what it retired,
// and says why when the server refuses; without --addr it asks nothing.
func TestNodesForget(t *testing.T) {
	t.Parallel()
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.EscapedPath())
		if strings.Contains(r.URL.Path, "gpu live") {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"node \"gpu live\" is connected","code":"invalid_request"}}`)
			return
		}
		fmt.Fprint(w, `{"id":"node_0123456789ab","name":"gpu-a","scopes":["node:node_0123456789ab/vllm","node:node_0123456789ab/vllm/long"]}`)
	}))
	t.Cleanup(srv.Close)
	out, err := runNodes(t, "forget", "gpu-a", "--addr", srv.URL)
	if err != nil || !strings.Contains(out, "forgot node gpu-a (node_0123456789ab); retired 2 scopes") || !strings.Contains(out, "node:node_0123456789ab/vllm/long") {
		t.Errorf("forget: %q, %v", out, err)
	}
	if _, err := runNodes(t, "forget", "gpu live", "--addr", srv.URL); err == nil || !strings.Contains(err.Error(), "is connected") {
		t.Errorf("forget a connected node: %v", err)
	}
	if want := []string{"POST /admin/nodes/gpu-a/forget", "POST /admin/nodes/gpu%20live/forget"}; !slices.Equal(asked, want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
	if _, err := runNodes(t, "forget", "gpu-a"); err == nil || !strings.Contains(err.Error(), "--addr is required") {
		t.Errorf("forget without --addr: %v", err)
	}
}
