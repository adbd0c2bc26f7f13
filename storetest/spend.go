package storetest

import (
	"errors"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

type spendStore = interface {
	weir.Store
	weir.SpendStore
	io.Closer
}

// ExerciseSpend runs the SpendStore contract as numbered subtests, in
// parallel, each on a new, empty store from newStore, which it closes
// when the subtest ends.
//
// SpendSum sums the cost of the subject's usage records (a key's by
// KeyID, a group's by Group, a model's by Model, a platform model's by
// PlatformModel) with From <= At < Until; none is 0. SpendReport sums
// records in the same window by subject and bucket: the bucket's start
// in UTC (the hour, the day, the Monday of the week, the first of the
// month), or From without a bucket; rows come by bucket, then subject in
// byte order, with their requests, prompt and completion tokens, cost,
// and the records whose cost is estimated. Sums of cost saturate at the
// largest Money rather than fail. A filter that fails Validate is
// weir.ErrInvalid.
func ExerciseSpend(t *testing.T, newStore func(t *testing.T) interface {
	weir.Store
	weir.SpendStore
	io.Closer
}) {
	t.Helper()
	runSubtests(t, newStore, []subtest[spendStore]{
		{"01_SpendSumBySubject", testSpendSum},
		{"02_SpendSumSaturates", testSpendSaturates},
		{"03_SpendReportBuckets", testSpendReport},
		{"04_SpendInvalidFilter", testSpendInvalid},
		{"05_SpendByEndUser", testSpendByEndUser},
	})
}

// spendRecords stores four requests of keys a and b over two days of one
// week (base is a Sunday), the next Monday and the next month, and
// returns them.
func spendRecords(t *testing.T, s spendStore) []weir.Usage {
	t.Helper()
	a, b := newKey(1), newKey(2)
	mustCreate(t, s, a, b)
	rec := func(i int, key, group, model, pm string, at time.Time, cost string, estimated bool) weir.Usage {
		u := newUsage(i, key, at)
		u.Group, u.Model, u.PlatformModel, u.CostEstimated = group, model, pm, estimated
		var err error
		if u.Cost, err = weir.ParseMoney(cost); err != nil {
			t.Fatal(err)
		}
		return u
	}
	us := []weir.Usage{
		rec(1, a.ID, "g1", "m1", "p1", base, "1.50", false),
		rec(2, b.ID, "g1", "m2", "p2", base.Add(time.Hour), "2.25", true),
		rec(3, a.ID, "g2", "m1", "p1", base.Add(24*time.Hour), "0.000000001", false),
		rec(4, a.ID, "g1", "m1", "p2", base.Add(31*24*time.Hour), "10", false),
	}
	if err := s.UsageInsert(t.Context(), us); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	return us
}

func testSpendSum(t *testing.T, s spendStore) {
	us := spendRecords(t, s)
	a, b := us[0].KeyID, us[1].KeyID
	day := base.Add(-time.Hour)
	for _, tc := range []struct {
		typ, name   string
		from, until time.Time
		want        string
	}{
		{"key", a, day, day.Add(48 * time.Hour), "1.500000001"},
		{"key", b, day, day.Add(48 * time.Hour), "2.25"},
		{"key", a, day, day.Add(60 * 24 * time.Hour), "11.500000001"},
		{"group", "g1", day, day.Add(60 * 24 * time.Hour), "13.75"},
		{"model", "m1", day, day.Add(48 * time.Hour), "1.500000001"},
		{"platform_model", "p2", day, day.Add(60 * 24 * time.Hour), "12.25"},
		{"key", "key-nope", day, day.Add(48 * time.Hour), "0.00"},
		// From is in the window, Until is not.
		{"key", a, us[0].At, us[2].At, "1.50"},
		{"key", a, us[0].At.Add(time.Microsecond), us[2].At.Add(time.Microsecond), "0.000000001"},
	} {
		got, err := s.SpendSum(t.Context(), weir.SpendFilter{Subject: weir.BudgetSubject{Type: tc.typ, Name: tc.name},
			From: tc.from, Until: tc.until})
		if err != nil || got.String() != tc.want {
			t.Errorf("SpendSum(%s %s, %v, %v) = %s, %v; want %s", tc.typ, tc.name, tc.from, tc.until, got, err, tc.want)
		}
	}
}

func testSpendSaturates(t *testing.T, s spendStore) {
	k := newKey(1)
	mustCreate(t, s, k)
	var batch []weir.Usage
	for i := range 3 {
		u := newUsage(i, k.ID, base)
		u.Cost = math.MaxInt64
		batch = append(batch, u)
	}
	if err := s.UsageInsert(t.Context(), batch); err != nil {
		t.Fatalf("UsageInsert: %v", err)
	}
	got, err := s.SpendSum(t.Context(), weir.SpendFilter{Subject: weir.BudgetSubject{Type: "key", Name: k.ID},
		From: base, Until: base.Add(time.Second)})
	if err != nil || got != math.MaxInt64 {
		t.Errorf("SpendSum of three saturated costs = %d, %v; want the largest Money", got, err)
	}
	rows, err := s.SpendReport(t.Context(), weir.SpendReportFilter{By: "key", From: base, Until: base.Add(time.Second)})
	if err != nil || len(rows) != 1 || rows[0].Cost != math.MaxInt64 {
		t.Errorf("SpendReport of three saturated costs = %+v, %v; want one row at the largest Money", rows, err)
	}
}

func testSpendReport(t *testing.T, s spendStore) {
	us := spendRecords(t, s)
	a, b := us[0].KeyID, us[1].KeyID
	tokens := func(is ...int) (n int64) {
		for _, i := range is {
			n += us[i].PromptTokens + us[i].CompletionTokens
		}
		return n
	}
	money := func(s string) weir.Money { m, _ := weir.ParseMoney(s); return m }
	utc := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
	from, until := utc(2026, 2, 1, 0), utc(2026, 5, 1, 0)
	for _, tc := range []struct {
		by, bucket string
		want       []weir.SpendRow
	}{
		{"key", "", []weir.SpendRow{
			{Subject: a, Bucket: from, Requests: 3, Tokens: tokens(0, 2, 3), Cost: money("11.500000001")},
			{Subject: b, Bucket: from, Requests: 1, Tokens: tokens(1), Cost: money("2.25"), Estimated: 1},
		}},
		{"group", "day", []weir.SpendRow{
			{Subject: "g1", Bucket: utc(2026, 3, 1, 0), Requests: 2, Tokens: tokens(0, 1), Cost: money("3.75"), Estimated: 1},
			{Subject: "g2", Bucket: utc(2026, 3, 2, 0), Requests: 1, Tokens: tokens(2), Cost: 1},
			{Subject: "g1", Bucket: utc(2026, 4, 1, 0), Requests: 1, Tokens: tokens(3), Cost: money("10")},
		}},
		{"model", "week", []weir.SpendRow{
			{Subject: "m1", Bucket: utc(2026, 2, 23, 0), Requests: 1, Tokens: tokens(0), Cost: money("1.50")},
			{Subject: "m2", Bucket: utc(2026, 2, 23, 0), Requests: 1, Tokens: tokens(1), Cost: money("2.25"), Estimated: 1},
			{Subject: "m1", Bucket: utc(2026, 3, 2, 0), Requests: 1, Tokens: tokens(2), Cost: 1},
			{Subject: "m1", Bucket: utc(2026, 3, 30, 0), Requests: 1, Tokens: tokens(3), Cost: money("10")},
		}},
		{"platform_model", "month", []weir.SpendRow{
			{Subject: "p1", Bucket: utc(2026, 3, 1, 0), Requests: 2, Tokens: tokens(0, 2), Cost: money("1.500000001")},
			{Subject: "p2", Bucket: utc(2026, 3, 1, 0), Requests: 1, Tokens: tokens(1), Cost: money("2.25"), Estimated: 1},
			{Subject: "p2", Bucket: utc(2026, 4, 1, 0), Requests: 1, Tokens: tokens(3), Cost: money("10")},
		}},
		{"key", "hour", []weir.SpendRow{
			{Subject: a, Bucket: utc(2026, 3, 1, 11), Requests: 1, Tokens: tokens(0), Cost: money("1.50")},
			{Subject: b, Bucket: utc(2026, 3, 1, 12), Requests: 1, Tokens: tokens(1), Cost: money("2.25"), Estimated: 1},
			{Subject: a, Bucket: utc(2026, 3, 2, 11), Requests: 1, Tokens: tokens(2), Cost: 1},
			{Subject: a, Bucket: utc(2026, 4, 1, 11), Requests: 1, Tokens: tokens(3), Cost: money("10")},
		}},
	} {
		got, err := s.SpendReport(t.Context(), weir.SpendReportFilter{By: tc.by, Bucket: tc.bucket, From: from, Until: until})
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SpendReport by %s, bucket %q = %v\n%+v\nwant %+v", tc.by, tc.bucket, err, got, tc.want)
		}
	}
	got, err := s.SpendReport(t.Context(), weir.SpendReportFilter{By: "key", From: us[2].At, Until: us[3].At})
	if err != nil || len(got) != 1 || got[0].Cost != 1 || !got[0].Bucket.Equal(stored(us[2].At)) {
		t.Errorf("SpendReport from one record until another = %+v, %v; want the first alone", got, err)
	}
}

func testSpendInvalid(t *testing.T, s spendStore) {
	now := base
	for _, f := range []weir.SpendFilter{
		{Subject: weir.BudgetSubject{Type: "customer", Name: "x"}, From: now, Until: now.Add(time.Hour)},
		{Subject: weir.BudgetSubject{Type: "key"}, From: now, Until: now.Add(time.Hour)},
		{Subject: weir.BudgetSubject{Type: "key", Name: "k"}, Until: now.Add(time.Hour)},
		{Subject: weir.BudgetSubject{Type: "key", Name: "k"}, From: now, Until: now},
	} {
		if _, err := s.SpendSum(t.Context(), f); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("SpendSum(%+v): %v, want ErrInvalid", f, err)
		}
	}
	for _, f := range []weir.SpendReportFilter{
		{By: "customer", From: now, Until: now.Add(time.Hour)},
		{By: "key", Bucket: "year", From: now, Until: now.Add(time.Hour)},
		{By: "key", From: now.Add(time.Hour), Until: now},
	} {
		if _, err := s.SpendReport(t.Context(), f); !errors.Is(err, weir.ErrInvalid) {
			t.Errorf("SpendReport(%+v): %v, want ErrInvalid", f, err)
		}
	}
}
