package console

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// spendRecord is one priced request, as the fake spend store keeps it.
type spendRecord struct {
	key, group string
	at         time.Time
	cost       weir.Money
	tokens     int64
}

// fakeSpend sums its records as a store's SpendReport does: in [From,
// Until), by key or group, by UTC hour or day if asked.
type fakeSpend struct {
	mu      sync.Mutex
	recs    []spendRecord
	err     error
	filters []weir.SpendReportFilter
	sums    []weir.SpendFilter
}

func (f *fakeSpend) SpendReport(_ context.Context, flt weir.SpendReportFilter) ([]weir.SpendRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filters = append(f.filters, flt)
	if f.err != nil {
		return nil, f.err
	}
	if err := flt.Validate(); err != nil {
		return nil, err
	}
	type k struct {
		subject string
		bucket  int64
	}
	sums := map[k]*weir.SpendRow{}
	var order []k
	for _, r := range f.recs {
		if r.at.Before(flt.From) || !r.at.Before(flt.Until) {
			continue
		}
		sub := r.key
		if flt.By == "group" {
			sub = r.group
		}
		b := flt.From
		switch flt.Bucket {
		case "hour":
			b = r.at.UTC().Truncate(time.Hour)
		case "day":
			y, m, d := r.at.UTC().Date()
			b = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		}
		kk := k{sub, b.Unix()}
		if sums[kk] == nil {
			sums[kk] = &weir.SpendRow{Subject: sub, Bucket: b}
			order = append(order, kk)
		}
		s := sums[kk]
		s.Requests++
		s.Tokens += r.tokens
		s.Cost = s.Cost.Add(r.cost)
	}
	out := make([]weir.SpendRow, 0, len(order))
	for _, kk := range order {
		out = append(out, *sums[kk])
	}
	return out, nil
}

// SpendSum sums f.Subject's records in [f.From, f.Until).
func (f *fakeSpend) SpendSum(_ context.Context, flt weir.SpendFilter) (weir.Money, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sums = append(f.sums, flt)
	if f.err != nil {
		return 0, f.err
	}
	var m weir.Money
	for _, r := range f.recs {
		sub := r.key
		if flt.Subject.Type == "group" {
			sub = r.group
		}
		if sub == flt.Subject.Name && !r.at.Before(flt.From) && r.at.Before(flt.Until) {
			m = m.Add(r.cost)
		}
	}
	return m, nil
}

// fakeBudgets lists its budgets, or fails with err.
type fakeBudgets struct {
	list []weir.Budget
	err  error
}

func (f *fakeBudgets) Budgets(context.Context) ([]weir.Budget, error) { return f.list, f.err }

func money(t *testing.T, s string) weir.Money {
	t.Helper()
	m, err := weir.ParseMoney(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// spendFixture is a console over fake spend and budgets: key A (named
// alpha, group default) spent 1.50 and 0.25 today at 10:00 and 11:00,
// 2.00 yesterday and 5.00 on the 2nd; key B (group team) a billionth
// today. Budgets: the default group 2/day with alerts at 80 and 100 and
// 20/month, key A 1/week, team 10/month, and a model's, which the view
// leaves out. The fake clock is at Tuesday 2023-11-14 22:13:20 UTC.
func spendFixture(t *testing.T) (*testBundle, *fakeSpend, *fakeBudgets, string) {
	t.Helper()
	sp, bg := &fakeSpend{}, &fakeBudgets{}
	b := setupDeps(t, Config{AdminToken: adminToken}, weir.Catalog{}, func(d *Deps) { d.Spend, d.Budgets = sp, bg })
	keyA := "key_alpha"
	if err := b.store.KeyCreate(t.Context(), weir.APIKey{ID: keyA, Name: "alpha", Prefix: "wk-alpha", Hash: strings.Repeat("a", 64), Group: "default", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	day := time.Date(2023, 11, 14, 0, 0, 0, 0, time.UTC)
	sp.recs = []spendRecord{
		{keyA, "default", day.Add(10 * time.Hour), money(t, "1.50"), 100},
		{keyA, "default", day.Add(11*time.Hour + 30*time.Minute), money(t, "0.25"), 20},
		{keyA, "default", day.Add(-5 * time.Hour), money(t, "2"), 10},
		{keyA, "default", day.AddDate(0, 0, -12), money(t, "5"), 10},
		{"key_b", "team", day.Add(22 * time.Hour), 1, 1},
	}
	now := b.clock.Now()
	bud := func(sub, spec string, mode weir.BudgetMode, alerts ...int) weir.Budget {
		s, err := weir.ParseBudgetSubject(sub)
		if err != nil {
			t.Fatal(err)
		}
		amount, w, err := weir.ParseBudgetSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		return weir.Budget{ID: weir.ConfigBudgetID(s, w), Subject: s, Amount: amount, Window: w, Mode: mode, Alerts: alerts, CreatedAt: now, UpdatedAt: now}
	}
	bg.list = []weir.Budget{
		bud("group:default", "2/day", weir.BudgetSoft, 80, 100),
		bud("key:"+keyA, "1/week", weir.BudgetHard),
		bud("group:team", "10/month", weir.BudgetHard, 50),
		bud("group:default", "20/month", weir.BudgetSoft),
		bud("model:m", "3/day", weir.BudgetHard),
	}
	return b, sp, bg, keyA
}

// TestSpendView: the view sums each key's and group's spend in the day,
// week or month, shows each against its budgets (spent in the budget's
// own window, its level past the first alert and past its amount),
// charts spend by hour or day in total or for one subject, and writes
// money as decimal strings.
func TestSpendView(t *testing.T) {
	t.Parallel()
	b, sp, _, keyA := spendFixture(t)

	var day SpendPage
	if code := b.admin(t, "GET", "/console/api/spend?window=day", "", &day); code != 200 {
		t.Fatalf("day: %d", code)
	}
	if day.Total != money(t, "1.750000001") || day.From != time.Date(2023, 11, 14, 0, 0, 0, 0, time.UTC) || len(day.Keys) != 2 || len(day.Groups) != 2 {
		t.Fatalf("day: %+v", day)
	}
	a := day.Keys[0]
	if a.ID != keyA || a.Name != "alpha" || a.Spent != money(t, "1.75") || a.Requests != 2 || a.Tokens != 120 || len(a.Budgets) != 1 {
		t.Errorf("key A today: %+v", a)
	}
	if u := a.Budgets[0]; u.Window != "week" || u.Spent != money(t, "3.75") || u.Level != "over" || u.UsedPct != 375 || u.Mode != "hard" {
		t.Errorf("key A's week budget: %+v", u)
	}
	def := day.Groups[0]
	if def.ID != "default" || def.Spent != money(t, "1.75") || len(def.Budgets) != 2 {
		t.Fatalf("group default today: %+v", def)
	}
	if u := def.Budgets[0]; u.Spent != money(t, "1.75") || u.Level != "warn" || u.Alert != 80 || u.UsedPct != 87.5 || u.Amount != money(t, "2") {
		t.Errorf("group default's day budget: %+v", u)
	}
	if u := def.Budgets[1]; u.Window != "month" || u.Spent != money(t, "8.75") || u.Level != "ok" {
		t.Errorf("group default's month budget: %+v", u)
	}
	if u := day.Groups[1].Budgets; len(u) != 1 || u[0].Spent != 1 || u[0].Level != "ok" || u[0].WindowStart != time.Date(2023, 11, 1, 0, 0, 0, 0, time.UTC) {
		t.Errorf("group team's month budget: %+v", u)
	}
	// The chart: 23 hours so far, the total at 10:00 and 11:00.
	if ch := day.Chart; ch.Bucket != "hour" || len(ch.Points) != 23 || ch.Points[10].Cost != money(t, "1.50") || ch.Points[11].Cost != money(t, "0.25") || ch.Points[22].Cost != 1 {
		t.Errorf("day chart: %+v", ch)
	}

	var month SpendPage
	if code := b.admin(t, "GET", "/console/api/spend?window=month&subject=key:"+keyA, "", &month); code != 200 {
		t.Fatalf("month: %d", code)
	}
	if month.Total != money(t, "8.750000001") || month.Keys[0].Spent != money(t, "8.75") {
		t.Errorf("month: total %s, key A %s", month.Total, month.Keys[0].Spent)
	}
	if ch := month.Chart; ch.Bucket != "day" || ch.Subject != "key:"+keyA || len(ch.Points) != 14 || ch.Points[1].Cost != money(t, "5") ||
		ch.Points[12].Cost != money(t, "2") || ch.Points[13].Cost != money(t, "1.75") {
		t.Errorf("month chart of key A: %+v", ch)
	}
	// Key A's week budget reads the week's page's report; the day's
	// budget, alone in its window, one sum; the month's two, one report.
	sp.mu.Lock()
	sp.filters, sp.sums = nil, nil
	sp.mu.Unlock()
	var week SpendPage
	if code := b.admin(t, "GET", "/console/api/spend?window=week&subject=group:team", "", &week); code != 200 || len(week.Chart.Points) != 2 {
		t.Fatalf("week: %d %+v", code, week.Chart)
	}
	if n, m := len(sp.filters), len(sp.sums); n != 4 || m != 1 {
		t.Errorf("the week's page read %d reports and %d sums; want 4 (key, group, chart, the month's budgets) and 1 (the day's budget)", n, m)
	}

	// Money is a decimal string in the JSON.
	w := b.do("GET", "/console/api/spend?window=day", "10.0.0.1:1", "", map[string]string{"Authorization": "Bearer " + adminToken})
	for _, want := range []string{`"total":"1.750000001"`, `"spent":"3.75"`, `"amount":"2.00"`, `"cost":"1.50"`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("the JSON has no %s: %s", want, w.Body)
		}
	}
}

// TestSpendViewRefuses: the view asks for the login, refuses a window
// or subject it does not know, says so when the store cannot be read,
// and shows spend without budgets when the budgets cannot be read.
func TestSpendViewRefuses(t *testing.T) {
	t.Parallel()
	b, sp, bg, _ := spendFixture(t)
	if w := b.do("GET", "/console/api/spend", "10.0.0.1:1", "", nil); w.Code != 401 {
		t.Errorf("without logging in: %d", w.Code)
	}
	var e apiErr
	for _, c := range []struct{ query, param string }{
		{"window=year", "window"},
		{"subject=model:m", "subject"},
		{"subject=nonsense", "subject"},
	} {
		if code := b.admin(t, "GET", "/console/api/spend?"+c.query, "", &e); code != 400 || e.Error.Param != c.param {
			t.Errorf("%s: %d %+v", c.query, code, e)
		}
	}
	bg.err = errors.New("store down")
	var page SpendPage
	if code := b.admin(t, "GET", "/console/api/spend?window=day", "", &page); code != 200 || page.BudgetsError == "" || len(page.Groups) != 2 || len(page.Groups[0].Budgets) != 0 {
		t.Errorf("budgets unreadable: %d %+v", code, page)
	}
	sp.err = errors.New("store down")
	if code := b.admin(t, "GET", "/console/api/spend", "", &e); code != 503 || e.Error.Code != string(weir.CodeStoreUnavailable) || strings.Contains(e.Error.Message, "store down") {
		t.Errorf("spend unreadable: %d %+v", code, e)
	}

	none := setup(t, Config{AdminToken: adminToken})
	if code := none.admin(t, "GET", "/console/api/spend", "", &e); code != 404 {
		t.Errorf("no spend kept: %d %+v", code, e)
	}
	// The page has the view in its navigation.
	w := none.do("GET", "/", "10.0.0.1:1", "", map[string]string{"Authorization": "Bearer " + adminToken})
	if !strings.Contains(w.Body.String(), `href="#/spend"`) {
		t.Errorf("the page has no link to the spend view")
	}
}

// TestBudgetLevel: a budget is "warn" from its first alert threshold
// and "over" from its amount.
func TestBudgetLevel(t *testing.T) {
	t.Parallel()
	b := weir.Budget{Amount: 1000, Alerts: []int{80, 100}}
	for _, c := range []struct {
		spent weir.Money
		want  string
	}{{0, "ok"}, {799, "ok"}, {800, "warn"}, {999, "warn"}, {1000, "over"}, {5000, "over"}} {
		if got := budgetUse(b, budgetSpan{}, c.spent).Level; got != c.want {
			t.Errorf("spent %d of 1000: %s; want %s", c.spent, got, c.want)
		}
	}
	if got := budgetUse(weir.Budget{Amount: 1000}, budgetSpan{}, 999).Level; got != "ok" {
		t.Errorf("no alerts, 999 of 1000: %s", got)
	}
}

// TestSpendViewReadsOnlyListedBudgets: past maxSpendKeys keys, the page
// lists those that spent most and reads the budgets of those alone.
func TestSpendViewReadsOnlyListedBudgets(t *testing.T) {
	t.Parallel()
	b, sp, bg, _ := spendFixture(t)
	now := b.clock.Now()
	bg.list = nil
	for i := range maxSpendKeys + 2 {
		// Each key's rolling day from its own anchor: a window of its own.
		w := weir.Window{Every: 24 * time.Hour, Anchor: now.Add(-time.Duration(i+1) * time.Minute)}
		bg.list = append(bg.list, weir.Budget{ID: fmt.Sprintf("bgt_%04d", i), Subject: weir.BudgetSubject{Type: "key", Name: fmt.Sprintf("key_%04d", i)},
			Amount: weir.MoneyScale, Window: w, Mode: weir.BudgetHard, CreatedAt: now, UpdatedAt: now})
	}
	var page SpendPage
	if code := b.admin(t, "GET", "/console/api/spend?window=day", "", &page); code != 200 {
		t.Fatalf("%d", code)
	}
	// key_alpha and key_b spent; of the others, those first by id.
	if len(page.Keys) != maxSpendKeys || page.HiddenKeys != 4 || page.Keys[2].ID != "key_0000" || len(page.Keys[2].Budgets) != 1 {
		t.Fatalf("%d keys listed, %d hidden, third %+v", len(page.Keys), page.HiddenKeys, page.Keys[2])
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if n := len(sp.sums); n != maxSpendKeys-2 {
		t.Errorf("%d budgets' spend read; want %d, the listed keys'", n, maxSpendKeys-2)
	}
}
