package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/task"
)

// Budget alerts (docs/spend.md): a budget's Alerts are thresholds in
// percent of its amount. Once its window's spend (settled, as its scope
// counts it) reaches one, an event "budget.threshold" goes to the
// operator's URL, one per budget, window and threshold however many
// replicas see it: the store's claim (BudgetAlertClaim) lets one
// replica send it. Spend is looked at after every settlement that
// touched a budget with alerts, at most once per alertGap per budget.

// OperatorEvents sends operator events: the task service.
type OperatorEvents interface {
	SendOperatorEvent(ctx context.Context, ev task.OperatorEvent) error
}

// alertGap is the least time between two looks at one budget's spend.
const alertGap = time.Second

// alertState is what this replica has sent or seen claimed, and when it
// last looked at each budget.
type alertState struct {
	looked sync.Map // budget id → *atomic.Int64: the last look, Unix ns
	mu     sync.Mutex
	done   map[string]map[alertMark]bool // budget id → its alerts sent
}

// alertMark is one alert of a budget: its window, by its start, and
// threshold.
type alertMark struct {
	from      int64
	threshold int
}

// forget drops what a has of budget id: an end user's budget retired.
func (a *alertState) forget(id string) {
	a.looked.Delete(id)
	a.mu.Lock()
	delete(a.done, id)
	a.mu.Unlock()
}

// BudgetAlert is the data of a budget.threshold event.
type BudgetAlert struct {
	Budget    string     `json:"budget"`
	Subject   string     `json:"subject"`
	Mode      string     `json:"mode"`
	Amount    weir.Money `json:"amount"`
	Spent     weir.Money `json:"spent"`
	Threshold int        `json:"threshold"`
	From      time.Time  `json:"window_start"`
	Until     time.Time  `json:"window_end"`
}

// checkAlerts looks, apart from the request, at the spend of those of
// the budgets a settled request counted against (its scopes) that have
// alerts and were not looked at within alertGap, and sends what
// thresholds they crossed.
func (s *Service) checkAlerts(scopes []admission.Need) {
	if s.deps.Events == nil || s.deps.Budgets == nil {
		return
	}
	book := s.budgets.book.Load()
	now := s.deps.Clock.Now()
	var due []weir.Budget
	for _, n := range scopes {
		id, ok := weir.BudgetOfScope(n.Scope)
		if !ok {
			continue
		}
		if b, ok := book.get(id); ok && len(b.Alerts) > 0 && s.alerts.due(id, now) {
			due = append(due, b)
		}
	}
	if len(due) == 0 {
		return
	}
	go func() {
		for _, b := range due {
			s.checkAlert(b, now)
		}
	}()
}

// due reports whether budget id's spend is to be looked at now, and
// notes the look: one caller in alertGap gets true.
func (a *alertState) due(id string, now time.Time) bool {
	v, ok := a.looked.Load(id)
	if !ok {
		v, _ = a.looked.LoadOrStore(id, new(atomic.Int64))
	}
	last := v.(*atomic.Int64)
	prev := last.Load()
	if prev != 0 && now.UnixNano()-prev < int64(alertGap) {
		return false
	}
	return last.CompareAndSwap(prev, now.UnixNano())
}

func (s *Service) checkAlert(b weir.Budget, now time.Time) {
	ctx := context.Background()
	st, err := s.deps.Engine.Scope(ctx, weir.BudgetScope(b.ID))
	if err != nil || b.Amount <= 0 {
		return
	}
	spent := weir.Money(st.BudgetSpent)
	from, until := b.Window.Bounds(now)
	for _, th := range b.Alerts {
		if spent < b.Amount.MulDiv(int64(th), 100) {
			break
		}
		k := alertMark{from.UnixNano(), th}
		s.alerts.mu.Lock()
		if s.alerts.done == nil {
			s.alerts.done = make(map[string]map[alertMark]bool)
		}
		if s.alerts.done[b.ID] == nil {
			s.alerts.done[b.ID] = make(map[alertMark]bool)
		}
		done := s.alerts.done[b.ID][k]
		s.alerts.done[b.ID][k] = true
		s.alerts.mu.Unlock()
		if done {
			continue
		}
		s.sendAlert(ctx, b, spent, th, from, until)
	}
}

// sendAlert claims b's threshold th in the window from and, if this
// replica is the first, sends its event.
func (s *Service) sendAlert(ctx context.Context, b weir.Budget, spent weir.Money, th int, from, until time.Time) {
	log := s.deps.Logger.With("budget", b.ID, "threshold", th)
	claimed, err := s.deps.Budgets.BudgetAlertClaim(ctx, &weir.BudgetAlertClaimParams{BudgetID: b.ID, WindowFrom: from, Threshold: th, At: s.deps.Clock.Now()})
	if err != nil {
		log.Warn("could not claim a budget's alert; it is not sent", "error", err)
		s.deps.Metrics.DroppedError("budget_alert")
		return
	}
	s.deps.Metrics.BudgetAlert(string(b.Mode), claimed)
	if !claimed {
		return
	}
	data, _ := json.Marshal(BudgetAlert{Budget: b.ID, Subject: b.Subject.String(), Mode: string(b.Mode),
		Amount: b.Amount, Spent: spent, Threshold: th, From: from, Until: until})
	ev := task.OperatorEvent{ID: fmt.Sprintf("evt_budget_%s_%d_%d", b.ID, from.Unix(), th), Type: "budget.threshold", At: s.deps.Clock.Now(), Data: data}
	if err := s.deps.Events.SendOperatorEvent(ctx, ev); err != nil {
		log.Warn("could not queue a budget's alert", "error", err)
		s.deps.Metrics.DroppedError("budget_alert")
		return
	}
	log.Info("budget alert", "subject", b.Subject.String(), "spent", spent.String(), "amount", b.Amount.String())
}
