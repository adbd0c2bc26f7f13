package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

const budgetsYAML = `budgets:
  - subject: group:premium
    budget: 500/month
    zone: Europe/Berlin
    mode: soft
    alerts: [80, 100]
  - subject: group:premium
    budget: 20/day
  - subject: platform_model:a/m
    budget: 100.5/30d
    anchor: 2026-01-01T00:00:00Z
    mode: shadow
  - subject: key:key_abc
    budget: 5/12h
  - subject: user:*
    budget: 2/day
  - subject: user:alice
    budget: 3/day
`

// TestCatalogBudgets: the budgets list becomes the catalog's budgets,
// in the file's order, each with its ID from subject and window and its
// defaults (mode hard).
func TestCatalogBudgets(t *testing.T) {
	t.Parallel()
	c, err := parse([]byte(catalogYAML+budgetsYAML), env())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.catalog(env())
	if err != nil {
		t.Fatal(err)
	}
	premium, pm, key := weir.BudgetSubject{Type: "group", Name: "premium"}, weir.BudgetSubject{Type: "platform_model", Name: "a/m"},
		weir.BudgetSubject{Type: "key", Name: "key_abc"}
	want := []weir.Budget{
		{ID: "cfg:group:premium:month", Subject: premium, Amount: 500 * weir.MoneyScale,
			Window: weir.Window{Unit: "month", Zone: "Europe/Berlin"}, Mode: weir.BudgetSoft, Alerts: []int{80, 100}},
		{ID: "cfg:group:premium:day", Subject: premium, Amount: 20 * weir.MoneyScale, Window: weir.Window{Unit: "day"}, Mode: weir.BudgetHard},
		{ID: "cfg:platform_model:a/m:30d", Subject: pm, Amount: 100*weir.MoneyScale + weir.MoneyScale/2,
			Window: weir.Window{Every: 30 * 24 * time.Hour, Anchor: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, Mode: weir.BudgetShadow},
		{ID: "cfg:key:key_abc:12h", Subject: key, Amount: 5 * weir.MoneyScale, Window: weir.Window{Every: 12 * time.Hour}, Mode: weir.BudgetHard},
		{ID: "cfg:user:*:day", Subject: weir.BudgetSubject{Type: "user", Name: "*"}, Amount: 2 * weir.MoneyScale, Window: weir.Window{Unit: "day"}, Mode: weir.BudgetHard},
		{ID: "cfg:user:alice:day", Subject: weir.BudgetSubject{Type: "user", Name: "alice"}, Amount: 3 * weir.MoneyScale, Window: weir.Window{Unit: "day"}, Mode: weir.BudgetHard},
	}
	if len(cat.Budgets) != len(want) {
		t.Fatalf("catalog budgets %+v; want %+v", cat.Budgets, want)
	}
	for i := range want {
		got := cat.Budgets[i]
		if !got.Window.Anchor.Equal(want[i].Window.Anchor) {
			t.Errorf("[%d] anchor %s; want %s", i, got.Window.Anchor, want[i].Window.Anchor)
		}
		got.Window.Anchor = want[i].Window.Anchor
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("[%d]\n got %+v\nwant %+v", i, got, want[i])
		}
	}
}

// TestValidateBudgets: a bad budget is refused with its path in the file.
func TestValidateBudgets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, entry, want string
	}{
		{"a bad subject", "  - subject: premium\n    budget: 5/day\n", `budgets[0].subject: "premium": want group:NAME`},
		{"an unknown group", "  - subject: group:gold\n    budget: 5/day\n", `budgets[0].subject: no group "gold" in the catalog (groups: default, premium)`},
		{"an unknown model", "  - subject: model:x\n    budget: 5/day\n", `budgets[0].subject: no model "x" in the catalog (models: m)`},
		{"no budget", "  - subject: group:premium\n", `budgets[0].budget: "": want AMOUNT/WINDOW`},
		{"a bad window", "  - subject: group:premium\n    budget: 5/year\n", `budgets[0].budget: "5/year": want AMOUNT/WINDOW`},
		{"no amount", "  - subject: group:premium\n    budget: 0/day\n", `budgets[0].budget: "0/day"`},
		{"a bad zone", "  - subject: group:premium\n    budget: 5/day\n    zone: Mars/Olympus\n", `budgets[0].zone: unknown time zone "Mars/Olympus"`},
		{"a bad anchor", "  - subject: group:premium\n    budget: 5/7d\n    anchor: tuesday\n", `budgets[0].anchor: "tuesday": want an RFC 3339 time`},
		{"an anchored month", "  - subject: group:premium\n    budget: 5/month\n    anchor: 2026-01-01T00:00:00Z\n", `budgets[0].window: a calendar month has no period or anchor`},
		{"a bad mode", "  - subject: group:premium\n    budget: 5/day\n    mode: strict\n", `budgets[0].mode: unknown mode "strict"`},
		{"alerts descending", "  - subject: group:premium\n    budget: 5/day\n    alerts: [100, 80]\n", `budgets[0].alerts: thresholds must be ascending`},
		{"two days", "  - subject: group:premium\n    budget: 5/day\n  - subject: group:premium\n    budget: 9/day\n", `budgets[1].window: group:premium has a day budget already`},
	} {
		_, err := parse([]byte(catalogYAML+"budgets:\n"+tc.entry), env())
		if !errors.Is(err, weir.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}
