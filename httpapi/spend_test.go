package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

// TestAdminSpend: /admin/spend sums the stored usage by the subject and
// bucket asked for, in the window asked for, with amounts as decimal
// strings, behind the admin token.
func TestAdminSpend(t *testing.T) {
	t.Parallel()
	const token = "adm_spend"
	now := time.Date(2026, 3, 4, 15, 30, 0, 0, time.UTC) // a Wednesday
	b := setup(t, setupOpts{cfg: Config{AdminToken: token}, clock: clock.NewFake(now)})
	keyID := "key_spend"
	b.newKey(t, weir.APIKey{ID: keyID})
	var batch []weir.Usage
	for i, at := range []time.Time{now.Add(-time.Hour), now.Add(-26 * time.Hour), now.AddDate(0, -1, 0)} {
		batch = append(batch, weir.Usage{RequestID: "r" + string(rune('a'+i)), KeyID: keyID, Group: "team", Model: "m",
			PlatformModel: "up/m", Endpoint: "chat", PromptTokens: 10, CompletionTokens: 5, Cost: weir.Money(1_250_000_000 * (i + 1)),
			CostEstimated: i == 1, Status: 200, Outcome: "ok", At: at, EndUser: []string{"", "alice", ""}[i]})
	}
	if err := b.db.UsageInsert(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	get := func(query string) (*http.Response, []byte) {
		resp := b.getWith(t, "/admin/spend"+query, "Bearer "+token)
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	for _, tc := range []struct {
		query   string
		total   string
		rows    int
		buckets []string
	}{
		{"", "3.75", 1, []string{"2026-03-01T00:00:00Z"}},
		{"?by=group&window=day", "1.25", 1, []string{"2026-03-04T00:00:00Z"}},
		{"?by=model&window=week&bucket=day", "3.75", 2, []string{"2026-03-03T00:00:00Z", "2026-03-04T00:00:00Z"}},
		{"?by=platform_model&from=2026-02-01T00:00:00Z&until=2026-04-01T00:00:00Z&bucket=month", "7.50", 2,
			[]string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"?from=2026-03-04T00:00:00Z", "1.25", 1, []string{"2026-03-04T00:00:00Z"}},
		// The one record that named an end user.
		{"?by=user", "2.50", 1, []string{"2026-03-01T00:00:00Z"}},
	} {
		resp, body := get(tc.query)
		var v struct {
			Total string `json:"total"`
			Rows  []struct {
				Subject, Cost, Bucket string
				Requests, Tokens      int64
			} `json:"rows"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v) != nil || v.Total != tc.total || len(v.Rows) != tc.rows {
			t.Errorf("%s: %d %s; want total %q in %d rows", tc.query, resp.StatusCode, body, tc.total, tc.rows)
			continue
		}
		for i, r := range v.Rows {
			if r.Bucket != tc.buckets[i] || r.Requests == 0 || r.Tokens != 15*r.Requests || r.Subject == "" {
				t.Errorf("%s: row %d %+v; want bucket %s", tc.query, i, r, tc.buckets[i])
			}
		}
	}
	for _, tc := range []struct {
		query, param string
	}{
		{"?by=customer", "by"},
		{"?bucket=year", "bucket"},
		{"?window=year", "window"},
		{"?window=day&from=2026-03-01T00:00:00Z", "window"},
		{"?from=yesterday", "from"},
		{"?from=2026-03-01T00:00:00Z&until=soon", "until"},
		{"?from=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z", "until"},
	} {
		resp, body := get(tc.query)
		wantError(t, resp, body, http.StatusBadRequest, weir.CodeInvalidRequest, tc.param)
	}
	if resp := b.getWith(t, "/admin/spend", "Bearer "+b.key); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an API key reads spend: %d", resp.StatusCode)
	}
}

// failingSpend is a store that cannot report spend.
type failingSpend struct{}

func (failingSpend) SpendReport(context.Context, weir.SpendReportFilter) ([]weir.SpendRow, error) {
	return nil, errors.New("connection refused")
}

// TestAdminSpendStoreDown: a store that fails is store_unavailable,
// without its words; a gateway without one answers 404.
func TestAdminSpendStoreDown(t *testing.T) {
	t.Parallel()
	const token = "adm_spend"
	for _, tc := range []struct {
		spend  Spend
		status int
		code   weir.Code
	}{
		{failingSpend{}, http.StatusServiceUnavailable, weir.CodeStoreUnavailable},
		{nil, http.StatusNotFound, weir.CodeNotFound},
	} {
		b := setup(t, setupOpts{cfg: Config{AdminToken: token}, deps: func(d *Deps) { d.Spend = tc.spend }})
		resp := b.getWith(t, "/admin/spend", "Bearer "+token)
		body, _ := io.ReadAll(resp.Body)
		wantError(t, resp, body, tc.status, tc.code, "")
	}
}

func TestCalendarWindow(t *testing.T) {
	t.Parallel()
	sunday := time.Date(2026, 3, 1, 23, 0, 0, 0, time.FixedZone("UTC-2", -2*3600)) // Monday 01:00 UTC
	for _, tc := range []struct {
		unit        string
		from, until string
	}{
		{"day", "2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"},
		{"week", "2026-03-02T00:00:00Z", "2026-03-09T00:00:00Z"},
		{"month", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z"},
	} {
		from, until := CalendarWindow(tc.unit, sunday)
		if from.Format(time.RFC3339) != tc.from || until.Format(time.RFC3339) != tc.until {
			t.Errorf("%s: [%s, %s), want [%s, %s)", tc.unit, from.Format(time.RFC3339), until.Format(time.RFC3339), tc.from, tc.until)
		}
	}
	from, _ := CalendarWindow("week", time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)) // a Sunday
	if from.Format(time.DateOnly) != "2026-03-02" {
		t.Errorf("the week of a Sunday starts %s, want the Monday before", from)
	}
}
