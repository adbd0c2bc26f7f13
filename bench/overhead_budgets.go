package bench

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/config"
	"github.com/weir-gateway/weir/keys"
)

// The budgets target's group, model and budgets (OverheadConfig.Budgets).
const (
	budgetsGroup = "budgeted"
	// budgetsModel is served by the weir target's platform model. It is
	// as long as the weir target's model name, so that both send requests
	// of one size.
	budgetsModel = "gpt-4o-paid"
	// budgetsSpec is every budget's amount and window: a month of spend
	// that no run comes near (a request reserves well under 0.01).
	budgetsSpec = "1000000/month"
	// budgetsProbeWait bounds the wait for the key's budget, made in the
	// store, to reach the gateway: it reads the store's budgets every
	// gateway.Config.OverridePoll (2s).
	budgetsProbeWait = 15 * time.Second
)

// budgetsAlerts are every budget's alert thresholds, as an operator
// would set them: never crossed, but looked at after each settlement.
var budgetsAlerts = []int{80, 100}

// budgetsPrice is the platform model's price with Budgets (gpt-4o-mini's
// list price per million tokens), so that each request's reservation and
// settlement are of a real cost.
var budgetsPrice = weir.Price{Input: 150_000_000, Output: 600_000_000}

// The budgets target's requests: the weir target's, for budgetsModel.
var (
	budgetsBody       = strings.Replace(chatBody, `"gpt-4o-mini"`, `"`+budgetsModel+`"`, 1)
	budgetsStreamBody = strings.Replace(chatStreamBody, `"gpt-4o-mini"`, `"`+budgetsModel+`"`, 1)
)

// budgetsCatalog prices Overhead's platform model and adds the budgets
// target's group and model over it, each with a hard budget from the
// config file. The weir target's key, group and model have none.
func budgetsCatalog(cfg *config.Config) {
	for i := range cfg.PlatformModels {
		if cfg.PlatformModels[i].Name == chatPM {
			cfg.PlatformModels[i].Price = budgetsPrice
		}
	}
	cfg.Groups = append(cfg.Groups, config.Group{Name: budgetsGroup, RoundRobin: true, Limits: weir.Limits{Concurrency: generous}})
	cfg.Models = append(cfg.Models, config.Model{Name: budgetsModel, Kind: weir.KindChat,
		Candidates: []config.Candidate{{PlatformModel: chatPM, Weight: 1}}, Nodes: weir.NodesNever})
	for _, subject := range []string{"group:" + budgetsGroup, "model:" + budgetsModel} {
		cfg.Budgets = append(cfg.Budgets, config.Budget{Subject: subject, Budget: budgetsSpec, Mode: weir.BudgetHard, Alerts: budgetsAlerts})
	}
}

// budgetsTarget is what the budgets target holds: its key and the
// scopes of its three budgets, the key's, the group's and the model's.
type budgetsTarget struct {
	key    weir.APIKey
	scopes []string
	// spent is each scope's spend once the probe has seen it grow.
	spent map[string]int64
}

// startBudgetsTarget creates the budgets target's key, of budgetsGroup,
// and its hard budget in the store (as `weir keys create --budget`
// does), adds the target "budgets" to rig and checks that its requests
// reserve and settle against all three budgets (checkBudgets).
func startBudgetsTarget(ctx context.Context, c OverheadConfig, rig *overheadRig, plain http.Header) error {
	bt := &budgetsTarget{key: weir.APIKey{Name: "bench-budgets", Group: budgetsGroup, Limits: weir.Limits{Concurrency: generous}}}
	store := rig.gateway.Store()
	secret, err := c.Weir.CreateKey(ctx, store, &bt.key)
	if err != nil {
		return fmt.Errorf("budgets: create the key: %w", err)
	}
	amount, window, err := weir.ParseBudgetSpec(budgetsSpec)
	if err != nil {
		return fmt.Errorf("budgets: %w", err)
	}
	id, err := keys.NewID(weir.BudgetIDPrefix)
	if err != nil {
		return fmt.Errorf("budgets: %w", err)
	}
	now := time.Now().UTC()
	b := weir.Budget{ID: id, Subject: weir.BudgetSubject{Type: "key", Name: bt.key.ID}, Amount: amount, Window: window,
		Mode: weir.BudgetHard, Alerts: budgetsAlerts, CreatedAt: now, UpdatedAt: now}
	if err := store.BudgetCreate(ctx, b); err != nil {
		return fmt.Errorf("budgets: create the key's budget: %w", err)
	}
	bt.scopes = []string{
		weir.BudgetScope(id),
		weir.BudgetScope(weir.ConfigBudgetID(weir.BudgetSubject{Type: "group", Name: budgetsGroup}, window)),
		weir.BudgetScope(weir.ConfigBudgetID(weir.BudgetSubject{Type: "model", Name: budgetsModel}, window)),
	}
	rig.budgets = bt
	auth := plain.Clone()
	auth.Set("Authorization", "Bearer "+secret)
	t := overheadTarget{name: "budgets", urls: []string{"http://" + rig.gateway.Addr() + "/v1/chat/completions"}, header: auth,
		body: budgetsBody, streamBody: budgetsStreamBody}
	rig.targets = append(rig.targets, t)
	return bt.check(ctx, rig, t)
}

// spentNow is the settled spend of each of the target's budget scopes
// that the engine has yet.
func (bt *budgetsTarget) spentNow(ctx context.Context, rig *overheadRig) map[string]int64 {
	spent := map[string]int64{}
	for _, st := range rig.gateway.Scopes(ctx) {
		if slices.Contains(bt.scopes, st.Name) {
			spent[st.Name] = st.BudgetSpent
		}
	}
	return spent
}

// check sends t's request until each of the three budget scopes'
// settled spend has grown over one request — the key's budget is there
// once the gateway has read the store's budgets — so that the figures
// are never of a path that reserves against fewer than all three. A
// request settles before its answer is written, so each probe's
// settlement shows once it returns.
func (bt *budgetsTarget) check(ctx context.Context, rig *overheadRig, t overheadTarget) error {
	deadline := time.Now().Add(budgetsProbeWait)
	for {
		before := bt.spentNow(ctx, rig)
		if _, err := probe(ctx, t.urls[0], t.header, t.body); err != nil {
			return fmt.Errorf("budgets: %w", err)
		}
		after := bt.spentNow(ctx, rig)
		var missing []string
		for _, s := range bt.scopes {
			if _, ok := before[s]; !ok || after[s] <= before[s] {
				missing = append(missing, s)
			}
		}
		if len(missing) == 0 {
			bt.spent = after
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("budgets: after %s of probes, a request still settles nothing in %s: the target would not measure budgets",
				budgetsProbeWait, strings.Join(missing, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// report is the budget scopes' line after the run: each one's spend and
// reservations now, and an error if any spent nothing since the probe
// (the run's requests did not reach it).
func (bt *budgetsTarget) report(ctx context.Context, rig *overheadRig) (string, error) {
	byName := map[string]struct{ spent, reserved int64 }{}
	for _, st := range rig.gateway.Scopes(ctx) {
		if slices.Contains(bt.scopes, st.Name) {
			byName[st.Name] = struct{ spent, reserved int64 }{st.BudgetSpent, st.BudgetReserved}
		}
	}
	var parts, idle []string
	for _, s := range bt.scopes {
		st := byName[s]
		parts = append(parts, fmt.Sprintf("%s (spent %s, reserved %s)", s, weir.Money(st.spent), weir.Money(st.reserved)))
		if st.spent <= bt.spent[s] {
			idle = append(idle, s)
		}
	}
	line := "budget scopes of target budgets, each " + budgetsSpec + " hard: " + strings.Join(parts, ", ")
	if len(idle) > 0 {
		return line, fmt.Errorf("budgets: the run's requests settled nothing in %s", strings.Join(idle, ", "))
	}
	return line, nil
}
