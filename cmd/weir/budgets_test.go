package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/sqlite"
)

// runBudgets runs `weir budgets args...` as a fresh command and returns
// what it printed and its error.
func runBudgets(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCmd(t, budgetsCmd(), args...)
}

// budgetsConfig writes a config of one group, premium, on a SQLite file
// in a temporary directory, and returns its path and the database's.
func budgetsConfig(t *testing.T) (cfg, dbPath string) {
	t.Helper()
	dir := t.TempDir()
	cfg, dbPath = filepath.Join(dir, "weir.yaml"), filepath.Join(dir, "weir.db")
	yaml := fmt.Sprintf("storage:\n  driver: sqlite\n  path: %q\ngroups:\n  - name: premium\n", dbPath)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, dbPath
}

func storedBudgets(t *testing.T, dbPath string) []weir.Budget {
	t.Helper()
	db, err := sqlite.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bs, err := db.BudgetList(t.Context(), weir.BudgetFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

var budgetIDRe = regexp.MustCompile(`bgt_[0-9a-f]+`)

// TestBudgetsCommands: a key made with --budget has its hard budget; a
// budget made, raised and deleted from the command line is so in the
// store.
func TestBudgetsCommands(t *testing.T) {
	t.Parallel()
	cfg, dbPath := budgetsConfig(t)
	out, err := runKeys(t, "create", "-c", cfg, "--budget", "50/month", "--budget-zone", "Europe/Berlin")
	if err != nil || !strings.Contains(out, "secret:") || !strings.Contains(out, "budget: 50.00 per month, hard") {
		t.Fatalf("keys create --budget: %v\n%s", err, out)
	}
	bs := storedBudgets(t, dbPath)
	if len(bs) != 1 || bs[0].Subject.Type != "key" || !strings.Contains(out, bs[0].Subject.Name) ||
		bs[0].Amount != 50*weir.MoneyScale || bs[0].Window.Zone != "Europe/Berlin" || bs[0].Mode != weir.BudgetHard {
		t.Fatalf("stored %+v", bs)
	}
	keyID := bs[0].Subject.Name

	out, err = runBudgets(t, "create", "-c", cfg, "group:premium", "12.50/day", "--mode", "soft", "--alerts", "80,100")
	if err != nil || !strings.Contains(out, "group:premium") || !strings.Contains(out, "12.50") || !strings.Contains(out, "80%,100%") {
		t.Fatalf("budgets create: %v\n%s", err, out)
	}
	id := budgetIDRe.FindString(out)
	for _, subject := range []string{"user:*", "user:alice"} {
		if out, err := runBudgets(t, "create", "-c", cfg, subject, "2/day"); err != nil || !strings.Contains(out, subject) {
			t.Fatalf("budgets create %s: %v\n%s", subject, err, out)
		}
	}
	if out, err = runBudgets(t, "set", "-c", cfg, id, "--amount", "20", "--alerts", "none"); err != nil || !strings.Contains(out, "20.00") {
		t.Fatalf("budgets set: %v\n%s", err, out)
	}
	out, err = runBudgets(t, "list", "-c", cfg, "key:"+keyID)
	if err != nil || !strings.Contains(out, "50.00") || strings.Contains(out, "group:premium") {
		t.Errorf("budgets list key:%s: %v\n%s", keyID, err, out)
	}
	if out, err = runBudgets(t, "list", "-c", cfg); err != nil || strings.Count(out, "bgt_") != 4 {
		t.Errorf("budgets list: %v\n%s", err, out)
	}
	for _, b := range storedBudgets(t, dbPath) {
		if b.ID == id && (b.Amount != 20*weir.MoneyScale || b.Alerts != nil || b.Mode != weir.BudgetSoft) {
			t.Errorf("after set: %+v", b)
		}
	}
	if out, err := runBudgets(t, "delete", "-c", cfg, id); err != nil || !strings.Contains(out, "deleted "+id) {
		t.Fatalf("budgets delete: %v\n%s", err, out)
	}
	if _, err := runBudgets(t, "delete", "-c", cfg, id); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("budgets delete again: %v; want ErrNotFound", err)
	}
	if bs := storedBudgets(t, dbPath); len(bs) != 3 || bs[0].Subject.Name != keyID {
		t.Errorf("after delete: %+v", bs)
	}
}

// TestBudgetsCommandsRefuse: what would never apply, or is not a budget,
// is refused and nothing is stored; a key whose --budget is wrong is
// not made.
func TestBudgetsCommandsRefuse(t *testing.T) {
	t.Parallel()
	cfg, dbPath := budgetsConfig(t)
	for _, args := range [][]string{
		{"create", "group:gold", "5/day"},
		{"create", "key:key_none", "5/day"},
		{"create", "model:m", "5/day"},
		{"create", "customer:u", "5/day"},
		{"create", "user:a\tb", "5/day"},
		{"create", "group:premium", "5/year"},
		{"create", "group:premium", "0/day"},
		{"create", "group:premium", "5/day", "--mode", "strict"},
		{"create", "group:premium", "5/day", "--alerts", "100,80"},
		{"create", "group:premium", "5/day", "--zone", "Mars/Olympus"},
		{"create", "group:premium", "5/7d", "--anchor", "monday"},
		{"set", "bgt_none", "--amount", "5"},
		{"set", "bgt_none"},
		{"list", "nope"},
	} {
		out, err := runBudgets(t, append(args, "-c", cfg)...)
		if !errors.Is(err, weir.ErrInvalid) && !errors.Is(err, weir.ErrNotFound) {
			t.Errorf("budgets %v: %v\n%s; want it refused", args, err, out)
		}
	}
	if out, err := runKeys(t, "create", "-c", cfg, "--budget", "50/fortnight"); err == nil || strings.Contains(out, "secret:") {
		t.Errorf("keys create --budget 50/fortnight: %v\n%s; want it refused before the key is made", err, out)
	}
	if bs := storedBudgets(t, dbPath); len(bs) != 0 {
		t.Errorf("stored after the refusals: %+v", bs)
	}
	db, err := sqlite.Open(t.Context(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if ks, _ := db.KeyList(t.Context()); len(ks) != 0 {
		t.Errorf("a key was made: %+v", ks)
	}
}
