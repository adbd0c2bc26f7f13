package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// End users: a usage record and a reservation keep the end user their
// request named (Usage.EndUser, "" none), and SpendSum and SpendReport
// count spend by end user as by the other subjects. A report by end user
// leaves out the requests that named none; a sum of "user:*" (every end
// user apart, no one end user) is weir.ErrInvalid, and so is a record
// whose end user ValidateEndUser refuses. A budget's subject may be an
// end user, or every end user ("user:*").

func testSpendByEndUser(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	rec := func(i int, user string, at time.Time) weir.Usage {
		u := newUsage(i, a.ID, at)
		u.EndUser, u.Cost = user, weir.MoneyScale*weir.Money(i)
		return u
	}
	us := []weir.Usage{rec(1, "alice", base), rec(2, "bob", base.Add(time.Minute)), rec(3, "alice", base.Add(2*time.Minute)),
		rec(4, "", base.Add(3*time.Minute)), rec(5, "ünï cødé/ü", base.Add(4*time.Minute))}
	if err := s.UsageInsert(t.Context(), us); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	got := usageOf(t, s)
	for _, u := range us {
		if g := got[u.RequestID]; len(g) != 1 || g[0].EndUser != u.EndUser {
			t.Errorf("record of %s = %+v; want end user %q", u.RequestID, g, u.EndUser)
		}
	}
	from, until := base, base.Add(time.Hour)
	for user, want := range map[string]weir.Money{"alice": 4 * weir.MoneyScale, "bob": 2 * weir.MoneyScale, "ünï cødé/ü": 5 * weir.MoneyScale, "carol": 0} {
		f := weir.SpendFilter{Subject: weir.BudgetSubject{Type: "user", Name: user}, From: from, Until: until}
		if m, err := s.SpendSum(t.Context(), f); err != nil || m != want {
			t.Errorf("SpendSum(user:%s) = %s, %v; want %s", user, m, err, want)
		}
	}
	// The window holds alice's first request alone.
	f := weir.SpendFilter{Subject: weir.BudgetSubject{Type: "user", Name: "alice"}, From: base, Until: base.Add(time.Minute)}
	if m, err := s.SpendSum(t.Context(), f); err != nil || m != weir.MoneyScale {
		t.Errorf("SpendSum(user:alice) in its first minute = %s, %v; want 1", m, err)
	}
	rows, err := s.SpendReport(t.Context(), weir.SpendReportFilter{By: "user", From: from, Until: until})
	if err != nil {
		t.Fatalf("SpendReport by user: %v", err)
	}
	var subjects []string
	for _, r := range rows {
		subjects = append(subjects, r.Subject)
	}
	if want := "alice,bob,ünï cødé/ü"; strings.Join(subjects, ",") != want || rows[0].Requests != 2 || rows[0].Cost != 4*weir.MoneyScale {
		t.Errorf("SpendReport by user = %+v; want end users %s (no row for the request that named none), alice's 2 requests costing 4", rows, want)
	}
	every := weir.SpendFilter{Subject: weir.BudgetSubject{Type: "user", Name: weir.EveryEndUser}, From: from, Until: until}
	if _, err := s.SpendSum(t.Context(), every); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("SpendSum(user:*) = %v; want ErrInvalid", err)
	}
	for _, bad := range []string{strings.Repeat("u", weir.MaxEndUserBytes+1), "a\nb", "\xff"} {
		u := newUsage(9, a.ID, base)
		u.EndUser = bad
		if err := s.UsageInsert(t.Context(), []weir.Usage{u}); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("UsageInsert of end user %q = %v; want ErrInvalid", bad, err)
		}
	}
	long := newUsage(10, a.ID, base)
	long.EndUser = strings.Repeat("ü", weir.MaxEndUserBytes/2)
	if err := s.UsageInsert(t.Context(), []weir.Usage{long}); err != nil {
		t.Fatalf("UsageInsert of a %d-byte end user: %v", len(long.EndUser), err)
	}
	if g := usageOf(t, s)[long.RequestID]; len(g) != 1 || g[0].EndUser != long.EndUser {
		t.Errorf("the longest end user came back as %+v", g)
	}
}

func testRecoverKeepsEndUser(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	r := newReservation(4, a.ID, base)
	r.EndUser = "alice"
	mustReserve(t, s, r)
	if n := recoverAll(t, s); n != 1 {
		t.Fatalf("recovered %d reservations, want 1", n)
	}
	if got := usageOf(t, s)[r.RequestID]; len(got) != 1 || got[0].EndUser != "alice" {
		t.Errorf("recovered record = %+v; want end user alice", got)
	}
	f := weir.SpendFilter{Subject: weir.BudgetSubject{Type: "user", Name: "alice"}, From: base, Until: base.Add(time.Microsecond)}
	if m, err := s.SpendSum(t.Context(), f); err != nil || m != r.Estimate {
		t.Errorf("SpendSum(user:alice) = %s, %v; want the recovered estimate %s", m, err, r.Estimate)
	}
	bad := newReservation(5, a.ID, base)
	bad.EndUser = "a\x00b"
	if err := s.SpendReserve(t.Context(), []weir.Reservation{bad}); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("SpendReserve of end user %q = %v; want ErrInvalid", bad.EndUser, err)
	}
}

func testBudgetOfEndUsers(t *testing.T, s budgetStore) {
	every := newBudget("bgt_1", "user", weir.EveryEndUser, base)
	alice := newBudget("bgt_2", "user", "alice", base)
	mustCreateBudgets(t, s, every, alice)
	checkBudgets(t, "budgets of end users", listBudgets(t, s, weir.BudgetFilter{}), every, alice)
	checkBudgets(t, "user:* alone", listBudgets(t, s, weir.BudgetFilter{Subject: every.Subject}), every)
	bad := newBudget("bgt_3", "user", "a\tb", base)
	if err := s.BudgetCreate(t.Context(), bad); !errors.Is(err, weir.ErrInvalid) {
		t.Errorf("BudgetCreate(user:%q) = %v; want ErrInvalid", bad.Subject.Name, err)
	}
}
