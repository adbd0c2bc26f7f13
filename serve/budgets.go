package serve

import (
	"context"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/metrics"
)

// recordUsage takes one request's usage record: to the store (in
// batches), to the console's charts, and its cost to weir_spend_total.
// A record of a request that reached no upstream and cost nothing (one
// refused or timed out in the queue) adds no spend series.
func (m *Main) recordUsage(u weir.Usage) {
	m.Usage.Record(u)
	m.Recorder.Usage(u)
	if u.PlatformModel != "" || u.Cost > 0 {
		m.Metrics.Spent(u.KeyID, u.Group, u.Model, u.PlatformModel, u.Cost)
	}
}

// taskEnded records an ended task's usage, as a request's is recorded:
// what it cost reaches the store, the charts and weir_spend_total.
func (m *Main) taskEnded(t weir.Task) {
	if u, ok := m.Gateway.TaskUsage(t); ok {
		m.recordUsage(u)
	}
}

// budgetGauger is what reports the budgets' state for the weir_budget_*
// gauges, if a part does so itself; otherwise serve reads it from the
// engine (budgetGauges).
type budgetGauger interface {
	BudgetGauges(ctx context.Context) []metrics.BudgetGauge
}

// watchBudgets has the metrics read the budgets' state at each scrape:
// from src if it reports it, else from the engine and the store.
func (m *Main) watchBudgets(src any) {
	if g, ok := src.(budgetGauger); ok {
		m.Metrics.SetBudgets(g.BudgetGauges)
		return
	}
	m.Metrics.SetBudgets(m.budgetGauges)
}

// budgetGauges is each budget in force and its window's state: as the
// engine counts it (spent and settled, reserved by the requests in
// flight) where the gateway has set up the budget's scope for the window
// now, and otherwise, before a request of the window reached this
// process, what the store has recorded. Keys' budgets only with
// server.metrics_spend_by_key: one series per key does not scale.
func (m *Main) budgetGauges(ctx context.Context) []metrics.BudgetGauge {
	bs, err := m.Gateway.Budgets(ctx)
	if err != nil {
		m.Logger.Warn("metrics: could not list the budgets", "error", err)
		return nil
	}
	byKey := m.Config.Server.MetricsSpendByKey
	// A budget of every end user apart has a series per end user, which
	// no label set bounds: it has none (GET /admin/spend?by=user says
	// what end users spent).
	bs = slices.DeleteFunc(bs, func(b weir.Budget) bool { return b.Subject.Type == "key" && !byKey || b.Subject.EveryEndUser() })
	if len(bs) == 0 {
		return nil
	}
	scopes := make(map[string]admission.ScopeStats)
	for _, st := range m.Engine.Scopes(ctx) {
		if _, ok := weir.BudgetOfScope(st.Name); ok {
			scopes[st.Name] = st
		}
	}
	now := time.Now()
	out := make([]metrics.BudgetGauge, 0, len(bs))
	for _, b := range bs {
		g := metrics.BudgetGauge{ID: b.ID, SubjectType: b.Subject.Type, Subject: b.Subject.Name, Mode: string(b.Mode), Amount: b.Amount}
		from, until := b.Window.Bounds(now)
		if st, ok := scopes[weir.BudgetScope(b.ID)]; ok && st.BudgetFrom.Equal(from) {
			g.Spent, g.Reserved = weir.Money(st.BudgetSpent), weir.Money(st.BudgetReserved)
		} else if g.Spent, err = m.DB.SpendSum(ctx, weir.SpendFilter{Subject: b.Subject, From: from, Until: until}); err != nil {
			m.Logger.Warn("metrics: could not read a budget's spend", "budget", b.ID, "error", err)
			continue
		}
		out = append(out, g)
	}
	return out
}
