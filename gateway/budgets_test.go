package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
	"github.com/weir-gateway/weir/provider/mock"
	"github.com/weir-gateway/weir/task"
)

// A token costs one billionth in and out on up/m: a request's cost is
// its token count.
var tokenPrice = weir.Price{Input: 1_000_000, Output: 1_000_000}

// budgeted is the catalog with only up/m, priced per token, and bs.
func budgeted(bs ...weir.Budget) func(*weir.Catalog) {
	return func(c *weir.Catalog) {
		onlyUp(c)
		c.PlatformModels[0].Price = tokenPrice
		c.Groups = []weir.Group{{Name: "default"}}
		for i := range bs {
			bs[i] = bs[i].WithDefaults()
			bs[i].ID = weir.ConfigBudgetID(bs[i].Subject, bs[i].Window)
		}
		c.Budgets = bs
	}
}

// budgetScopeOf is the scope of the catalog's budget of subject over w.
func budgetScopeOf(subject weir.BudgetSubject, w string) string {
	win, _ := weir.ParseWindow(w)
	return weir.BudgetScope(weir.ConfigBudgetID(subject, win))
}

func monthBudget(id string, subject weir.BudgetSubject, amount weir.Money, mode weir.BudgetMode, alerts ...int) weir.Budget {
	w, _ := weir.ParseWindow("month")
	return weir.Budget{ID: id, Subject: subject, Amount: amount, Window: w, Mode: mode, Alerts: alerts}
}

// budgetCall is a chat call of key_1 asking for at most maxTokens, whose
// answer the mock reports as prompt and completion tokens.
func (b *testBundle) budgetCall(t *testing.T, id string, maxTokens, prompt, completion int64) *Call {
	c := b.chat(t)
	c.RequestID, c.Usage.RequestID = id, id
	c.Body = rawBody(fmt.Sprintf(`{"model":"m","max_tokens":%d,"metadata":{"mock_usage":"prompt=%d,completion=%d"},"messages":[{"role":"user","content":"hi"}]}`,
		maxTokens, prompt, completion))
	c.Wants = weir.Wants{PromptTokens: 10, MaxTokens: maxTokens}
	c.Tokens, c.MaxTokens = 10+maxTokens, maxTokens
	return c
}

// A hard budget is passed by no more than what requests settle beyond
// their estimates, under 200 concurrent requests whose real costs differ
// from their estimates (most cost less, every tenth more: its prompt was
// longer than estimated); those that do not fit are refused at once with
// budget_exceeded and the window's end, and none is refused while the
// budget still had room for it.
func TestHardBudgetExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const amount, estimate = 5_000, 60
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("b1", key, amount, weir.BudgetHard))})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		served   int64 // cost settled by the requests that were served
		refused  int
		overshot int64 // what the served requests cost beyond their estimates
	)
	for i := range 200 {
		wg.Go(func() {
			prompt, completion := int64(10), int64(i%51)
			if i%10 == 0 {
				prompt = 40
			}
			c := b.budgetCall(t, fmt.Sprintf("req_%d", i), 50, prompt, completion)
			err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
			mu.Lock()
			defer mu.Unlock()
			var e *Error
			switch {
			case err == nil:
				served += prompt + completion
				overshot += max(prompt+completion-estimate, 0)
			case errors.As(err, &e) && e.Category == ErrBudgetExceeded:
				refused++
				if e.RetryAfter <= 0 || e.RetryAfter > 32*24*time.Hour {
					t.Errorf("Retry-After %s: want the month's end", e.RetryAfter)
				}
			default:
				t.Errorf("request %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	st := b.scope(t, budgetScopeOf(key, "month"))
	if st.BudgetSpent != served || st.BudgetReserved != 0 {
		t.Errorf("budget spent %d, reserved %d: want the %d the served requests cost, nothing reserved", st.BudgetSpent, st.BudgetReserved, served)
	}
	if served > amount+overshot {
		t.Errorf("served %d past a budget of %d by more than the served requests' overshoot, %d", served, amount, overshot)
	}
	if refused == 0 || served <= amount-estimate {
		t.Errorf("%d refused with %d spent of %d: want refusals only once less than an estimate is left", refused, served, amount)
	}
}

// A spent budget refuses at once, naming its subject and when it resets;
// the next window admits again.
func TestHardBudgetResetsWithItsWindow(t *testing.T) {
	t.Parallel()
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	day, _ := weir.ParseWindow("day")
	b := setup(t, setupOpts{catalog: budgeted(weir.Budget{ID: "d", Subject: key, Amount: 100, Window: day})})
	if err := b.svc.Serve(t.Context(), b.budgetCall(t, "r1", 50, 10, 95), &recordedAnswer{}); err != nil {
		t.Fatal(err)
	}
	err := b.svc.Serve(t.Context(), b.budgetCall(t, "r2", 50, 10, 10), &recordedAnswer{})
	var e *Error
	if !errors.As(err, &e) || e.Category != ErrBudgetExceeded {
		t.Fatalf("second request: %v, want budget_exceeded", err)
	}
	_, until := day.Bounds(b.clock.Now())
	if want := until.Sub(b.clock.Now()); e.RetryAfter != max(want, time.Second) {
		t.Errorf("Retry-After %s, want %s (the day's end)", e.RetryAfter, want)
	}
	b.clock.Advance(until.Sub(b.clock.Now()) + time.Minute)
	if err := b.svc.Serve(t.Context(), b.budgetCall(t, "r3", 50, 10, 10), &recordedAnswer{}); err != nil {
		t.Fatalf("in the next day: %v", err)
	}
}

// An upstream's error status costs nothing: the reservation is given
// back, not counted.
func TestBudgetRefusedCallCostsNothing(t *testing.T) {
	t.Parallel()
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("b1", key, 1_000, weir.BudgetHard)), mock: mock.Config{ErrorRate: 1}})
	if err := b.svc.Serve(t.Context(), b.budgetCall(t, "r1", 50, 10, 10), &recordedAnswer{}); !errors.Is(err, ErrUpstream) {
		t.Fatalf("Serve: %v, want upstream_error", err)
	}
	if st := b.scope(t, budgetScopeOf(key, "month")); st.BudgetSpent != 0 || st.BudgetReserved != 0 {
		t.Errorf("spent %d, reserved %d after a refused call: want nothing", st.BudgetSpent, st.BudgetReserved)
	}
}

// A shadow budget refuses nothing and counts what it would have refused;
// a soft one refuses nothing and sends each alert threshold once.
func TestSoftAndShadowBudgetsRefuseNothing(t *testing.T) {
	t.Parallel()
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	group := weir.BudgetSubject{Type: "group", Name: "default"}
	events := &recordedEvents{}
	b := setup(t, setupOpts{
		catalog: budgeted(monthBudget("shadow", key, 100, weir.BudgetShadow), monthBudget("soft", group, 100, weir.BudgetSoft, 50, 100)),
		events:  events,
	})
	for i := range 5 {
		if err := b.svc.Serve(t.Context(), b.budgetCall(t, fmt.Sprintf("r%d", i), 50, 10, 30), &recordedAnswer{}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b.clock.Advance(alertGap)
	}
	if st := b.scope(t, budgetScopeOf(key, "month")); st.BudgetSpent != 200 || st.ShadowRefusals == 0 {
		t.Errorf("shadow budget spent %d, would have refused %d: want 200 and some", st.BudgetSpent, st.ShadowRefusals)
	}
	// Each settlement looks at the spend apart from its request, so two
	// looks may send their thresholds in either order.
	got := events.wait(t, 2)
	alerts := make([]BudgetAlert, len(got))
	for i, ev := range got {
		if err := json.Unmarshal(ev.Data, &alerts[i]); err != nil {
			t.Fatalf("event %d: %s: %v", i, ev.Data, err)
		}
	}
	slices.SortFunc(alerts, func(a, b BudgetAlert) int { return a.Threshold - b.Threshold })
	win, _ := weir.ParseWindow("month")
	for i, th := range []int{50, 100} {
		if a := alerts[i]; a.Budget != weir.ConfigBudgetID(group, win) || a.Threshold != th {
			t.Errorf("alert %d: %+v, want the soft budget's %d%%", i, a, th)
		}
	}
	// Looked at again, past the gap: both thresholds are sent already.
	b.clock.Advance(alertGap)
	soft, _ := b.svc.budgets.book.Load().get(weir.ConfigBudgetID(group, win))
	b.svc.checkAlert(soft, b.clock.Now())
	if n := len(events.all()); n != 2 {
		t.Errorf("%d events, want one per threshold", n)
	}
}

// recordedEvents keeps the operator events sent.
type recordedEvents struct {
	mu  sync.Mutex
	evs []task.OperatorEvent
	ch  chan struct{}
}

func (r *recordedEvents) SendOperatorEvent(_ context.Context, ev task.OperatorEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	if r.ch != nil {
		close(r.ch)
		r.ch = nil
	}
	return nil
}

func (r *recordedEvents) all() []task.OperatorEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]task.OperatorEvent(nil), r.evs...)
}

// wait waits until at least n events were sent.
func (r *recordedEvents) wait(t *testing.T, n int) []task.OperatorEvent {
	t.Helper()
	for {
		r.mu.Lock()
		if len(r.evs) >= n {
			evs := append([]task.OperatorEvent(nil), r.evs...)
			r.mu.Unlock()
			return evs
		}
		if r.ch == nil {
			r.ch = make(chan struct{})
		}
		ch := r.ch
		r.mu.Unlock()
		select {
		case <-ch:
		case <-t.Context().Done():
			t.Fatalf("%d events sent, want %d", len(r.all()), n)
		}
	}
}

func (m *countingMetrics) BudgetAlert(string, bool) {}

// A task reserves what its video's seconds cost against its model's
// budget; another waits while the first holds what is left.
func TestPlanReservesATasksCost(t *testing.T) {
	t.Parallel()
	model := weir.BudgetSubject{Type: "model", Name: "v"}
	month, _ := weir.ParseWindow("month")
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		videoCatalog(c)
		c.PlatformModels[len(c.PlatformModels)-1].Price = weir.Price{Second: weir.MoneyScale / 10}
		bud := weir.Budget{ID: weir.ConfigBudgetID(model, month), Subject: model, Amount: weir.MoneyScale, Window: month}
		c.Budgets = []weir.Budget{bud.WithDefaults()}
	}})
	ctx := t.Context()
	if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_v", Hash: "hash_v", Group: "gold", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	cands, err := b.svc.Plan(ctx, weir.Task{ID: "task_1", Model: "v", KeyID: "key_v", Input: []byte(`{"seconds":"8"}`)})
	if err != nil {
		t.Fatal(err)
	}
	scope := weir.BudgetScope(weir.ConfigBudgetID(model, month))
	if len(cands) != 1 || cands[0].Cost != int64(8*weir.MoneyScale/10) || cands[0].Needs[len(cands[0].Needs)-1].Scope != scope {
		t.Fatalf("candidates %+v: want one reserving 0.80 in %s", cands, scope)
	}
	cands[0].Needs = append(cands[0].Needs[:len(cands[0].Needs):len(cands[0].Needs)], admission.Need{Scope: "workers", Amount: 1})
	if err := b.engine.SetScope(ctx, "workers", admission.ScopeConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.TryAcquire(ctx, admission.Request{ID: "t1", Candidates: cands}); err != nil {
		t.Fatalf("the first 0.80 of 1.00: %v", err)
	}
	if _, err := b.engine.TryAcquire(ctx, admission.Request{ID: "t2", Candidates: cands}); !errors.Is(err, admission.ErrWouldWait) {
		t.Fatalf("a second 0.80 while the first is held: %v, want to wait for it", err)
	}
}

// Each poll sets a budget scope's BudgetSpent to what the engine has
// counted in the window, so that a fleet's next leader, which starts
// from the replicas' configurations, starts from the spend of a poll ago
// rather than from the window's first request.
func TestBudgetSpentKeptCurrentForTheNextLeader(t *testing.T) {
	t.Parallel()
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	rec := &recordingEngine{}
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("b1", key, 1_000, weir.BudgetHard)),
		engine: func(e admission.Engine) admission.Engine { rec.Engine = e; return rec }})
	for i := range 3 {
		if err := b.svc.Serve(t.Context(), b.budgetCall(t, fmt.Sprintf("r%d", i), 50, 10, 20), &recordedAnswer{}); err != nil {
			t.Fatal(err)
		}
	}
	scope := budgetScopeOf(key, "month")
	if got := rec.last(scope).BudgetSpent; got != 0 {
		t.Fatalf("BudgetSpent %d before a poll, want 0 (the window's first request)", got)
	}
	b.svc.applyMu.Lock()
	if err := b.svc.reloadBudgetsLocked(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.svc.applyMu.Unlock()
	if got := rec.last(scope).BudgetSpent; got != 90 {
		t.Errorf("BudgetSpent %d after a poll, want the 90 spent", got)
	}
}

// Once a budget's window is set, the check every request makes of it
// allocates nothing. Not parallel: AllocsPerRun counts the process's
// allocations.
func TestBudgetWindowSetAllocatesNothing(t *testing.T) {
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("b1", key, 1_000, weir.BudgetHard))})
	if err := b.svc.Serve(t.Context(), b.budgetCall(t, "r1", 50, 10, 20), &recordedAnswer{}); err != nil {
		t.Fatal(err)
	}
	w, _ := weir.ParseWindow("month")
	budget, ok := b.svc.budgets.book.Load().get(weir.ConfigBudgetID(key, w))
	if !ok {
		t.Fatal("the catalog's budget is not in the book")
	}
	ctx, now := t.Context(), b.clock.Now()
	var err error
	if n := testing.AllocsPerRun(100, func() { err = b.svc.ensureBudgetScope(ctx, budget, now) }); n != 0 || err != nil {
		t.Errorf("a set window's check: %v allocations, %v; want none", n, err)
	}
	if st := b.scope(t, budgetScopeOf(key, "month")); st.BudgetSpent != 30 {
		t.Errorf("spent %d after the checks, want the first request's 30", st.BudgetSpent)
	}
}

// recordingEngine keeps the last configuration SetScope gave each scope.
type recordingEngine struct {
	admission.Engine
	mu   sync.Mutex
	cfgs map[string]admission.ScopeConfig
}

func (r *recordingEngine) SetScope(ctx context.Context, name string, cfg admission.ScopeConfig) error {
	r.mu.Lock()
	if r.cfgs == nil {
		r.cfgs = make(map[string]admission.ScopeConfig)
	}
	r.cfgs[name] = cfg
	r.mu.Unlock()
	return r.Engine.SetScope(ctx, name, cfg)
}

func (r *recordingEngine) last(name string) admission.ScopeConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfgs[name]
}

// An admitted request's reservation is journaled with its estimate and
// whom it counts against; an unbudgeted one's is not.
func TestBudgetReservationJournaled(t *testing.T) {
	t.Parallel()
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	j := &recordedJournal{}
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("b1", key, 1_000, weir.BudgetHard)), journal: j})
	if err := b.svc.Serve(t.Context(), b.budgetCall(t, "r1", 50, 10, 20), &recordedAnswer{}); err != nil {
		t.Fatal(err)
	}
	want := weir.Reservation{RequestID: "r1", KeyID: "key_1", Group: "default", Model: "m", PlatformModel: "up/m", Estimate: 60, At: b.clock.Now()}
	if len(j.rs) != 1 || j.rs[0] != want {
		t.Errorf("journaled %+v, want %+v", j.rs, want)
	}
}

type recordedJournal struct {
	mu sync.Mutex
	rs []weir.Reservation
}

func (j *recordedJournal) Reserve(r weir.Reservation) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rs = append(j.rs, r)
}

// A task that ended has a usage record of what it cost, as its budgets
// counted it, in its key's group; one that never ran has none.
func TestTaskUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: func(c *weir.Catalog) {
		videoCatalog(c)
		c.PlatformModels[len(c.PlatformModels)-1].Price = weir.Price{Second: weir.MoneyScale / 10}
	}})
	ctx := t.Context()
	if err := b.store.KeyCreate(ctx, weir.APIKey{ID: "key_v", Hash: "hash_v", Group: "gold", CreatedAt: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	tk := weir.Task{ID: "task_1", KeyID: "key_v", Model: "v", PlatformModel: "up/v", Input: []byte(`{"seconds":"8"}`),
		Status: weir.TaskSucceeded, CreatedAt: now, AdmittedAt: now.Add(time.Second), FinishedAt: now.Add(time.Minute)}
	u, ok := b.svc.TaskUsage(tk)
	want := weir.Usage{RequestID: "task_1", KeyID: "key_v", Group: "gold", Model: "v", PlatformModel: "up/v", Endpoint: "tasks",
		Outcome: "succeeded", Cost: 8 * weir.MoneyScale / 10, Waited: time.Second, Latency: 59 * time.Second, At: tk.FinishedAt}
	if !ok || u != want {
		t.Errorf("usage %+v, %v; want %+v", u, ok, want)
	}
	tk.AdmittedAt, tk.PlatformModel, tk.Status = time.Time{}, "", weir.TaskExpired
	if u, ok := b.svc.TaskUsage(tk); ok {
		t.Errorf("a task that never ran: usage %+v", u)
	}
}

// BenchmarkPrepareBudgets measures what every budgeted request does
// before it queues, with a budget on its key, group and model, from
// parallel goroutines (the windows set, as after a window's first
// request):
//
//	go test -run '^$' -bench PrepareBudgets -benchmem -cpu 1,2 ./gateway/
func BenchmarkPrepareBudgets(b *testing.B) {
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	group := weir.BudgetSubject{Type: "group", Name: "default"}
	model := weir.BudgetSubject{Type: "model", Name: "m"}
	bundle := setup(b, setupOpts{catalog: budgeted(monthBudget("k", key, 1e12, weir.BudgetHard),
		monthBudget("g", group, 1e12, weir.BudgetHard), monthBudget("m", model, 1e12, weir.BudgetHard))})
	ctx := b.Context()
	if _, err := bundle.svc.prepareBudgets(ctx, "key_1", "default", "m", "", []string{"up/m"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := bundle.svc.prepareBudgets(ctx, "key_1", "default", "m", "", []string{"up/m"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
