package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/admission"
)

// everyEndUser is the subject of a budget of every end user apart.
var everyEndUser = weir.BudgetSubject{Type: "user", Name: weir.EveryEndUser}

// userCall is budgetCall naming end user user ("" none).
func (b *testBundle) userCall(t *testing.T, id, user string, prompt, completion int64) *Call {
	c := b.budgetCall(t, id, 50, prompt, completion)
	c.Usage.EndUser = user
	return c
}

// serveErr serves c and returns the *Error it ended in, nil if served.
func (b *testBundle) serveErr(t *testing.T, c *Call) *Error {
	t.Helper()
	err := b.svc.Serve(t.Context(), c, &recordedAnswer{})
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("request %s: %v, want an *Error", c.RequestID, err)
	}
	return e
}

// endUserScopeName is the scope of user's budget of the catalog's user:*
// budget over a month.
func endUserScopeName(user string) string {
	win, _ := weir.ParseWindow("month")
	return weir.BudgetScope(weir.EndUserBudgetID(weir.ConfigBudgetID(everyEndUser, win), user))
}

// A budget of every end user gives each its own window of its amount:
// once alice has spent hers she is refused, naming her, while bob, who
// has spent nothing, still passes, and a request that names no end user
// is not counted by it at all.
func TestEveryEndUserBudgetRefusesEachApart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("u", everyEndUser, 100, weir.BudgetHard))})
	if e := b.serveErr(t, b.userCall(t, "a1", "alice", 10, 95)); e != nil {
		t.Fatalf("alice's first request: %v", e)
	}
	e := b.serveErr(t, b.userCall(t, "a2", "alice", 10, 10))
	if e == nil || e.Category != ErrBudgetExceeded || !strings.Contains(e.Message, "user:alice") {
		t.Fatalf("alice's second request: %v; want budget_exceeded naming user:alice", e)
	}
	for i := range 3 {
		if e := b.serveErr(t, b.userCall(t, fmt.Sprintf("b%d", i), "bob", 10, 10)); e != nil {
			t.Fatalf("bob's request %d: %v", i, e)
		}
		if e := b.serveErr(t, b.userCall(t, fmt.Sprintf("n%d", i), "", 10, 95)); e != nil {
			t.Fatalf("a request of no end user %d: %v", i, e)
		}
	}
	if st := b.scope(t, endUserScopeName("alice")); st.BudgetSpent != 105 || st.BudgetReserved != 0 {
		t.Errorf("alice's budget spent %d, reserved %d; want 105, 0", st.BudgetSpent, st.BudgetReserved)
	}
	if st := b.scope(t, endUserScopeName("bob")); st.BudgetSpent != 60 {
		t.Errorf("bob's budget spent %d; want 60", st.BudgetSpent)
	}
	if got := b.svc.endUsers.len(); got != 2 {
		t.Errorf("%d end users' budgets set; want 2 (alice, bob: none for no end user)", got)
	}
}

// A budget of one named end user counts and refuses that end user alone.
func TestNamedEndUserBudget(t *testing.T) {
	t.Parallel()
	alice := weir.BudgetSubject{Type: "user", Name: "alice"}
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("a", alice, 100, weir.BudgetHard))})
	if e := b.serveErr(t, b.userCall(t, "a1", "alice", 10, 95)); e != nil {
		t.Fatalf("alice's first request: %v", e)
	}
	if e := b.serveErr(t, b.userCall(t, "a2", "alice", 10, 10)); e == nil || e.Category != ErrBudgetExceeded {
		t.Fatalf("alice's second request: %v; want budget_exceeded", e)
	}
	for i := range 3 {
		if e := b.serveErr(t, b.userCall(t, fmt.Sprintf("b%d", i), "bob", 10, 95)); e != nil {
			t.Fatalf("bob's request %d: %v", i, e)
		}
	}
	if st := b.scope(t, budgetScopeOf(alice, "month")); st.BudgetSpent != 105 {
		t.Errorf("alice's budget spent %d; want 105 (hers alone)", st.BudgetSpent)
	}
	if got := b.svc.endUsers.len(); got != 0 {
		t.Errorf("%d end users' budgets of user:* set, with none in the catalog", got)
	}
}

// The end users' scopes are bounded: past MaxEndUserBudgets a new end
// user is refused (503, with a Retry-After) while every other has been
// seen within endUserIdle; once one has been idle that long, it is
// retired, its scope removed, and the new end user served.
func TestEndUserBudgetsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{MaxEndUserBudgets: 2},
		catalog: budgeted(monthBudget("u", everyEndUser, 1000, weir.BudgetHard))})
	for _, u := range []string{"u1", "u2"} {
		if e := b.serveErr(t, b.userCall(t, u, u, 10, 10)); e != nil {
			t.Fatalf("%s: %v", u, e)
		}
	}
	b.clock.Advance(endUserIdle / 2)
	if e := b.serveErr(t, b.userCall(t, "u2-again", "u2", 10, 10)); e != nil {
		t.Fatalf("u2, known, at the bound: %v", e)
	}
	e := b.serveErr(t, b.userCall(t, "u3", "u3", 10, 10))
	if e == nil || e.Category != ErrUnavailable || e.RetryAfter != endUserIdle/2 {
		t.Fatalf("u3 past the bound: %+v; want unavailable, Retry-After %s (when u1 is idle enough)", e, endUserIdle/2)
	}
	b.clock.Advance(endUserIdle / 2)
	if e := b.serveErr(t, b.userCall(t, "u3-again", "u3", 10, 10)); e != nil {
		t.Fatalf("u3 once u1 is idle: %v", e)
	}
	if _, err := b.engine.Scope(t.Context(), endUserScopeName("u1")); !errors.Is(err, admission.ErrUnknownScope) {
		t.Errorf("u1's scope after it was retired: %v; want it gone", err)
	}
	if st := b.scope(t, endUserScopeName("u3")); st.BudgetSpent != 20 {
		t.Errorf("u3's budget spent %d; want 20", st.BudgetSpent)
	}
	if got := b.svc.endUsers.len(); got != 2 {
		t.Errorf("%d end users' budgets set; want the bound, 2", got)
	}
}

// An end user whose request is in flight is never retired, however long
// it has held its scope.
func TestEndUserInFlightIsNotRetired(t *testing.T) {
	t.Parallel()
	var e endUserScopes
	now := time.Unix(1_000_000, 0)
	if _, _, _, ok := e.acquire("b/user:busy", now, 1); !ok {
		t.Fatal("the first end user was refused")
	}
	now = now.Add(10 * endUserIdle)
	if retire, _, _, ok := e.acquire("b/user:new", now, 1); ok || retire != "" {
		t.Fatalf("a new end user past the bound, the one there in flight: ok %v, retiring %q; want refused", ok, retire)
	}
	e.release("b/user:busy", now)
	now = now.Add(endUserIdle)
	retire, _, _, ok := e.acquire("b/user:new", now, 1)
	if !ok || retire != "b/user:busy" {
		t.Fatalf("once released and idle: ok %v, retiring %q; want b/user:busy retired", ok, retire)
	}
	if _, wait, _, ok := e.acquire("b/user:busy", now, 1); ok || wait == nil {
		t.Fatalf("an end user being retired: ok %v; want to wait for its retirement", ok)
	}
	e.retired("b/user:busy")
}

// A soft budget of every end user alerts for each end user apart, once
// per threshold: the event names the end user's own budget.
func TestEveryEndUserBudgetAlertsPerEndUser(t *testing.T) {
	t.Parallel()
	events := &recordedEvents{}
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("u", everyEndUser, 100, weir.BudgetSoft, 50)), events: events})
	if e := b.serveErr(t, b.userCall(t, "a1", "alice", 10, 50)); e != nil {
		t.Fatal(e)
	}
	got := events.wait(t, 1)
	b.clock.Advance(alertGap)
	if e := b.serveErr(t, b.userCall(t, "b1", "bob", 10, 50)); e != nil {
		t.Fatal(e)
	}
	got = events.wait(t, 2)
	for i, user := range []string{"alice", "bob"} {
		var a BudgetAlert
		if err := json.Unmarshal(got[i].Data, &a); err != nil || a.Subject != "user:"+user || a.Threshold != 50 ||
			a.Budget != strings.TrimPrefix(endUserScopeName(user), "budget:") {
			t.Errorf("event %d: %s (%v); want %s's budget at 50%%", i, got[i].Data, err, user)
		}
	}
}

// An end user's scope retired at the engine by another (a fleet's other
// replica) fails this process's next request of that end user once, and
// the one after sets the scope again.
func TestEndUserScopeRetiredElsewhereIsSetAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("u", everyEndUser, 1000, weir.BudgetHard))})
	if e := b.serveErr(t, b.userCall(t, "a1", "alice", 10, 10)); e != nil {
		t.Fatal(e)
	}
	if err := b.engine.RemoveScope(t.Context(), endUserScopeName("alice")); err != nil {
		t.Fatal(err)
	}
	if e := b.serveErr(t, b.userCall(t, "a2", "alice", 10, 10)); e == nil || e.Category != ErrNoCandidate {
		t.Fatalf("alice's request with her scope gone: %v; want no_candidate", e)
	}
	if e := b.serveErr(t, b.userCall(t, "a3", "alice", 10, 10)); e != nil {
		t.Fatalf("alice's next request: %v; want her scope set again", e)
	}
	if st := b.scope(t, endUserScopeName("alice")); st.BudgetSpent != 20 {
		t.Errorf("alice's budget spent %d; want the last request's 20", st.BudgetSpent)
	}
}

// BenchmarkPrepareEndUserBudgets measures what a request does before it
// queues with a budget on its key, group and model ("baseline"), and
// with a budget of every end user besides, over 1000 end users already
// seen ("every-end-user": the end user's scope found, held and let go):
//
//	go test -run '^$' -bench PrepareEndUserBudgets -benchmem -cpu 1,2 ./gateway/
func BenchmarkPrepareEndUserBudgets(b *testing.B) {
	key := weir.BudgetSubject{Type: "key", Name: "key_1"}
	group := weir.BudgetSubject{Type: "group", Name: "default"}
	model := weir.BudgetSubject{Type: "model", Name: "m"}
	tenant := []weir.Budget{monthBudget("k", key, 1e12, weir.BudgetHard),
		monthBudget("g", group, 1e12, weir.BudgetHard), monthBudget("m", model, 1e12, weir.BudgetHard)}
	users := make([]string, 1000)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
	}
	for _, bc := range []struct {
		name    string
		budgets []weir.Budget
	}{
		{"baseline", tenant},
		{"every-end-user", append(tenant[:3:3], monthBudget("u", everyEndUser, 1e12, weir.BudgetHard))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bundle := setup(b, setupOpts{catalog: budgeted(bc.budgets...)})
			ctx := b.Context()
			for _, u := range users {
				rb, err := bundle.svc.prepareBudgets(ctx, "key_1", "default", "m", u, []string{"up/m"})
				if err != nil {
					b.Fatal(err)
				}
				bundle.svc.releaseEndUsers(rb.common)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					rb, err := bundle.svc.prepareBudgets(ctx, "key_1", "default", "m", users[i%len(users)], []string{"up/m"})
					if err != nil {
						b.Fatal(err)
					}
					bundle.svc.releaseEndUsers(rb.common)
					i++
				}
			})
		})
	}
}

// A shadow budget of every end user refuses no end user, and counts in
// each end user's scope what it would have refused.
func TestEveryEndUserShadowBudgetRefusesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{catalog: budgeted(monthBudget("u", everyEndUser, 100, weir.BudgetShadow))})
	for i := range 4 {
		if e := b.serveErr(t, b.userCall(t, fmt.Sprintf("a%d", i), "alice", 10, 40)); e != nil {
			t.Fatalf("alice's request %d: %v", i, e)
		}
	}
	if st := b.scope(t, endUserScopeName("alice")); st.BudgetSpent != 200 || st.ShadowRefusals == 0 {
		t.Errorf("alice's shadow budget spent %d, would have refused %d; want 200 and some", st.BudgetSpent, st.ShadowRefusals)
	}
	if e := b.serveErr(t, b.userCall(t, "b0", "bob", 10, 40)); e != nil {
		t.Fatal(e)
	}
	if st := b.scope(t, endUserScopeName("bob")); st.BudgetSpent != 50 || st.ShadowRefusals != 0 {
		t.Errorf("bob's shadow budget spent %d, would have refused %d; want 50 and none", st.BudgetSpent, st.ShadowRefusals)
	}
}
