package metrics

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-gateway/weir"
)

// Spend and budgets: what requests cost (weir_spend_total), the state of
// each budget read at scrape time (weir_budget_*), and budget alerts.
// Amounts are in units of the operator's currency, as floats: Prometheus
// has no other number. Per-key series come only with SetSpendByKey: one
// series per API key does not scale, and the operator knows whether
// theirs are few.

// spendVec is weir_spend_total with or without its key label, and its
// children cached by key (empty without the label), group, model and
// platform model.
type spendVec struct {
	vec      *prometheus.CounterVec
	byKey    bool
	children *children[[4]string, prometheus.Counter]
}

func newSpendVec(byKey bool) *spendVec {
	labels := []string{"group", "model", "platform_model"}
	help := "What requests cost, in units of the prices' currency, by the key's group, public model and platform model."
	if byKey {
		labels = append([]string{"key"}, labels...)
		help = "What requests cost, in units of the prices' currency, by key (its id), the key's group, public model and platform model."
	}
	s := &spendVec{byKey: byKey, vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_spend_total", Help: help}, labels)}
	s.children = newChildren(func(l [4]string) prometheus.Counter {
		if byKey {
			return s.vec.WithLabelValues(l[:]...)
		}
		return s.vec.WithLabelValues(l[1:]...)
	})
	return s
}

// BudgetGauge is one budget's state now, for the weir_budget_* gauges:
// its ID, subject (SubjectType one of weir.BudgetSubjectTypes; Subject a
// key's id, or a group's, model's or platform model's name), mode, and
// in the window it is in, its amount, what has been spent and settled,
// and what the requests in flight hold reserved.
type BudgetGauge struct {
	ID, SubjectType, Subject, Mode string
	Amount, Spent, Reserved        weir.Money
}

var (
	budgetLabels    = []string{"budget", "subject_type", "subject", "mode"}
	budgetAmount    = prometheus.NewDesc("weir_budget_amount", "A budget's amount per window, in units of the prices' currency.", budgetLabels, nil)
	budgetSpent     = prometheus.NewDesc("weir_budget_spent", "What a budget's window has spent so far (settled), in units of the prices' currency.", budgetLabels, nil)
	budgetReserved  = prometheus.NewDesc("weir_budget_reserved", "What the requests in flight hold reserved against a budget, in units of the prices' currency.", budgetLabels, nil)
	budgetRemaining = prometheus.NewDesc("weir_budget_remaining", "What is left of a budget in its window: its amount less what is spent and reserved, in units of the prices' currency; below 0 when a soft or shadow budget, or one request's real cost beyond its estimate, passed it.", budgetLabels, nil)
)

// spendState is what the spend metrics keep besides their collectors.
type spendState struct {
	mu      sync.Mutex // serializes SetSpendByKey
	spend   atomic.Pointer[spendVec]
	budgets atomic.Pointer[func(context.Context) []BudgetGauge]
	alerts  *prometheus.CounterVec
}

// spendCollectors makes the collectors of spend and budgets.
func (m *Metrics) spendCollectors() []prometheus.Collector {
	s := newSpendVec(false)
	m.spendState.spend.Store(s)
	m.spendState.alerts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_budget_alerts_total",
		Help: "Budget alert thresholds crossed, by the budget's mode and whether this replica sent the event (sent=\"true\") or found it sent by another (\"false\").",
	}, []string{"mode", "sent"})
	for _, mode := range []weir.BudgetMode{weir.BudgetHard, weir.BudgetSoft, weir.BudgetShadow} {
		for _, sent := range []string{"true", "false"} {
			m.spendState.alerts.WithLabelValues(string(mode), sent)
		}
	}
	return []prometheus.Collector{spendCollector{m}, m.spendState.alerts, budgetCollector{m}}
}

// SetSpendByKey adds a key label (the key's id) to weir_spend_total and
// lets the weir_budget_* gauges show keys' budgets (config
// server.metrics_spend_by_key). Set it before the first Spent: the
// counts so far start again from zero when it changes. Default off.
func (m *Metrics) SetSpendByKey(on bool) {
	st := &m.spendState
	st.mu.Lock()
	defer st.mu.Unlock()
	old := st.spend.Load()
	if old.byKey == on {
		return
	}
	st.spend.Store(newSpendVec(on))
}

// spendCollector collects weir_spend_total, with or without its key
// label. It is unchecked (it describes nothing): a registry holds one
// label set per name for its life, and SetSpendByKey changes it.
type spendCollector struct{ m *Metrics }

func (spendCollector) Describe(chan<- *prometheus.Desc) {}

func (c spendCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.spendState.spend.Load().vec.Collect(ch)
}

// Spent counts what one request cost: keyID's (labelled only with
// SetSpendByKey), counted against group, for the public model, on the
// platform model that served it. A cost below 0 counts as 0.
func (m *Metrics) Spent(keyID, group, model, platformModel string, cost weir.Money) {
	s := m.spendState.spend.Load()
	if !s.byKey {
		keyID = ""
	}
	s.children.get([4]string{keyID, group, model, platformModel}).Add(units(max(cost, 0)))
}

// BudgetAlert counts a budget's alert threshold crossed, by the
// budget's mode, and whether this replica claimed it (and so sent its
// event) or another replica had.
func (m *Metrics) BudgetAlert(mode string, claimed bool) {
	m.spendState.alerts.WithLabelValues(mode, strconv.FormatBool(claimed)).Inc()
}

// SetBudgets sets what the weir_budget_* gauges read at each scrape:
// every budget in force and its window's state. Until it is set, or
// with nil, there are none. Keys' budgets are left out unless
// SetSpendByKey is on: one series per key does not scale.
func (m *Metrics) SetBudgets(budgets func(context.Context) []BudgetGauge) {
	if budgets == nil {
		m.spendState.budgets.Store(nil)
		return
	}
	m.spendState.budgets.Store(&budgets)
}

// units is m in units of the currency.
func units(m weir.Money) float64 { return float64(m) / float64(weir.MoneyScale) }

// budgetCollector reads the budgets at scrape time.
type budgetCollector struct{ m *Metrics }

func (c budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- budgetAmount
	ch <- budgetSpent
	ch <- budgetReserved
	ch <- budgetRemaining
}

func (c budgetCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.m.spendState.budgets.Load()
	if f == nil {
		return
	}
	byKey := c.m.spendState.spend.Load().byKey
	ctx, cancel := context.WithTimeout(context.Background(), scrapeBound)
	defer cancel()
	seen := make(map[string]bool)
	for _, g := range (*f)(ctx) {
		if (g.SubjectType == "key" && !byKey) || seen[g.ID] {
			continue
		}
		seen[g.ID] = true
		labels := []string{g.ID, g.SubjectType, g.Subject, g.Mode}
		left := units(max(g.Amount, 0) - max(g.Spent, 0).Add(max(g.Reserved, 0)))
		ch <- prometheus.MustNewConstMetric(budgetAmount, prometheus.GaugeValue, units(g.Amount), labels...)
		ch <- prometheus.MustNewConstMetric(budgetSpent, prometheus.GaugeValue, units(g.Spent), labels...)
		ch <- prometheus.MustNewConstMetric(budgetReserved, prometheus.GaugeValue, units(g.Reserved), labels...)
		ch <- prometheus.MustNewConstMetric(budgetRemaining, prometheus.GaugeValue, left, labels...)
	}
}
