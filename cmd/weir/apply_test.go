package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-gateway/weir/pgtest"
)

// TestApplyPublishes: weir apply publishes a file's catalog to the fleet
// on the PostgreSQL it names, once: the same catalog again publishes
// nothing, another is the next version; a catalog that is not valid, or
// a file on SQLite, is refused.
func TestApplyPublishes(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	dsn := pgtest.Schema(t)
	dir := t.TempDir()
	write := func(name, catalog string) string {
		path := filepath.Join(dir, name)
		text := fmt.Sprintf("storage:\n  driver: postgres\n  dsn: %q\n%s", dsn, catalog)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	one := write("one.yaml", "groups:\n  - name: batch\n    concurrency: 2\n")
	two := write("two.yaml", "groups:\n  - name: batch\n    concurrency: 3\n")
	bad := write("bad.yaml", "platform_models:\n  - {name: x/y, platform: nowhere, upstream: m}\n")
	for _, step := range []struct {
		path, want string
	}{
		{one, "published catalog version 1"},
		{one, "the fleet's catalog version 1 (published by weir apply"},
		{two, "published catalog version 2"},
	} {
		out, err := runCmd(t, applyCmd(), "-c", step.path)
		if err != nil || !strings.Contains(out, step.want) {
			t.Fatalf("weir apply -c %s: %q, %v; want %q", filepath.Base(step.path), out, err, step.want)
		}
	}
	// A key's group, and a budget's subject, are the fleet's catalog's,
	// not the file's.
	none := write("none.yaml", "")
	if out, err := runKeys(t, "create", "-c", none, "--name", "k", "--group", "batch"); err != nil {
		t.Errorf("a key of the fleet's group batch, from a file without it: %q, %v", out, err)
	}
	if out, err := runBudgets(t, "create", "-c", none, "group:batch", "5/month"); err != nil {
		t.Errorf("a budget of the fleet's group batch, from a file without it: %q, %v", out, err)
	}
	if out, err := runCmd(t, applyCmd(), "-c", bad); err == nil {
		t.Errorf("a catalog naming an unknown platform: %q; want an error", out)
	}
	sqlite := filepath.Join(dir, "sqlite.yaml")
	if err := os.WriteFile(sqlite, fmt.Appendf(nil, "storage:\n  path: %q\n", filepath.Join(dir, "weir.db")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCmd(t, applyCmd(), "-c", sqlite); err == nil || !strings.Contains(err.Error(), "SIGHUP") {
		t.Errorf("weir apply on SQLite: %q, %v; want an error that says to reload", out, err)
	}
}
