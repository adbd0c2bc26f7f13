package sqlite

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// BenchmarkUsageReads times each query that reads usage_records on a
// table of 10^5 rows over 30 days (10 keys, 4 models served by 2
// platform models each, half the rows in one of 3 groups and half
// naming one of 97 end users), and logs its plan (-v):
//
//	go test -run '^$' -bench UsageReads -v ./sqlite/
func BenchmarkUsageReads(b *testing.B) {
	db := openTemp(b)
	b.Cleanup(func() { db.Close() })
	const rows = 100_000
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := 30 * 24 * time.Hour / rows
	fillUsage(b, db, rows, start, step)
	day := []any{formatTime(start.Add(14 * 24 * time.Hour)), formatTime(start.Add(15 * 24 * time.Hour))}
	month := []any{formatTime(start), formatTime(start.Add(31 * 24 * time.Hour))}
	list, listArgs := usageListSQL(weir.UsageFilter{Since: start.Add(29 * 24 * time.Hour), Limit: 100})
	listKey, listKeyArgs := usageListSQL(weir.UsageFilter{KeyID: "key-3", Since: start, Limit: 100})
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"spend of key/day", spendSumSQL("key"), append([]any{"key-3"}, day...)},
		{"spend of group/day", spendSumSQL("group"), append([]any{"team-1"}, day...)},
		{"spend of model/day", spendSumSQL("model"), append([]any{"model-2"}, day...)},
		{"spend of model/month", spendSumSQL("model"), append([]any{"model-2"}, month...)},
		{"spend of platform model/day", spendSumSQL("platform_model"), append([]any{"pm-1/model-2"}, day...)},
		{"spend of platform model/month", spendSumSQL("platform_model"), append([]any{"pm-1/model-2"}, month...)},
		{"spend of end user/day", spendSumSQL("user"), append([]any{"user-5"}, day...)},
		{"spend report by model/day", spendReportSQL("model", "hour"), day},
		{"usage list", list, listArgs},
		{"usage list of a key", listKey, listKeyArgs},
		{"usage by key/day", usageByKeySQL, day[:1]},
	} {
		b.Run(strings.ReplaceAll(c.name, " ", "_"), func(b *testing.B) {
			b.Logf("%s:\n\t%s", c.name, strings.Join(queryPlan(b, db, c.sql, c.args), "\n\t"))
			for b.Loop() {
				rows, err := db.read.QueryContext(b.Context(), c.sql, c.args...)
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
				}
				if err := rows.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fillUsage writes n usage rows from start, one each step.
func fillUsage(b *testing.B, db *DB, n int, start time.Time, step time.Duration) {
	for i := range 10 {
		if err := db.KeyCreate(b.Context(), weir.APIKey{ID: fmt.Sprintf("key-%d", i), Hash: fmt.Sprintf("hash-%d", i), CreatedAt: start}); err != nil {
			b.Fatal(err)
		}
	}
	batch := make([]weir.Usage, 0, 128)
	for i := range n {
		model := "model-" + strconv.Itoa(i%4)
		u := weir.Usage{RequestID: "req_" + strconv.Itoa(i), KeyID: "key-" + strconv.Itoa(i%10),
			Model: model, PlatformModel: "pm-" + strconv.Itoa(i/4%2) + "/" + model, Endpoint: "/v1/chat/completions",
			PromptTokens: 100, CompletionTokens: 10, Status: 200, Outcome: "ok", Cost: 1000,
			At: start.Add(time.Duration(i) * step)}
		if i%2 == 0 {
			u.Group = "team-" + strconv.Itoa(i%3)
		}
		if i%4 < 2 {
			u.EndUser = "user-" + strconv.Itoa(i%97)
		}
		if batch = append(batch, u); len(batch) == cap(batch) || i == n-1 {
			if err := db.UsageInsert(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// queryPlan is EXPLAIN QUERY PLAN's lines for q.
func queryPlan(tb testing.TB, db *DB, q string, args []any) []string {
	tb.Helper()
	rows, err := db.read.QueryContext(tb.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			tb.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return plan
}
