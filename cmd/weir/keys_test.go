package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/sqlite"
)

// TestKeysCreateRefusesAnUnknownGroup: a key must name a group the
// config has (or none, for the default group): an unknown one is an
// error that names the groups there are, and no key is stored, rather
// than a key that silently counts against the default group's limits.
func TestKeysCreateRefusesAnUnknownGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, dbPath := filepath.Join(dir, "weir.yaml"), filepath.Join(dir, "weir.db")
	yaml := fmt.Sprintf("storage:\n  driver: sqlite\n  path: %q\ngroups:\n  - name: premium\n    concurrency: 5\n", dbPath)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runKeys(t, "create", "-c", cfg, "--group", "nosuchgroup")
	if !errors.Is(err, weir.ErrInvalid) || !strings.Contains(err.Error(), `no group "nosuchgroup"`) ||
		!strings.Contains(err.Error(), "groups: default, premium") {
		t.Fatalf("keys create --group nosuchgroup: %v\n%s\nwant an error naming the group and the groups there are", err, out)
	}
	if strings.Contains(out, "secret:") {
		t.Errorf("a secret was printed:\n%s", out)
	}
	for _, group := range []string{"premium", ""} {
		if out, err := runKeys(t, "create", "-c", cfg, "--group", group); err != nil {
			t.Fatalf("keys create --group %q: %v\n%s", group, err, out)
		}
	}
	db, err := sqlite.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ks, err := db.KeyList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || ks[0].Group != "premium" || ks[1].Group != "default" {
		t.Errorf("stored keys %+v; want the premium one and the default one only", ks)
	}
}
