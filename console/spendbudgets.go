package console

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
)

// budgetSpan is a subject type and a budget window's bounds now: the
// budgets that share one are summed by one spend report.
type budgetSpan struct {
	typ         string
	from, until time.Time
}

// keyGroupBudgets are the budgets in force of keys and groups, the
// subjects the spend view lists.
func (c *Console) keyGroupBudgets(ctx context.Context) ([]weir.Budget, error) {
	if c.deps.Budgets == nil {
		return nil, nil
	}
	all, err := c.deps.Budgets.Budgets(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(b weir.Budget) bool { return b.Subject.Type != "key" && b.Subject.Type != "group" }), nil
}

// attachBudgets gives each of page's rows its budgets, of budgets, with
// what each one's window has spent by now.
func (c *Console) attachBudgets(ctx context.Context, page *SpendPage, reports map[string][]weir.SpendRow, budgets []weir.Budget, now time.Time) error {
	tables := map[string][]SpendRow{"key": page.Keys, "group": page.Groups}
	listed := make(map[weir.BudgetSubject]bool, len(page.Keys)+len(page.Groups))
	for typ, rows := range tables {
		for _, r := range rows {
			listed[weir.BudgetSubject{Type: typ, Name: r.ID}] = true
		}
	}
	var shown []weir.Budget
	for _, b := range budgets {
		if listed[b.Subject] {
			shown = append(shown, b)
		}
	}
	uses, err := c.budgetUses(ctx, page.From, page.Until, reports, shown, now)
	if err != nil {
		return err
	}
	for typ, rows := range tables {
		for i := range rows {
			if us := uses[typ][rows[i].ID]; us != nil {
				rows[i].Budgets = us
			}
		}
	}
	return nil
}

// budgetUses are budgets (of keys and groups), by subject type and name,
// each with what its window has spent by now. Budgets whose window is
// the page's (from, until) read the page's reports; each other window is
// one sum of the store if one budget has it, else one report, whatever
// the number of budgets in it.
func (c *Console) budgetUses(ctx context.Context, from, until time.Time, reports map[string][]weir.SpendRow, budgets []weir.Budget, now time.Time) (map[string]map[string][]BudgetUse, error) {
	var err error
	spans := make(map[budgetSpan][]weir.Budget)
	for _, b := range budgets {
		f, u := b.Window.Bounds(now)
		sp := budgetSpan{typ: b.Subject.Type, from: f.UTC(), until: u.UTC()}
		spans[sp] = append(spans[sp], b)
	}
	out := map[string]map[string][]BudgetUse{"key": {}, "group": {}}
	for sp, bs := range spans {
		var rows []weir.SpendRow
		switch {
		case sp.from.Equal(from) && sp.until.Equal(until):
			rows = reports[sp.typ]
		case len(bs) == 1:
			// One subject's spend, which the store sums by its index
			// (a key's rolling window, anchored at its creation, is
			// often the only one of its span).
			rows, err = c.spendSum(ctx, bs[0].Subject, sp)
		default:
			rows, err = c.deps.Spend.SpendReport(ctx, weir.SpendReportFilter{By: sp.typ, From: sp.from, Until: sp.until})
		}
		if err != nil {
			return nil, err
		}
		spent := make(map[string]weir.Money, len(rows))
		for _, r := range rows {
			spent[r.Subject] = spent[r.Subject].Add(r.Cost)
		}
		for _, b := range bs {
			out[sp.typ][b.Subject.Name] = append(out[sp.typ][b.Subject.Name], budgetUse(b, sp, spent[b.Subject.Name]))
		}
	}
	for _, bySubject := range out {
		for _, us := range bySubject {
			slices.SortFunc(us, func(a, b BudgetUse) int {
				return cmp.Or(cmp.Compare(a.WindowEnd.Sub(a.WindowStart), b.WindowEnd.Sub(b.WindowStart)), cmp.Compare(a.ID, b.ID))
			})
		}
	}
	return out, nil
}

// spendSum is sub's spend in sp, as the one row of a report.
func (c *Console) spendSum(ctx context.Context, sub weir.BudgetSubject, sp budgetSpan) ([]weir.SpendRow, error) {
	m, err := c.deps.Spend.SpendSum(ctx, weir.SpendFilter{Subject: sub, From: sp.from, Until: sp.until})
	if err != nil {
		return nil, err
	}
	return []weir.SpendRow{{Subject: sub.Name, Cost: m}}, nil
}

// budgetUse is b, in its window sp, having spent spent.
func budgetUse(b weir.Budget, sp budgetSpan, spent weir.Money) BudgetUse {
	u := BudgetUse{ID: b.ID, Amount: b.Amount, Mode: string(b.Mode), Window: b.Window.String(), Zone: b.Window.Zone,
		WindowStart: sp.from, WindowEnd: sp.until, Spent: spent, Level: "ok"}
	if b.Amount > 0 {
		u.UsedPct = float64(spent) / float64(b.Amount) * 100
	}
	if len(b.Alerts) > 0 {
		u.Alert = b.Alerts[0]
	}
	switch {
	case spent >= b.Amount:
		u.Level = "over"
	case u.Alert > 0 && spent >= b.Amount.MulDiv(int64(u.Alert), 100):
		u.Level = "warn"
	}
	return u
}

// spendChart is the spend of [from, until) by bucket (an hour's for a
// window of a day, else a day's), up to the bucket of now: of sub, or of
// everyone if sub is zero (summed over the groups, under which every
// request counts).
func (c *Console) spendChart(ctx context.Context, from, until, now time.Time, sub weir.BudgetSubject) (SpendChart, error) {
	ch := SpendChart{Bucket: "day", Points: []SpendPoint{}}
	if until.Sub(from) <= 25*time.Hour {
		ch.Bucket = "hour"
	}
	by := cmp.Or(sub.Type, "group")
	if sub.Type != "" {
		ch.Subject = sub.String()
	}
	rows, err := c.spendReport(ctx, weir.SpendReportFilter{By: by, From: from, Until: until, Bucket: ch.Bucket})
	if err != nil {
		return ch, err
	}
	byBucket := make(map[int64]weir.Money)
	for _, r := range rows {
		if sub.Type == "" || r.Subject == sub.Name {
			t := r.Bucket.Unix()
			byBucket[t] = byBucket[t].Add(r.Cost)
		}
	}
	for t := from.UTC(); t.Before(until) && !t.After(now); t = nextBucket(t, ch.Bucket) {
		ch.Points = append(ch.Points, SpendPoint{T: t, Cost: byBucket[t.Unix()]})
	}
	return ch, nil
}

// nextBucket is when the bucket after the one starting at t starts.
func nextBucket(t time.Time, bucket string) time.Time {
	if bucket == "hour" {
		return t.Add(time.Hour)
	}
	return t.AddDate(0, 0, 1)
}
