package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gateway"
)

// The spend view: what each key and group spent in the current UTC day,
// week or month, each against its budgets, and spend over that window in
// buckets of an hour (a day's) or a day (a week's, a month's), in total
// or for one key or group. Amounts are decimal strings (weir.Money).

// SpendPage is the answer of GET /console/api/spend.
type SpendPage struct {
	// Window is the calendar unit shown (day, week or month), From and
	// Until its bounds in UTC.
	Window string     `json:"window"`
	From   time.Time  `json:"from"`
	Until  time.Time  `json:"until"`
	Total  weir.Money `json:"total"`
	Keys   []SpendRow `json:"keys"`
	Groups []SpendRow `json:"groups"`
	// HiddenKeys counts the keys left out past maxSpendKeys, those that
	// spent least.
	HiddenKeys int        `json:"hidden_keys,omitempty"`
	Chart      SpendChart `json:"chart"`
	// BudgetsError says why no budget is shown, when they could not be
	// read.
	BudgetsError string `json:"budgets_error,omitempty"`
}

// SpendRow is one key's or group's spend in the window, and its
// budgets.
type SpendRow struct {
	// Subject is "key:ID" or "group:NAME"; ID the key's id or the
	// group's name, Name a key's name.
	Subject   string      `json:"subject"`
	ID        string      `json:"id"`
	Name      string      `json:"name,omitempty"`
	Spent     weir.Money  `json:"spent"`
	Requests  int64       `json:"requests"`
	Tokens    int64       `json:"tokens"`
	Estimated int64       `json:"estimated"`
	Budgets   []BudgetUse `json:"budgets"`
}

// BudgetUse is a budget and what its own window has spent so far, which
// is not the page's window when the budget's is another (a month's
// budget on the day's page, a rolling 7d, a zone other than UTC).
type BudgetUse struct {
	ID          string     `json:"id"`
	Amount      weir.Money `json:"amount"`
	Mode        string     `json:"mode"`
	Window      string     `json:"window"`
	Zone        string     `json:"zone,omitempty"`
	WindowStart time.Time  `json:"window_start"`
	WindowEnd   time.Time  `json:"window_end"`
	Spent       weir.Money `json:"spent"`
	// UsedPct is Spent as a percentage of Amount, for the bar.
	UsedPct float64 `json:"used_pct"`
	// Alert is the first alert threshold, in percent; 0: none.
	Alert int `json:"alert,omitempty"`
	// Level is "over" once Spent reaches Amount, "warn" once it reaches
	// the first alert threshold, else "ok".
	Level string `json:"level"`
}

// SpendChart is spend over the window, by bucket, up to the bucket of
// now: the total, or Subject's.
type SpendChart struct {
	Subject string       `json:"subject,omitempty"`
	Bucket  string       `json:"bucket"`
	Points  []SpendPoint `json:"points"`
}

// SpendPoint is the spend of the bucket that starts at T.
type SpendPoint struct {
	T    time.Time  `json:"t"`
	Cost weir.Money `json:"cost"`
}

// maxSpendKeys is how many keys the page lists, those that spent most
// first.
const maxSpendKeys = 500

// spendWindows are the windows the page shows.
var spendWindows = []string{weir.WindowDay, weir.WindowWeek, weir.WindowMonth}

// spend answers GET /console/api/spend?window=day|week|month (month by
// default) &subject=key:ID|group:NAME (the chart's; none: the total).
func (c *Console) spend(w http.ResponseWriter, r *http.Request) error {
	if c.deps.Spend == nil {
		return &gateway.Error{Category: gateway.ErrNotFound, Message: "this gateway keeps no spend (no store)"}
	}
	q := r.URL.Query()
	window := cmp.Or(q.Get("window"), weir.WindowMonth)
	if !slices.Contains(spendWindows, window) {
		return &gateway.Error{Category: gateway.ErrInvalid, Param: "window", Message: fmt.Sprintf("window must be day, week or month, not %q", window)}
	}
	var chartOf weir.BudgetSubject
	if s := q.Get("subject"); s != "" {
		sub, err := weir.ParseBudgetSubject(s)
		if err != nil || (sub.Type != "key" && sub.Type != "group") {
			return &gateway.Error{Category: gateway.ErrInvalid, Param: "subject", Message: fmt.Sprintf("subject %q: want key:ID or group:NAME", s)}
		}
		chartOf = sub
	}
	now := c.deps.Clock.Now()
	page := SpendPage{Window: window}
	page.From, page.Until = weir.Window{Unit: window}.Bounds(now)
	reports := make(map[string][]weir.SpendRow, 2)
	for _, by := range []string{"key", "group"} {
		rows, err := c.spendReport(r.Context(), weir.SpendReportFilter{By: by, From: page.From, Until: page.Until})
		if err != nil {
			return err
		}
		reports[by] = rows
	}
	budgets, err := c.keyGroupBudgets(r.Context())
	page.Keys, page.HiddenKeys = topKeys(spendRows("key", reports["key"], budgets))
	page.Groups = spendRows("group", reports["group"], budgets)
	for _, row := range page.Groups {
		page.Total = page.Total.Add(row.Spent)
	}
	if err == nil {
		// Only the budgets of the rows listed are read.
		err = c.attachBudgets(r.Context(), &page, reports, budgets, now)
	}
	if err != nil {
		c.deps.Logger.Warn("console: could not read the budgets for the spend view", "error", err)
		page.BudgetsError = "the budgets could not be read; the gateway's log says why"
	}
	c.nameKeys(r.Context(), page.Keys)
	if page.Chart, err = c.spendChart(r.Context(), page.From, page.Until, now, chartOf); err != nil {
		return err
	}
	return writeJSON(w, page)
}

// spendReport is the store's report, or a store_unavailable saying it
// could not be read.
func (c *Console) spendReport(ctx context.Context, f weir.SpendReportFilter) ([]weir.SpendRow, error) {
	rows, err := c.deps.Spend.SpendReport(ctx, f)
	if err != nil {
		c.deps.Logger.Warn("console: spend report failed", "by", f.By, "error", err)
		return nil, &gateway.Error{Category: gateway.ErrUnavailable, Message: "could not read spend from the store", Err: err}
	}
	return rows, nil
}

// spendRows are the page's rows of one subject type: each subject with
// spend in the window (reported, summed over buckets), and each with one
// of budgets though it spent nothing; by spend, most first, then by id.
// Their budgets are for attachBudgets to fill in.
func spendRows(typ string, reported []weir.SpendRow, budgets []weir.Budget) []SpendRow {
	byID := make(map[string]*SpendRow)
	row := func(id string) *SpendRow {
		if r, ok := byID[id]; ok {
			return r
		}
		r := &SpendRow{Subject: typ + ":" + id, ID: id, Budgets: []BudgetUse{}}
		byID[id] = r
		return r
	}
	for _, sr := range reported {
		r := row(sr.Subject)
		r.Spent = r.Spent.Add(sr.Cost)
		r.Requests += sr.Requests
		r.Tokens += sr.Tokens
		r.Estimated += sr.Estimated
	}
	for _, b := range budgets {
		if b.Subject.Type == typ {
			row(b.Subject.Name)
		}
	}
	out := make([]SpendRow, 0, len(byID))
	for _, r := range byID {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b SpendRow) int {
		return cmp.Or(cmp.Compare(b.Spent, a.Spent), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// topKeys are the first maxSpendKeys of rows, and how many are left
// out.
func topKeys(rows []SpendRow) ([]SpendRow, int) {
	if len(rows) <= maxSpendKeys {
		return rows, 0
	}
	return rows[:maxSpendKeys], len(rows) - maxSpendKeys
}

// nameKeys gives each key row its key's name.
func (c *Console) nameKeys(ctx context.Context, rows []SpendRow) {
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	names := c.names.of(ctx, ids)
	for i := range rows {
		rows[i].Name = names[rows[i].ID]
	}
}
