package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weir-gateway/weir"
)

func money(t *testing.T, s string) weir.Money {
	t.Helper()
	m, err := weir.ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// weir_spend_total sums costs in currency units by group, model and
// platform model; no key label unless asked for; a negative cost counts
// as nothing.
func TestSpentIsBoundedUnlessAsked(t *testing.T) {
	m := New(nil)
	m.Spent("key_a", "team", "gpt", "openai/gpt", money(t, "1.5"))
	m.Spent("key_b", "team", "gpt", "openai/gpt", money(t, "0.25"))
	m.Spent("key_a", "team", "gpt", "azure/gpt", money(t, "0.000000001"))
	m.Spent("key_a", "team", "gpt", "azure/gpt", -5)
	want := `
# HELP weir_spend_total What requests cost, in units of the prices' currency, by the key's group, public model and platform model.
# TYPE weir_spend_total counter
weir_spend_total{group="team",model="gpt",platform_model="azure/gpt"} 1e-09
weir_spend_total{group="team",model="gpt",platform_model="openai/gpt"} 1.75
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "weir_spend_total"); err != nil {
		t.Fatal(err)
	}

	byKey := New(nil)
	byKey.SetSpendByKey(true)
	byKey.SetSpendByKey(true) // again: no change, nothing registered twice
	byKey.Spent("key_a", "team", "gpt", "openai/gpt", money(t, "1.5"))
	byKey.Spent("key_b", "team", "gpt", "openai/gpt", money(t, "0.25"))
	want = `
# HELP weir_spend_total What requests cost, in units of the prices' currency, by key (its id), the key's group, public model and platform model.
# TYPE weir_spend_total counter
weir_spend_total{group="team",key="key_a",model="gpt",platform_model="openai/gpt"} 1.5
weir_spend_total{group="team",key="key_b",model="gpt",platform_model="openai/gpt"} 0.25
`
	if err := testutil.GatherAndCompare(byKey.Registry, strings.NewReader(want), "weir_spend_total"); err != nil {
		t.Fatal(err)
	}
}

// The weir_budget_* gauges read the budgets at scrape time, in currency
// units: keys' budgets only with SetSpendByKey, each budget once.
func TestBudgetGauges(t *testing.T) {
	budgets := []BudgetGauge{
		{ID: "cfg:group:team:month", SubjectType: "group", Subject: "team", Mode: "hard", Amount: money(t, "2"), Spent: money(t, "1.5"), Reserved: money(t, "0.25")},
		{ID: "bgt_1", SubjectType: "key", Subject: "key_a", Mode: "soft", Amount: money(t, "1"), Spent: money(t, "1.5")},
		{ID: "cfg:group:team:month", SubjectType: "group", Subject: "team", Mode: "hard", Amount: money(t, "2")},
	}
	m := New(nil)
	if n, err := testutil.GatherAndCount(m.Registry, "weir_budget_remaining"); err != nil || n != 0 {
		t.Fatalf("before SetBudgets: %d series, %v", n, err)
	}
	m.SetBudgets(func(context.Context) []BudgetGauge { return budgets })
	want := `
# HELP weir_budget_remaining What is left of a budget in its window: its amount less what is spent and reserved, in units of the prices' currency; below 0 when a soft or shadow budget, or one request's real cost beyond its estimate, passed it.
# TYPE weir_budget_remaining gauge
weir_budget_remaining{budget="cfg:group:team:month",mode="hard",subject="team",subject_type="group"} 0.25
# HELP weir_budget_spent What a budget's window has spent so far (settled), in units of the prices' currency.
# TYPE weir_budget_spent gauge
weir_budget_spent{budget="cfg:group:team:month",mode="hard",subject="team",subject_type="group"} 1.5
# HELP weir_budget_amount A budget's amount per window, in units of the prices' currency.
# TYPE weir_budget_amount gauge
weir_budget_amount{budget="cfg:group:team:month",mode="hard",subject="team",subject_type="group"} 2
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "weir_budget_remaining", "weir_budget_spent", "weir_budget_amount"); err != nil {
		t.Fatal(err)
	}

	m.SetSpendByKey(true)
	want = `
# HELP weir_budget_remaining What is left of a budget in its window: its amount less what is spent and reserved, in units of the prices' currency; below 0 when a soft or shadow budget, or one request's real cost beyond its estimate, passed it.
# TYPE weir_budget_remaining gauge
weir_budget_remaining{budget="bgt_1",mode="soft",subject="key_a",subject_type="key"} -0.5
weir_budget_remaining{budget="cfg:group:team:month",mode="hard",subject="team",subject_type="group"} 0.25
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "weir_budget_remaining"); err != nil {
		t.Fatal(err)
	}
	m.SetBudgets(nil)
	if n, err := testutil.GatherAndCount(m.Registry, "weir_budget_amount"); err != nil || n != 0 {
		t.Errorf("after SetBudgets(nil): %d series, %v", n, err)
	}
}

// weir_budget_alerts_total counts alerts by mode and whether this
// replica sent them.
func TestBudgetAlerts(t *testing.T) {
	m := New(nil)
	m.BudgetAlert("soft", true)
	m.BudgetAlert("soft", false)
	m.BudgetAlert("soft", false)
	m.BudgetAlert("hard", true)
	for _, c := range []struct {
		mode, sent string
		want       float64
	}{{"soft", "true", 1}, {"soft", "false", 2}, {"hard", "true", 1}, {"shadow", "true", 0}} {
		if got := testutil.ToFloat64(m.spendState.alerts.WithLabelValues(c.mode, c.sent)); got != c.want {
			t.Errorf("%s sent=%s: %v; want %v", c.mode, c.sent, got, c.want)
		}
	}
}
