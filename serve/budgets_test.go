package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/console"
	"github.com/weir-gateway/weir/metrics"
)

// gauges reports fixed budget gauges, as the gateway's budgets will.
type gauges []metrics.BudgetGauge

func (g gauges) BudgetGauges(context.Context) []metrics.BudgetGauge { return g }

// TestSpendWiring: the console's spend view shows the config file's
// budgets beside the store's (and a reload's in place of the last), the
// metrics label spend by key when the config asks, the budget gauges read
// the engine, or the store before it has a budget's window, or whatever
// reports them itself, and the gateway's budget alerts are counted.
func TestSpendWiring(t *testing.T) {
	t.Parallel()
	const token = "spend-token"
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.AdminToken = token
	cfg.Server.MetricsSpendByKey = true
	cfg.Budgets = []config.Budget{{Subject: "group:default", Budget: "5/day", Mode: weir.BudgetSoft, Alerts: []int{80}}}
	m, _, _, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	stored := weir.Budget{ID: "bgt_spendwiring", Subject: weir.BudgetSubject{Type: "key", Name: "key_x"}, Amount: 2 * weir.MoneyScale,
		Window: weir.Window{Unit: weir.WindowMonth}, CreatedAt: now, UpdatedAt: now}
	if err := m.DB.BudgetCreate(t.Context(), stored.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+m.Addr()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	var page console.SpendPage
	if err := json.Unmarshal([]byte(get("/console/api/spend?window=day")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Groups) != 1 || len(page.Groups[0].Budgets) != 1 || page.Groups[0].Budgets[0].ID != "cfg:group:default:day" {
		t.Errorf("groups: %+v; want default with the config file's budget", page.Groups)
	}
	if len(page.Keys) != 1 || page.Keys[0].ID != "key_x" || len(page.Keys[0].Budgets) != 1 || page.Keys[0].Budgets[0].ID != stored.ID {
		t.Errorf("keys: %+v; want key_x with the store's budget", page.Keys)
	}

	// The budget gauges: the store's spend before the engine has the
	// budget's scope, the engine's after; keys' too, as the config asks.
	m.watchBudgets(m.Gateway)
	body := get("/metrics")
	for _, want := range []string{
		`weir_budget_remaining{budget="cfg:group:default:day",mode="soft",subject="default",subject_type="group"} 5`,
		`weir_budget_remaining{budget="bgt_spendwiring",mode="hard",subject="key_x",subject_type="key"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	from, until := weir.Window{Unit: weir.WindowDay}.Bounds(time.Now())
	if err := m.Engine.SetScope(t.Context(), weir.BudgetScope("cfg:group:default:day"), admission.ScopeConfig{
		Budget: int64(5 * weir.MoneyScale), BudgetFrom: from, BudgetUntil: until, BudgetSpent: int64(3 * weir.MoneyScale / 2), Shadow: true}); err != nil {
		t.Fatal(err)
	}
	if body := get("/metrics"); !strings.Contains(body, `weir_budget_spent{budget="cfg:group:default:day",mode="soft",subject="default",subject_type="group"} 1.5`) {
		t.Errorf("/metrics has not the engine's spend of the default group's budget")
	}
	consoleMetrics{Metrics: m.Metrics}.BudgetAlert("soft", true)
	if body := get("/metrics"); !strings.Contains(body, `weir_budget_alerts_total{mode="soft",sent="true"} 1`) {
		t.Errorf("/metrics does not count the gateway's budget alerts")
	}

	// A catalog applied without budgets takes the config file's away.
	if err := m.apply(t.Context(), config.Default(), true); err != nil {
		t.Fatal(err)
	}
	bs, err := m.Gateway.Budgets(t.Context())
	if err != nil || len(bs) != 1 || bs[0].ID != stored.ID {
		t.Errorf("after a reload without budgets: %+v %v", bs, err)
	}

	m.recordUsage(weir.Usage{RequestID: "req_1", KeyID: "key_x", Group: "default", Model: "chat", PlatformModel: "up/chat", Cost: weir.MoneyScale / 2, Status: 200, Outcome: "ok", At: now})
	m.recordUsage(weir.Usage{RequestID: "req_2", KeyID: "key_x", Group: "default", Model: "chat", Status: 429, Outcome: "queue_full", At: now})
	if body := get("/metrics"); !strings.Contains(body, `weir_spend_total{group="default",key="key_x",model="chat",platform_model="up/chat"} 0.5`) {
		t.Errorf("/metrics has no spend by key")
	}
	if body := get("/metrics"); strings.Contains(body, `platform_model=""`) {
		t.Errorf("a request that reached no upstream counted in weir_spend_total")
	}
	m.watchBudgets(gauges{{ID: "cfg:group:default:day", SubjectType: "group", Subject: "default", Mode: "soft", Amount: 5 * weir.MoneyScale}})
	if body := get("/metrics"); !strings.Contains(body, `weir_budget_remaining{budget="cfg:group:default:day",mode="soft",subject="default",subject_type="group"} 5`) {
		t.Errorf("/metrics has no budget gauge")
	}
}
