package storetest

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// ExerciseSpendJournal runs the contract of the spend journal
// (Store.SpendReserve, Store.SpendRecover, and the settling of
// reservations by Store.UsageInsert) as numbered subtests, in parallel,
// each on a new, empty store from newStore, which it closes when the
// subtest ends.
//
// SpendReserve stores the whole batch or nothing; a reservation that
// fails Validate, or names a key that does not exist, makes it fail with
// weir.ErrInvalid. A reservation whose request is journaled already (or
// earlier in the batch) is skipped and the first kept; so is one whose
// request has a usage record. A reservation is not spend: SpendSum
// counts none. UsageInsert deletes the reservations of its batch's
// requests in its transaction.
//
// SpendRecover takes up to Limit reservations whose At is before Before
// (both at the stored microsecond), oldest first (by At, then request
// id), deletes them, and returns how many it deleted. Each becomes a
// usage record: its request, key, group, model and platform model, no
// endpoint or tokens, status 0, outcome weir.OutcomeInterrupted, Cost its
// Estimate, CostEstimated, and At the reservation's — so it counts in
// SpendSum and SpendReport in the window it was reserved in. A usage
// record of the same request stored already wins and is not counted
// twice, and so does one a concurrent UsageInsert stores: whichever
// commits first is the request's only record. Parameters that fail
// Validate are weir.ErrInvalid.
func ExerciseSpendJournal(t *testing.T, newStore func(t *testing.T) interface {
	weir.Store
	weir.SpendStore
	io.Closer
}) {
	t.Helper()
	runSubtests(t, newStore, []subtest[spendStore]{
		{"01_ReserveIsNotSpend", testReserveIsNotSpend},
		{"02_UsageSettlesReservation", testUsageSettles},
		{"03_ReserveKeepsTheFirst", testReserveKeepsFirst},
		{"04_ReserveAfterUsageIsSkipped", testReserveAfterUsage},
		{"05_ReserveInvalid", testReserveInvalid},
		{"06_RecoverCountsTheEstimate", testRecoverCountsEstimate},
		{"07_RecoverBeforeAndLimit", testRecoverBeforeAndLimit},
		{"08_RecoverRacesUsage", testRecoverRacesUsage},
		{"09_RecoverInvalid", testRecoverInvalid},
		{"10_RecoverKeepsEndUser", testRecoverKeepsEndUser},
	})
}

// newReservation is request i's reservation, the same request as
// newUsage(i, ...): estimate i+1 units, at at.
func newReservation(i int, keyID string, at time.Time) weir.Reservation {
	return weir.Reservation{
		RequestID:     fmt.Sprintf("req-%05d", i),
		KeyID:         keyID,
		Group:         fmt.Sprintf("group-%d", i%3),
		Model:         "gpt-4o",
		PlatformModel: "openai-main/gpt-4o",
		Estimate:      weir.MoneyScale * weir.Money(i+1),
		At:            at,
	}
}

func mustReserve(t *testing.T, s weir.Store, batch ...weir.Reservation) {
	t.Helper()
	if err := s.SpendReserve(t.Context(), batch); err != nil {
		t.Fatalf("SpendReserve: %v", err)
	}
}

func mustRecover(t *testing.T, s weir.Store, before time.Time, limit int) int {
	t.Helper()
	n, err := s.SpendRecover(t.Context(), &weir.SpendRecoverParams{Before: before, Limit: limit})
	if err != nil {
		t.Fatalf("SpendRecover(before %v, limit %d): %v", before, limit, err)
	}
	return n
}

// recoverAll recovers every reservation and returns how many there were.
func recoverAll(t *testing.T, s weir.Store) int {
	t.Helper()
	return mustRecover(t, s, base.Add(1000*time.Hour), 1000)
}

// keySpend is key's spend over a wide window around base.
func keySpend(t *testing.T, s spendStore, key string) weir.Money {
	t.Helper()
	m, err := s.SpendSum(t.Context(), weir.SpendFilter{Subject: weir.BudgetSubject{Type: "key", Name: key},
		From: base.Add(-1000 * time.Hour), Until: base.Add(1000 * time.Hour)})
	if err != nil {
		t.Fatalf("SpendSum: %v", err)
	}
	return m
}

// usageOf returns the usage records of each request, by request id.
func usageOf(t *testing.T, s weir.Store) map[string][]weir.Usage {
	t.Helper()
	list, err := s.UsageList(t.Context(), weir.UsageFilter{})
	if err != nil {
		t.Fatalf("UsageList: %v", err)
	}
	by := make(map[string][]weir.Usage)
	for _, u := range list {
		by[u.RequestID] = append(by[u.RequestID], u)
	}
	return by
}

func testReserveIsNotSpend(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	mustReserve(t, s, newReservation(1, a.ID, base), newReservation(2, a.ID, base.Add(time.Minute)))
	if got := keySpend(t, s, a.ID); got != 0 {
		t.Errorf("spend with two reservations and no usage = %s, want 0", got)
	}
	if got := len(usageOf(t, s)); got != 0 {
		t.Errorf("%d usage records after reserving, want none", got)
	}
	mustReserve(t, s) // an empty batch is a no-op
}

func testUsageSettles(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	mustReserve(t, s, newReservation(1, a.ID, base), newReservation(2, a.ID, base))
	u := newUsage(1, a.ID, base.Add(time.Second))
	if err := s.UsageInsert(t.Context(), []weir.Usage{u}); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	if got := keySpend(t, s, a.ID); got != u.Cost {
		t.Errorf("spend after one request's usage = %s, want its cost %s", got, u.Cost)
	}
	// Only request 2's reservation is left: request 1's usage settled it.
	if n := recoverAll(t, s); n != 1 {
		t.Errorf("recovered %d reservations after one was settled, want 1", n)
	}
	by := usageOf(t, s)
	if got := by[u.RequestID]; len(got) != 1 || got[0].Cost != u.Cost || got[0].Outcome != u.Outcome {
		t.Errorf("request 1's records after recovery = %+v, want its one usage record", got)
	}
	r2 := newReservation(2, a.ID, base)
	if want := u.Cost + r2.Estimate; keySpend(t, s, a.ID) != want {
		t.Errorf("spend after recovery = %s, want the usage's cost and the estimate, %s", keySpend(t, s, a.ID), want)
	}
	if n := recoverAll(t, s); n != 0 {
		t.Errorf("a second recovery found %d reservations, want none", n)
	}
}

func testReserveKeepsFirst(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	first := newReservation(1, a.ID, base)
	again := first
	again.Estimate, again.At = 99*weir.MoneyScale, base.Add(time.Hour)
	mustReserve(t, s, first, again)
	mustReserve(t, s, again)
	if n := recoverAll(t, s); n != 1 {
		t.Fatalf("recovered %d reservations of one request, want 1", n)
	}
	got := usageOf(t, s)[first.RequestID]
	if len(got) != 1 || got[0].Cost != first.Estimate || !got[0].At.Equal(stored(first.At)) {
		t.Errorf("recovered %+v, want one record at the first reservation's estimate %s and time %v",
			got, first.Estimate, stored(first.At))
	}
}

func testReserveAfterUsage(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	u := newUsage(1, a.ID, base)
	if err := s.UsageInsert(t.Context(), []weir.Usage{u}); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	mustReserve(t, s, newReservation(1, a.ID, base), newReservation(2, a.ID, base))
	if n := recoverAll(t, s); n != 1 {
		t.Errorf("recovered %d reservations, want 1: a request with usage needs none", n)
	}
	if got := usageOf(t, s)[u.RequestID]; len(got) != 1 || got[0].Cost != u.Cost {
		t.Errorf("request 1's records = %+v, want its one usage record", got)
	}
}

func testReserveInvalid(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	good := newReservation(1, a.ID, base)
	for _, tc := range []struct {
		what string
		edit func(*weir.Reservation)
	}{
		{"no request id", func(r *weir.Reservation) { r.RequestID = "" }},
		{"no key id", func(r *weir.Reservation) { r.KeyID = "" }},
		{"no time", func(r *weir.Reservation) { r.At = time.Time{} }},
		{"a negative estimate", func(r *weir.Reservation) { r.Estimate = -1 }},
		{"an unknown key", func(r *weir.Reservation) { r.KeyID = "key-none" }},
	} {
		bad := newReservation(2, a.ID, base)
		tc.edit(&bad)
		if err := s.SpendReserve(t.Context(), []weir.Reservation{good, bad}); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("a reservation with %s: %v, want ErrInvalid", tc.what, err)
		}
	}
	if n := recoverAll(t, s); n != 0 {
		t.Errorf("recovered %d reservations after only refused batches, want none", n)
	}
}

func testRecoverCountsEstimate(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	r := newReservation(4, a.ID, base)
	r.Group, r.Model, r.PlatformModel = "team-a", "m1", "p1"
	mustReserve(t, s, r)
	if n := mustRecover(t, s, base.Add(time.Minute), 10); n != 1 {
		t.Fatalf("recovered %d reservations, want 1", n)
	}
	got := usageOf(t, s)[r.RequestID]
	want := weir.Usage{RequestID: r.RequestID, KeyID: a.ID, Group: "team-a", Model: "m1", PlatformModel: "p1",
		Cost: r.Estimate, CostEstimated: true, Outcome: weir.OutcomeInterrupted, At: stored(r.At)}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("recovered records = %+v, want [%+v]", got, want)
	}
	for _, subject := range []weir.BudgetSubject{{Type: "key", Name: a.ID}, {Type: "group", Name: "team-a"},
		{Type: "model", Name: "m1"}, {Type: "platform_model", Name: "p1"}} {
		// The window of the reservation's time alone counts it.
		f := weir.SpendFilter{Subject: subject, From: base, Until: base.Add(time.Microsecond)}
		if m, err := s.SpendSum(t.Context(), f); err != nil || m != r.Estimate {
			t.Errorf("SpendSum(%v) at the reservation's time = %s, %v; want the estimate %s", subject, m, err, r.Estimate)
		}
	}
	rows, err := s.SpendReport(t.Context(), weir.SpendReportFilter{By: "group", From: base, Until: base.Add(time.Hour)})
	if err != nil {
		t.Fatalf("SpendReport: %v", err)
	}
	if len(rows) != 1 || rows[0].Cost != r.Estimate || rows[0].Estimated != 1 || rows[0].Requests != 1 {
		t.Errorf("SpendReport = %+v, want one request of cost %s, estimated", rows, r.Estimate)
	}
}

func testRecoverBeforeAndLimit(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	// Five reservations a minute apart, given out of order; requests 3
	// and 4 share a time, and go by request id.
	at := []time.Duration{4 * time.Minute, 0, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute}
	var batch []weir.Reservation
	for i, d := range at {
		batch = append(batch, newReservation(i, a.ID, base.Add(d)))
	}
	mustReserve(t, s, batch...)
	if n := mustRecover(t, s, base, 10); n != 0 {
		t.Errorf("recovered %d reservations before the first one's time, want none: Before is exclusive", n)
	}
	if n := mustRecover(t, s, base.Add(3*time.Minute), 10); n != 2 {
		t.Errorf("recovered %d reservations made before the third minute, want 2", n)
	}
	if n := mustRecover(t, s, base.Add(time.Hour), 1); n != 1 {
		t.Errorf("recovered %d reservations with a limit of 1, want 1", n)
	}
	by := usageOf(t, s)
	for _, id := range []string{"req-00001", "req-00002", "req-00003"} {
		if len(by[id]) != 1 {
			t.Errorf("%s has %d records, want 1: recovery goes oldest first, then by request id", id, len(by[id]))
		}
	}
	if n := mustRecover(t, s, base.Add(time.Hour), 5); n != 2 {
		t.Errorf("the last recovery counted %d, want the 2 left", n)
	}
	var want weir.Money
	for _, r := range batch {
		want += r.Estimate
	}
	if got := keySpend(t, s, a.ID); got != want {
		t.Errorf("spend after recovering all = %s, want the estimates' sum %s", got, want)
	}
}

// testRecoverRacesUsage settles and recovers the same requests at once:
// each ends with one usage record, its real cost or its estimate, and
// no reservation is left.
func testRecoverRacesUsage(t *testing.T, s spendStore) {
	a := newKey(1)
	mustCreate(t, s, a)
	const n = 200
	var (
		reservations []weir.Reservation
		records      []weir.Usage
	)
	for i := range n {
		reservations = append(reservations, newReservation(i, a.ID, base.Add(time.Duration(i)*time.Millisecond)))
		u := newUsage(i, a.ID, base.Add(time.Second))
		u.Cost = weir.Money(i + 1) // never an estimate's, so the sum says which won
		records = append(records, u)
	}
	mustReserve(t, s, reservations...)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	// The inserts go newest first, the recoveries oldest first: they
	// meet on requests in between.
	wg.Go(func() {
		for i := n; i > 0; i -= 4 {
			if err := s.UsageInsert(t.Context(), records[max(i-4, 0):i]); err != nil {
				errs <- err
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for {
				got, err := s.SpendRecover(t.Context(), &weir.SpendRecoverParams{Before: base.Add(time.Hour), Limit: 2})
				if err != nil {
					errs <- err
					return
				}
				if got == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("settling and recovering at once: %v", err)
	}
	// What the recoveries may have missed while the inserts ran.
	recoverAll(t, s)
	by := usageOf(t, s)
	var want weir.Money
	for i := range n {
		got := by[records[i].RequestID]
		if len(got) != 1 {
			t.Fatalf("%s has %d usage records, want 1", records[i].RequestID, len(got))
		}
		switch got[0].Cost {
		case records[i].Cost, reservations[i].Estimate:
		default:
			t.Errorf("%s cost %s, want its usage's %s or its estimate %s", records[i].RequestID, got[0].Cost,
				records[i].Cost, reservations[i].Estimate)
		}
		want += got[0].Cost
	}
	if got := keySpend(t, s, a.ID); got != want {
		t.Errorf("spend = %s, want each request once, %s", got, want)
	}
	if left := recoverAll(t, s); left != 0 {
		t.Errorf("%d reservations left, want none", left)
	}
}

func testRecoverInvalid(t *testing.T, s spendStore) {
	for _, p := range []*weir.SpendRecoverParams{{Limit: 1}, {Before: base}, {Before: base, Limit: -1}} {
		if _, err := s.SpendRecover(t.Context(), p); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("SpendRecover(%+v): %v, want ErrInvalid", p, err)
		}
	}
}
