package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// TestUsagePlans checks that each query that reads usage_records searches
// the index meant for it, rather than scanning the table or a whole
// index: the table has a row per request.
func TestUsagePlans(t *testing.T) {
	t.Parallel()
	db := openTemp(t)
	defer db.Close()
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	listKey, listKeyArgs := usageListSQL(weir.UsageFilter{KeyID: "k", Since: since, Limit: 10})
	listAll, listAllArgs := usageListSQL(weir.UsageFilter{Since: since, Limit: 10})
	window := []any{"name", "2026-01-01T00:00:00.000000Z", "2026-02-01T00:00:00.000000Z"}
	for _, c := range []struct {
		name string
		sql  string
		args []any
		want string // the plan's line for usage_records
	}{
		{"spend of key", spendSumSQL("key"), window,
			"SEARCH usage_records USING INDEX usage_records_key_at (key_id=? AND at>? AND at<?)"},
		{"spend of group", spendSumSQL("group"), window,
			"SEARCH usage_records USING INDEX usage_records_group_at (group_name=? AND at>? AND at<?)"},
		{"spend of model", spendSumSQL("model"), window,
			"SEARCH usage_records USING INDEX usage_records_model_at (model=? AND at>? AND at<?)"},
		{"spend of platform model", spendSumSQL("platform_model"), window,
			"SEARCH usage_records USING INDEX usage_records_platform_model_at (platform_model=? AND at>? AND at<?)"},
		{"spend of end user", spendSumSQL("user"), window,
			"SEARCH usage_records USING INDEX usage_records_end_user_at (end_user=? AND at>? AND at<?)"},
		{"spend report by group", spendReportSQL("group", "day"), window[1:],
			"SEARCH usage_records USING INDEX usage_records_at (at>? AND at<?)"},
		{"spend report by end user", spendReportSQL("user", ""), window[1:],
			"SEARCH usage_records USING INDEX usage_records_at (at>? AND at<?)"},
		{"usage list of a key", listKey, listKeyArgs,
			"SEARCH usage_records USING INDEX usage_records_key_at (key_id=? AND at>?)"},
		{"usage list", listAll, listAllArgs,
			"SEARCH usage_records USING INDEX usage_records_at (at>?)"},
		{"usage by key", usageByKeySQL, window[1:2],
			"SEARCH usage_records USING INDEX usage_records_at (at>?)"},
		{"journal's record check", reservationInsertSQL(2), make([]any, 2*reservationColumnCount),
			"SEARCH u USING COVERING INDEX sqlite_autoindex_usage_records_1 (request_id=?)"},
	} {
		rows, err := db.write.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+c.sql, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s:\n\t%s", c.name, strings.Join(plan, "\n\t"))
		found := false
		for _, line := range plan {
			found = found || line == c.want
		}
		if !found {
			t.Errorf("%s: plan\n\t%s\nhas no %q", c.name, strings.Join(plan, "\n\t"), c.want)
		}
	}
}
