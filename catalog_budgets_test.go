package weir_test

import (
	"errors"
	"testing"

	"github.com/weir-gateway/weir"
)

// TestCatalogBudgets: the catalog's budgets are checked where they sit,
// "budgets[i]...": valid, of a defined group, model or platform model,
// with the ID their subject and window give, one per window length.
func TestCatalogBudgets(t *testing.T) {
	t.Parallel()
	budget := func(sub weir.BudgetSubject, window string) weir.Budget {
		w, err := weir.ParseWindow(window)
		if err != nil {
			t.Fatal(err)
		}
		return weir.Budget{ID: weir.ConfigBudgetID(sub, w), Subject: sub, Amount: weir.MoneyScale, Window: w, Mode: weir.BudgetHard}
	}
	group, model := weir.BudgetSubject{Type: "group", Name: "default"}, weir.BudgetSubject{Type: "model", Name: "m"}
	pm, key := weir.BudgetSubject{Type: "platform_model", Name: "p/m"}, weir.BudgetSubject{Type: "key", Name: "key_anything"}
	for _, tc := range []struct {
		name    string
		budgets []weir.Budget
		want    string // the path at fault; "" valid
	}{
		{"one of each", []weir.Budget{budget(group, "month"), budget(group, "day"), budget(model, "7d"), budget(pm, "week"), budget(key, "12h")}, ""},
		{"an unknown group", []weir.Budget{budget(weir.BudgetSubject{Type: "group", Name: "gold"}, "day")}, "budgets[0].subject"},
		{"an unknown model", []weir.Budget{budget(group, "day"), budget(weir.BudgetSubject{Type: "model", Name: "p/m"}, "day")}, "budgets[1].subject"},
		{"an unknown platform model", []weir.Budget{budget(weir.BudgetSubject{Type: "platform_model", Name: "m"}, "day")}, "budgets[0].subject"},
		{"two months", []weir.Budget{budget(group, "month"), budget(group, "month")}, "budgets[1].window"},
		{"no amount", []weir.Budget{func() weir.Budget { b := budget(group, "day"); b.Amount = 0; return b }()}, "budgets[0].amount"},
		{"an unknown zone", []weir.Budget{func() weir.Budget { b := budget(group, "day"); b.Window.Zone = "Nowhere/None"; return b }()}, "budgets[0].zone"},
		{"another ID", []weir.Budget{func() weir.Budget { b := budget(group, "day"); b.ID = "bgt_1"; return b }()}, "budgets[0].id"},
	} {
		c := weir.Catalog{
			Platforms:      []weir.Platform{{Name: "p", Kind: "openai", BaseURL: "https://api.example.com/v1"}},
			PlatformModels: []weir.PlatformModel{{Name: "p/m", Platform: "p", Upstream: "m"}},
			Models:         []weir.Model{{Name: "m", Kind: weir.KindChat, Candidates: []weir.Candidate{{PlatformModel: "p/m", Weight: 1}}}},
			Groups:         []weir.Group{{Name: "default"}},
			Budgets:        tc.budgets,
		}
		err := c.Validate()
		var fe *weir.FieldError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.As(err, &fe) || fe.Path != tc.want):
			t.Errorf("%s: %v; want a FieldError at %s", tc.name, err, tc.want)
		}
	}
	c := weir.Catalog{Groups: []weir.Group{{Name: "default"}, {Name: "gold"}}}
	if err := c.CheckBudgetSubject(weir.BudgetSubject{Type: "group", Name: "silver"}); !errors.Is(err, weir.ErrInvalid) || err.Error() != `subject: no group "silver" in the catalog (groups: default, gold)` {
		t.Errorf("CheckBudgetSubject of an unknown group: %v", err)
	}
	if err := c.CheckBudgetSubject(weir.BudgetSubject{Type: "key", Name: "key_1"}); err != nil {
		t.Errorf("CheckBudgetSubject of a key: %v; keys are not the catalog's", err)
	}
}
