package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

// setupBudgets is the API over fakes with a budget store and a fake
// clock at a Thursday noon in Berlin.
func setupBudgets(t *testing.T) (*fakeBundle, *fakeBudgets, *clock.Fake) {
	t.Helper()
	store := &fakeBudgets{}
	clk := clock.NewFake(time.Date(2026, 3, 26, 11, 0, 0, 0, time.UTC))
	b := setupFakes(t, func(_ *Config, d *Deps) { d.Budgets, d.Clock = store, clk })
	return b, store, clk
}

func budgetOf(t *testing.T, body []byte) BudgetView {
	t.Helper()
	var v BudgetView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("answer is not a budget: %s", body)
	}
	return v
}

// TestBudgetsOfEndUsers: the admin API takes budgets of one end user and
// of every end user apart.
func TestBudgetsOfEndUsers(t *testing.T) {
	t.Parallel()
	b, _, _ := setupBudgets(t)
	for _, subject := range []string{"user:alice", "user:*"} {
		w := b.do(http.MethodPost, "/admin/budgets", `{"subject":"`+subject+`","amount":"5","window":"day"}`, nil)
		if w.Code != http.StatusCreated || budgetOf(t, w.Body.Bytes()).Subject != subject {
			t.Errorf("create a budget of %s: %d %s", subject, w.Code, w.Body)
		}
	}
}

// TestBudgetsCreateGetList: a budget created through the admin API is
// stored with its defaults and shown with its amount as a decimal string
// and the window it is in now; a subject's list is only its budgets.
func TestBudgetsCreateGetList(t *testing.T) {
	t.Parallel()
	b, store, _ := setupBudgets(t)
	w := b.do(http.MethodPost, "/admin/budgets",
		`{"subject":"key:key_abc","amount":"50","window":"month","zone":"Europe/Berlin","mode":"soft","alerts":[80,100]}`, nil)
	if w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	if !strings.Contains(w.Body.String(), `"amount":"50.00"`) {
		t.Errorf("the amount is not a decimal string: %s", w.Body)
	}
	got := budgetOf(t, w.Body.Bytes())
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if !strings.HasPrefix(got.ID, weir.BudgetIDPrefix) || got.Subject != "key:key_abc" || got.Amount != 50*weir.MoneyScale ||
		got.Window != "month" || got.Zone != "Europe/Berlin" || got.Mode != "soft" || len(got.Alerts) != 2 ||
		!got.WindowStart.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, berlin)) || !got.WindowEnd.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, berlin)) {
		t.Errorf("created %+v", got)
	}
	stored, err := store.BudgetGet(t.Context(), got.ID)
	if err != nil || stored.Window.Zone != "Europe/Berlin" || stored.Mode != weir.BudgetSoft {
		t.Errorf("stored %+v, %v", stored, err)
	}
	// Without a mode: hard; a rolling window anchored at its creation.
	w = b.do(http.MethodPost, "/admin/budgets", `{"subject":"group:default","amount":12.5,"window":"7d"}`, nil)
	if w.Code != http.StatusCreated {
		t.Fatalf("create a group's: %d %s", w.Code, w.Body)
	}
	if g := budgetOf(t, w.Body.Bytes()); g.Mode != "hard" || g.Anchor == nil || !g.Anchor.Equal(time.Date(2026, 3, 26, 11, 0, 0, 0, time.UTC)) || g.Amount.String() != "12.50" {
		t.Errorf("created with defaults %+v", g)
	}

	w = b.do(http.MethodGet, "/admin/budgets/"+got.ID, "", nil)
	if w.Code != http.StatusOK || budgetOf(t, w.Body.Bytes()).ID != got.ID {
		t.Errorf("get: %d %s", w.Code, w.Body)
	}
	for path, want := range map[string]int{"/admin/budgets": 2, "/admin/budgets?subject=key:key_abc": 1, "/admin/budgets?subject=model:m": 0} {
		w = b.do(http.MethodGet, path, "", nil)
		var list struct {
			Object string       `json:"object"`
			Data   []BudgetView `json:"data"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != http.StatusOK || list.Object != "list" || len(list.Data) != want || list.Data == nil {
			t.Errorf("GET %s: %d %s; want %d budgets", path, w.Code, w.Body, want)
		}
	}
}

// TestBudgetsRefusals: what the admin API refuses is a 400 naming the
// field, or a 404 for an unknown id; nothing is stored.
func TestBudgetsRefusals(t *testing.T) {
	t.Parallel()
	b, store, _ := setupBudgets(t)
	if w := b.do(http.MethodPost, "/admin/budgets", `{"subject":"key:k","amount":"5","window":"day"}`, nil); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	for _, tc := range []struct {
		body, param string
	}{
		{`{"amount":"5","window":"day"}`, "subject"},
		{`{"subject":"customer:u","amount":"5","window":"day"}`, "subject"},
		{`{"subject":"user:a\u0007b","amount":"5","window":"day"}`, "subject"},
		{`{"subject":"key:k2","window":"day"}`, "amount"},
		{`{"subject":"key:k2","amount":"0","window":"day"}`, "amount"},
		{`{"subject":"key:k2","amount":"-3","window":"day"}`, "amount"},
		{`{"subject":"key:k2","amount":"1.0000000001","window":"day"}`, "amount"},
		{`{"subject":"key:k2","amount":true,"window":"day"}`, "amount"},
		{`{"subject":"key:k2","amount":"5","window":"year"}`, "window"},
		{`{"subject":"key:k2","amount":"5"}`, "window"},
		{`{"subject":"key:k2","amount":"5","window":"day","zone":"Mars/Olympus"}`, "zone"},
		{`{"subject":"key:k2","amount":"5","window":"12h","zone":"Europe/Berlin"}`, "zone"},
		{`{"subject":"key:k2","amount":"5","window":"day","mode":"strict"}`, "mode"},
		{`{"subject":"key:k2","amount":"5","window":"day","alerts":[100,80]}`, "alerts"},
		{`{"subject":"key:k2","amount":"5","window":"day","alerts":"80"}`, "alerts"},
		{`{"subject":"key:k2","amount":"5","window":"day","limit":3}`, "limit"},
		{`{"subject":"key:k","amount":"9","window":"day"}`, "window"}, // k has a day's already
	} {
		w := b.do(http.MethodPost, "/admin/budgets", tc.body, nil)
		e := answerErr(t, w)
		if w.Code != http.StatusBadRequest || e.Code != string(weir.CodeInvalidRequest) || e.Param == nil || *e.Param != tc.param {
			t.Errorf("POST %s: %d %+v; want 400 naming %s", tc.body, w.Code, e, tc.param)
		}
	}
	if w := b.do(http.MethodPost, "/admin/budgets", `[1]`, nil); w.Code != http.StatusBadRequest {
		t.Errorf("POST of an array: %d", w.Code)
	}
	if bs, _ := store.BudgetList(t.Context(), weir.BudgetFilter{}); len(bs) != 1 {
		t.Errorf("%d budgets stored after the refusals; want 1", len(bs))
	}
	if w := b.do(http.MethodGet, "/admin/budgets?subject=nope", "", nil); w.Code != http.StatusBadRequest {
		t.Errorf("GET with a bad subject: %d", w.Code)
	}
	for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
		w := b.do(m, "/admin/budgets/bgt_none", `{"amount":"3"}`, nil)
		if e := answerErr(t, w); w.Code != http.StatusNotFound || e.Code != string(weir.CodeNotFound) {
			t.Errorf("%s of an unknown budget: %d %+v; want 404", m, w.Code, e)
		}
	}
}

// TestBudgetsPatchAndDelete: PATCH raises or lowers a budget, changes its
// mode and alerts, at once; it refuses to change what makes the budget
// (subject, window). DELETE removes it.
func TestBudgetsPatchAndDelete(t *testing.T) {
	t.Parallel()
	b, store, clk := setupBudgets(t)
	w := b.do(http.MethodPost, "/admin/budgets", `{"subject":"model:m","amount":"10","window":"week","alerts":[50]}`, nil)
	id := budgetOf(t, w.Body.Bytes()).ID
	clk.Advance(time.Hour)
	w = b.do(http.MethodPatch, "/admin/budgets/"+id, `{"amount":"25.75","mode":"shadow","alerts":[]}`, nil)
	got := budgetOf(t, w.Body.Bytes())
	if w.Code != http.StatusOK || got.Amount.String() != "25.75" || got.Mode != "shadow" || len(got.Alerts) != 0 || !got.UpdatedAt.Equal(clk.Now()) {
		t.Errorf("PATCH: %d %s", w.Code, w.Body)
	}
	if s, _ := store.BudgetGet(t.Context(), id); s.Amount != 25_750_000_000 || s.Mode != weir.BudgetShadow {
		t.Errorf("stored after PATCH: %+v", s)
	}
	for _, tc := range []struct{ body, param string }{
		{`{}`, "amount"},
		{`{"amount":"0"}`, "amount"},
		{`{"mode":"strict"}`, "mode"},
		{`{"alerts":[0]}`, "alerts"},
		{`{"window":"day"}`, "window"},
		{`{"subject":"model:n","amount":"3"}`, "subject"},
		{`{"zone":"UTC"}`, "zone"},
	} {
		w := b.do(http.MethodPatch, "/admin/budgets/"+id, tc.body, nil)
		if e := answerErr(t, w); w.Code != http.StatusBadRequest || e.Param == nil || *e.Param != tc.param {
			t.Errorf("PATCH %s: %d %+v; want 400 naming %s", tc.body, w.Code, e, tc.param)
		}
	}
	if w := b.do(http.MethodDelete, "/admin/budgets/"+id, "", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"deleted":true`) {
		t.Errorf("DELETE: %d %s", w.Code, w.Body)
	}
	if _, err := store.BudgetGet(t.Context(), id); !errors.Is(err, weir.ErrNotFound) {
		t.Errorf("after DELETE the store has it: %v", err)
	}
}

// TestBudgetsStoreDown: a store that fails is store_unavailable, logged
// with its cause; an admin route needs the admin's trust.
func TestBudgetsStoreDown(t *testing.T) {
	t.Parallel()
	b, store, _ := setupBudgets(t)
	store.err = errors.New("disk full")
	w := b.do(http.MethodPost, "/admin/budgets", `{"subject":"key:k","amount":"5","window":"day"}`, nil)
	if e := answerErr(t, w); w.Code != http.StatusServiceUnavailable || e.Code != string(weir.CodeStoreUnavailable) || strings.Contains(e.Message, "disk") {
		t.Errorf("create on a failing store: %d %+v", w.Code, e)
	}
	if !strings.Contains(b.log(), "disk full") {
		t.Errorf("the cause was not logged: %s", b.log())
	}
	closed := setupFakes(t, func(c *Config, d *Deps) { c.AdminLoopback, d.Budgets = false, store })
	if w := closed.do(http.MethodGet, "/admin/budgets", "", nil); w.Code != http.StatusForbidden {
		t.Errorf("GET /admin/budgets without the admin's trust: %d; want 403", w.Code)
	}
}
