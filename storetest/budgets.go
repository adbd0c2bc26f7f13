package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// budgetStore is what ExerciseBudgets runs against.
type budgetStore = interface {
	weir.BudgetStore
	io.Closer
}

// ExerciseBudgets runs the BudgetStore contract as numbered subtests, in
// parallel, each on a new, empty store from newStore, which it closes
// when the subtest ends. The contract, beyond the comments on
// weir.BudgetStore, is in the package documentation.
func ExerciseBudgets(t *testing.T, newStore func(t *testing.T) interface {
	weir.BudgetStore
	io.Closer
}) {
	t.Helper()
	runSubtests(t, newStore, []subtest[budgetStore]{
		{"01_BudgetCreateThenGetAndList", testBudgetCreateGet},
		{"02_BudgetDefaults", testBudgetDefaults},
		{"03_BudgetOnePerSubjectAndWindowLength", testBudgetConflict},
		{"04_BudgetInvalidIsRejected", testBudgetInvalid},
		{"05_BudgetUpdate", testBudgetUpdate},
		{"06_BudgetUpdateCompareAndSet", testBudgetUpdateCAS},
		{"07_BudgetDelete", testBudgetDelete},
		{"08_BudgetAlertClaimOnce", testBudgetAlertClaim},
		{"09_BudgetAlertClaimConcurrent", testBudgetAlertClaimConcurrent},
		{"10_BudgetCancelledContext", testBudgetCancelled},
		{"11_BudgetOfEndUsers", testBudgetOfEndUsers},
	})
}

// newBudget is a soft monthly budget in Berlin for subject typ:name.
func newBudget(id, typ, name string, at time.Time) weir.Budget {
	return weir.Budget{
		ID: id, Subject: weir.BudgetSubject{Type: typ, Name: name}, Amount: 50 * weir.MoneyScale,
		Window: weir.Window{Unit: weir.WindowMonth, Zone: "Europe/Berlin"}, Mode: weir.BudgetSoft,
		Alerts: []int{80, 100}, CreatedAt: at, UpdatedAt: at,
	}
}

// storedBudget is what a store gives back for b: its defaults and its
// times as stored.
func storedBudget(b weir.Budget) weir.Budget {
	b = b.WithDefaults()
	b.CreatedAt, b.UpdatedAt, b.Window.Anchor = stored(b.CreatedAt), stored(b.UpdatedAt), stored(b.Window.Anchor)
	if len(b.Alerts) == 0 {
		b.Alerts = nil
	}
	return b
}

func mustCreateBudgets(t *testing.T, s weir.BudgetStore, bs ...weir.Budget) {
	t.Helper()
	for _, b := range bs {
		if err := s.BudgetCreate(t.Context(), b); err != nil {
			t.Fatalf("BudgetCreate(%s): %v", b.ID, err)
		}
	}
}

func listBudgets(t *testing.T, s weir.BudgetStore, f weir.BudgetFilter) []weir.Budget {
	t.Helper()
	got, err := s.BudgetList(t.Context(), f)
	if err != nil {
		t.Fatalf("BudgetList(%+v): %v", f, err)
	}
	return got
}

// checkBudgets compares what a store gave back with the budgets written,
// in order.
func checkBudgets(t *testing.T, what string, got []weir.Budget, want ...weir.Budget) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d budgets %+v; want %d %+v", what, len(got), got, len(want), want)
	}
	for i, w := range want {
		if w = storedBudget(w); !reflect.DeepEqual(got[i], w) {
			t.Errorf("%s [%d]:\n got %+v\nwant %+v", what, i, got[i], w)
		}
	}
}

func testBudgetCreateGet(t *testing.T, s budgetStore) {
	checkBudgets(t, "an empty store", listBudgets(t, s, weir.BudgetFilter{}))
	rolling := newBudget("bgt_2", "key", "key_a", base)
	rolling.Window = weir.Window{Every: 30 * 24 * time.Hour, Anchor: base.Add(-time.Hour)}
	rolling.Mode, rolling.Alerts = weir.BudgetHard, nil
	day := newBudget("bgt_3", "key", "key_a", base)
	day.Window = weir.Window{Unit: weir.WindowDay}
	bs := []weir.Budget{
		newBudget("bgt_1", "group", "default", base),
		rolling,
		day,
		newBudget("bgt_4", "platform_model", "up/a-b", base),
		newBudget("bgt_0", "platform_model", "up/ab", base),
		newBudget("bgt_5", "key", "key_A", base),
	}
	mustCreateBudgets(t, s, bs...)
	got, err := s.BudgetGet(t.Context(), "bgt_2")
	if err != nil {
		t.Fatalf("BudgetGet: %v", err)
	}
	checkBudgets(t, "BudgetGet", []weir.Budget{got}, rolling)
	// By subject type, name in byte order ('A' before 'a', '-' before
	// 'b'), then ID.
	checkBudgets(t, "BudgetList", listBudgets(t, s, weir.BudgetFilter{}), bs[0], bs[5], bs[1], bs[2], bs[3], bs[4])
	checkBudgets(t, "BudgetList of key_a", listBudgets(t, s, weir.BudgetFilter{Subject: weir.BudgetSubject{Type: "key", Name: "key_a"}}), bs[1], bs[2])
	checkBudgets(t, "BudgetList of a subject without one", listBudgets(t, s, weir.BudgetFilter{Subject: weir.BudgetSubject{Type: "model", Name: "key_a"}}))
	if _, err := s.BudgetGet(t.Context(), "bgt_none"); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("BudgetGet of an unknown ID: %v; want ErrNotFound", err)
	}
}

func testBudgetDefaults(t *testing.T, s budgetStore) {
	b := newBudget("bgt_1", "key", "key_a", base)
	b.Mode, b.Window = "", weir.Window{Every: 12 * time.Hour}
	mustCreateBudgets(t, s, b)
	got, err := s.BudgetGet(t.Context(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != weir.BudgetHard || !got.Window.Anchor.Equal(stored(base)) {
		t.Errorf("a budget stored without mode or anchor: mode %q, anchor %s; want hard, its creation %s", got.Mode, got.Window.Anchor, stored(base))
	}
}

func testBudgetConflict(t *testing.T, s budgetStore) {
	month := newBudget("bgt_1", "key", "key_a", base)
	mustCreateBudgets(t, s, month)
	for _, tc := range []struct {
		name string
		b    weir.Budget
	}{
		{"a taken ID", newBudget("bgt_1", "group", "gold", base)},
		{"a second month's", newBudget("bgt_2", "key", "key_a", base)},
		{"a second month's in another zone", func() weir.Budget {
			b := newBudget("bgt_3", "key", "key_a", base)
			b.Window.Zone = "America/New_York"
			return b
		}()},
	} {
		if err := s.BudgetCreate(t.Context(), tc.b); !errors.Is(err, weir.ErrConflict) {
			t.Errorf("BudgetCreate of %s: %v; want ErrConflict", tc.name, err)
		}
	}
	// A subject may have a day's and a 30 days' budget beside its month's.
	day, d30 := newBudget("bgt_4", "key", "key_a", base), newBudget("bgt_5", "key", "key_a", base)
	day.Window = weir.Window{Unit: weir.WindowDay}
	d30.Window = weir.Window{Every: 30 * 24 * time.Hour}
	mustCreateBudgets(t, s, day, d30)
	d30b := newBudget("bgt_6", "key", "key_a", base)
	d30b.Window = weir.Window{Every: 30 * 24 * time.Hour, Anchor: base.Add(time.Hour)}
	if err := s.BudgetCreate(t.Context(), d30b); !errors.Is(err, weir.ErrConflict) {
		t.Errorf("BudgetCreate of a second 30 days' from another anchor: %v; want ErrConflict", err)
	}
	checkBudgets(t, "after the conflicts", listBudgets(t, s, weir.BudgetFilter{}), month, day, d30)
}

func testBudgetInvalid(t *testing.T, s budgetStore) {
	edits := map[string]func(b *weir.Budget){
		"no ID":            func(b *weir.Budget) { b.ID = "" },
		"no creation time": func(b *weir.Budget) { b.CreatedAt = time.Time{} },
		"no subject":       func(b *weir.Budget) { b.Subject = weir.BudgetSubject{} },
		"no amount":        func(b *weir.Budget) { b.Amount = 0 },
		"an unknown zone":  func(b *weir.Budget) { b.Window.Zone = "Mars/Olympus" },
		"an unknown mode":  func(b *weir.Budget) { b.Mode = "strict" },
		"alerts unordered": func(b *weir.Budget) { b.Alerts = []int{100, 80} },
	}
	for name, edit := range edits {
		b := newBudget("bgt_1", "key", "key_a", base)
		edit(&b)
		if err := s.BudgetCreate(t.Context(), b); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("BudgetCreate with %s: %v; want ErrInvalid", name, err)
		}
	}
	checkBudgets(t, "after the refusals", listBudgets(t, s, weir.BudgetFilter{}))
}

func testBudgetUpdate(t *testing.T, s budgetStore) {
	b := newBudget("bgt_1", "key", "key_a", base)
	mustCreateBudgets(t, s, b)
	amount, mode, alerts := 75*weir.MoneyScale, weir.BudgetHard, []int{}
	at := base.Add(time.Hour)
	got, err := s.BudgetUpdate(t.Context(), &weir.BudgetUpdateParams{ID: b.ID, Amount: &amount, At: at})
	b.Amount, b.UpdatedAt = amount, at
	if err != nil {
		t.Fatalf("BudgetUpdate of the amount: %v", err)
	}
	checkBudgets(t, "after raising the amount", []weir.Budget{got}, b)
	at = at.Add(time.Hour)
	if got, err = s.BudgetUpdate(t.Context(), &weir.BudgetUpdateParams{ID: b.ID, Mode: &mode, Alerts: &alerts, At: at}); err != nil {
		t.Fatalf("BudgetUpdate of mode and alerts: %v", err)
	}
	b.Mode, b.Alerts, b.UpdatedAt = mode, nil, at
	checkBudgets(t, "after the mode and the alerts", []weir.Budget{got}, b)
	checkBudgets(t, "BudgetList after the updates", listBudgets(t, s, weir.BudgetFilter{}), b)

	zero, bad := weir.Money(0), weir.BudgetMode("strict")
	unordered := []int{100, 80}
	for name, p := range map[string]weir.BudgetUpdateParams{
		"nothing":          {ID: b.ID, At: at},
		"no time":          {ID: b.ID, Amount: &amount},
		"a zero amount":    {ID: b.ID, Amount: &zero, At: at},
		"an unknown mode":  {ID: b.ID, Mode: &bad, At: at},
		"unordered alerts": {ID: b.ID, Alerts: &unordered, At: at},
	} {
		if _, err := s.BudgetUpdate(t.Context(), &p); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("BudgetUpdate with %s: %v; want ErrInvalid", name, err)
		}
	}
	if _, err := s.BudgetUpdate(t.Context(), &weir.BudgetUpdateParams{ID: "bgt_none", Amount: &amount, At: at}); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("BudgetUpdate of an unknown ID: %v; want ErrNotFound", err)
	}
	checkBudgets(t, "after the refusals", listBudgets(t, s, weir.BudgetFilter{}), b)
}

func testBudgetUpdateCAS(t *testing.T, s budgetStore) {
	b := newBudget("bgt_1", "key", "key_a", base)
	mustCreateBudgets(t, s, b)
	a1, a2 := 60*weir.MoneyScale, 70*weir.MoneyScale
	at := base.Add(time.Minute)
	if _, err := s.BudgetUpdate(t.Context(), &weir.BudgetUpdateParams{ID: b.ID, Amount: &a1, At: at, IfUpdatedAt: base}); err != nil {
		t.Fatalf("BudgetUpdate if not updated since its creation: %v", err)
	}
	// A second writer that read the budget before the first wrote loses.
	if _, err := s.BudgetUpdate(t.Context(), &weir.BudgetUpdateParams{ID: b.ID, Amount: &a2, At: at.Add(time.Minute), IfUpdatedAt: base}); !errors.Is(err, weir.ErrConflict) {
		t.Errorf("BudgetUpdate if not updated since, when it was: %v; want ErrConflict", err)
	}
	if _, err := s.BudgetUpdate(t.Context(), &weir.BudgetUpdateParams{ID: "bgt_none", Amount: &a2, At: at, IfUpdatedAt: base}); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("BudgetUpdate of an unknown ID, compare-and-set: %v; want ErrNotFound", err)
	}
	b.Amount, b.UpdatedAt = a1, at
	checkBudgets(t, "after the lost update", listBudgets(t, s, weir.BudgetFilter{}), b)
}

func testBudgetDelete(t *testing.T, s budgetStore) {
	a, b := newBudget("bgt_1", "key", "key_a", base), newBudget("bgt_2", "key", "key_b", base)
	mustCreateBudgets(t, s, a, b)
	claim := &weir.BudgetAlertClaimParams{BudgetID: a.ID, WindowFrom: base, Threshold: 80, At: base}
	if ok, err := s.BudgetAlertClaim(t.Context(), claim); !ok || err != nil {
		t.Fatalf("BudgetAlertClaim = %v, %v", ok, err)
	}
	if err := s.BudgetDelete(t.Context(), a.ID); err != nil {
		t.Fatalf("BudgetDelete: %v", err)
	}
	if err := s.BudgetDelete(t.Context(), a.ID); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("BudgetDelete again: %v; want ErrNotFound", err)
	}
	checkBudgets(t, "after the delete", listBudgets(t, s, weir.BudgetFilter{}), b)
	// Its alerts went with it: a budget made again under its ID alerts
	// afresh.
	mustCreateBudgets(t, s, a)
	if ok, err := s.BudgetAlertClaim(t.Context(), claim); !ok || err != nil {
		t.Errorf("BudgetAlertClaim after the budget was deleted and made again = %v, %v; want true", ok, err)
	}
}

func testBudgetAlertClaim(t *testing.T, s budgetStore) {
	claim := func(id string, from time.Time, threshold int) bool {
		t.Helper()
		ok, err := s.BudgetAlertClaim(t.Context(), &weir.BudgetAlertClaimParams{BudgetID: id, WindowFrom: from, Threshold: threshold, At: base})
		if err != nil {
			t.Fatalf("BudgetAlertClaim(%s, %s, %d): %v", id, from, threshold, err)
		}
		return ok
	}
	next := base.AddDate(0, 1, 0)
	// The config file's budgets are in no table, and claim all the same.
	for _, c := range []struct {
		id        string
		from      time.Time
		threshold int
		want      bool
	}{
		{"bgt_1", base, 80, true},
		{"bgt_1", base, 80, false},
		{"bgt_1", base.In(time.UTC), 80, false}, // the same instant
		{"bgt_1", base, 100, true},
		{"bgt_1", next, 80, true},
		{"bgt_2", base, 80, true},
		{"cfg:group:default:month", base, 80, true},
		{"cfg:group:default:month", base, 80, false},
	} {
		if got := claim(c.id, c.from, c.threshold); got != c.want {
			t.Errorf("BudgetAlertClaim(%s, %s, %d) = %v; want %v", c.id, c.from, c.threshold, got, c.want)
		}
	}
	for _, p := range []weir.BudgetAlertClaimParams{
		{WindowFrom: base, Threshold: 80, At: base},
		{BudgetID: "bgt_1", Threshold: 80, At: base},
		{BudgetID: "bgt_1", WindowFrom: base, Threshold: 80},
		{BudgetID: "bgt_1", WindowFrom: base, Threshold: 0, At: base},
		{BudgetID: "bgt_1", WindowFrom: base, Threshold: 1001, At: base},
	} {
		if _, err := s.BudgetAlertClaim(t.Context(), &p); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("BudgetAlertClaim(%+v): %v; want ErrInvalid", p, err)
		}
	}
}

// testBudgetAlertClaimConcurrent: of many claims of one alert at once,
// exactly one wins.
func testBudgetAlertClaimConcurrent(t *testing.T, s budgetStore) {
	const n = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  int
		errs []error
	)
	for i := range n {
		wg.Go(func() {
			ok, err := s.BudgetAlertClaim(t.Context(), &weir.BudgetAlertClaimParams{
				BudgetID: "bgt_1", WindowFrom: base, Threshold: 100, At: base.Add(time.Duration(i) * time.Millisecond)})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("claim %d: %w", i, err))
			}
			if ok {
				won++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 || won != 1 {
		t.Errorf("%d concurrent claims of one alert: %d won, errors %v; want exactly 1", n, won, errs)
	}
}

func testBudgetCancelled(t *testing.T, s budgetStore) {
	b := newBudget("bgt_1", "key", "key_a", base)
	mustCreateBudgets(t, s, b)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	amount := 10 * weir.MoneyScale
	if err := s.BudgetCreate(ctx, newBudget("bgt_2", "key", "key_b", base)); !errors.Is(err, context.Canceled) {
		t.Errorf("BudgetCreate with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := s.BudgetUpdate(ctx, &weir.BudgetUpdateParams{ID: b.ID, Amount: &amount, At: base}); !errors.Is(err, context.Canceled) {
		t.Errorf("BudgetUpdate with a cancelled context: %v; want context.Canceled", err)
	}
	if err := s.BudgetDelete(ctx, b.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("BudgetDelete with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := s.BudgetList(ctx, weir.BudgetFilter{}); !errors.Is(err, context.Canceled) {
		t.Errorf("BudgetList with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := s.BudgetAlertClaim(ctx, &weir.BudgetAlertClaimParams{BudgetID: b.ID, WindowFrom: base, Threshold: 80, At: base}); !errors.Is(err, context.Canceled) {
		t.Errorf("BudgetAlertClaim with a cancelled context: %v; want context.Canceled", err)
	}
	checkBudgets(t, "after cancelled calls", listBudgets(t, s, weir.BudgetFilter{}), b)
}
