package serve

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/console"
	"github.com/weir-gateway/weir/metrics"
)

// budgetList is every budget in force, as the console's spend view
// shows them: the store's (the admin API's and the CLI's, every
// replica's) and those of the catalog last applied (the config file's),
// which the store does not keep.
type budgetList struct {
	store   budgetLister
	catalog atomic.Pointer[[]weir.Budget]
}

// budgetLister is what budgetList reads of the store.
type budgetLister interface {
	BudgetList(ctx context.Context, f weir.BudgetFilter) ([]weir.Budget, error)
}

var _ console.Budgets = (*budgetList)(nil)

// Budgets lists the store's budgets, then the catalog's.
func (l *budgetList) Budgets(ctx context.Context) ([]weir.Budget, error) {
	bs, err := l.store.BudgetList(ctx, weir.BudgetFilter{})
	if err != nil {
		return nil, err
	}
	if cat := l.catalog.Load(); cat != nil {
		bs = append(slices.Clip(bs), *cat...)
	}
	return bs, nil
}

// applied keeps the budgets of cat, the catalog now served.
func (l *budgetList) applied(cat weir.Catalog) {
	bs := slices.Clone(cat.Budgets)
	l.catalog.Store(&bs)
}

// budgetGauger is what reports the budgets' state for the weir_budget_*
// gauges: each budget in force, what its window has spent and what the
// requests in flight hold reserved. The gateway's budgets, which keep
// each budget's window in the engine, are to implement it.
type budgetGauger interface {
	BudgetGauges(ctx context.Context) []metrics.BudgetGauge
}

// watchBudgets has the metrics read the budgets' state at each scrape
// from src, if it reports it; until then the weir_budget_* gauges are
// empty.
func (m *Main) watchBudgets(src any) {
	if g, ok := src.(budgetGauger); ok {
		m.Metrics.SetBudgets(g.BudgetGauges)
	}
}
