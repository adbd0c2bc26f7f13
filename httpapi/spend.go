package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/weir-gateway/weir"
)

// Spend reports what requests cost (weir.SpendStore).
type Spend interface {
	SpendReport(ctx context.Context, f weir.SpendReportFilter) ([]weir.SpendRow, error)
}

var _ Spend = weir.SpendStore(nil)

// SpendView is the answer of GET /admin/spend: spend in [From, Until)
// by subject (By), in buckets of time if asked, and its Total. Amounts
// are decimal strings (weir.Money).
type SpendView struct {
	By     string      `json:"by"`
	From   time.Time   `json:"from"`
	Until  time.Time   `json:"until"`
	Bucket string      `json:"bucket,omitempty"`
	Total  weir.Money  `json:"total"`
	Rows   []SpendLine `json:"rows"`
}

// SpendLine is one subject's spend in one bucket.
type SpendLine struct {
	Subject string    `json:"subject"`
	Bucket  time.Time `json:"bucket"`
	// Requests counts its usage records, Tokens their prompt and
	// completion tokens; Estimated counts those whose cost is an
	// estimate (their upstream reported no usage).
	Requests  int64      `json:"requests"`
	Tokens    int64      `json:"tokens"`
	Cost      weir.Money `json:"cost"`
	Estimated int64      `json:"estimated"`
}

// spendWindows are the calendar windows /admin/spend takes, in UTC.
var spendWindows = []string{"day", "week", "month"}

// spend answers GET /admin/spend?by=key|group|model|platform_model
// &window=day|week|month (the current one, in UTC; month by default) or
// &from=&until= (RFC 3339), &bucket=hour|day|week|month.
func (s *Server) spend(w http.ResponseWriter, r *http.Request) {
	if s.deps.Spend == nil {
		s.writeErr(w, r, errorf(weir.CodeNotFound, "", "this gateway keeps no spend (no store)"))
		return
	}
	f, aerr := spendFilterOf(r, s.deps.Clock.Now())
	if aerr != nil {
		s.writeErr(w, r, aerr)
		return
	}
	rows, err := s.deps.Spend.SpendReport(r.Context(), f)
	switch {
	case errors.Is(err, weir.ErrInvalid):
		s.writeErr(w, r, errorf(weir.CodeInvalidRequest, "", err.Error()))
		return
	case err != nil:
		s.deps.Logger.Error("spend report failed", "error", err)
		s.writeErr(w, r, errorf(weir.CodeStoreUnavailable, "", "could not read spend from the store"))
		return
	}
	out := SpendView{By: f.By, From: f.From, Until: f.Until, Bucket: f.Bucket, Rows: make([]SpendLine, 0, len(rows))}
	for _, row := range rows {
		out.Total = out.Total.Add(row.Cost)
		out.Rows = append(out.Rows, SpendLine{Subject: row.Subject, Bucket: row.Bucket, Requests: row.Requests,
			Tokens: row.Tokens, Cost: row.Cost, Estimated: row.Estimated})
	}
	writeJSON(w, http.StatusOK, out)
}

// spendFilterOf reads /admin/spend's query, at now.
func spendFilterOf(r *http.Request, now time.Time) (weir.SpendReportFilter, *apiError) {
	q := r.URL.Query()
	f := weir.SpendReportFilter{By: q.Get("by"), Bucket: q.Get("bucket")}
	if f.By == "" {
		f.By = "key"
	}
	if !slices.Contains(weir.BudgetSubjectTypes, f.By) {
		return f, errorf(weir.CodeInvalidRequest, "by", fmt.Sprintf("by must be key, group, model or platform_model, not %q", f.By))
	}
	if !slices.Contains(weir.SpendBuckets, f.Bucket) {
		return f, errorf(weir.CodeInvalidRequest, "bucket", fmt.Sprintf("bucket must be hour, day, week or month, not %q", f.Bucket))
	}
	from, until, window := q.Get("from"), q.Get("until"), q.Get("window")
	if from == "" && until == "" {
		if window == "" {
			window = "month"
		}
		if !slices.Contains(spendWindows, window) {
			return f, errorf(weir.CodeInvalidRequest, "window", fmt.Sprintf("window must be day, week or month, not %q", window))
		}
		f.From, f.Until = CalendarWindow(window, now)
		return f, nil
	}
	if window != "" {
		return f, errorf(weir.CodeInvalidRequest, "window", "give a window, or from and until, not both")
	}
	var err error
	if f.From, err = time.Parse(time.RFC3339, from); err != nil {
		return f, errorf(weir.CodeInvalidRequest, "from", "from must be an RFC 3339 time such as 2026-03-01T00:00:00Z")
	}
	if until == "" {
		f.Until = now
	} else if f.Until, err = time.Parse(time.RFC3339, until); err != nil {
		return f, errorf(weir.CodeInvalidRequest, "until", "until must be an RFC 3339 time such as 2026-04-01T00:00:00Z")
	}
	if !f.Until.After(f.From) {
		return f, errorf(weir.CodeInvalidRequest, "until", "until must be after from")
	}
	return f, nil
}

// CalendarWindow is the UTC calendar day, week (from Monday) or month
// that holds now.
func CalendarWindow(unit string, now time.Time) (from, until time.Time) {
	now = now.UTC()
	y, m, d := now.Date()
	switch unit {
	case "day":
		from = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return from, from.AddDate(0, 0, 1)
	case "week":
		from = time.Date(y, m, d-(int(now.Weekday())+6)%7, 0, 0, 0, 0, time.UTC)
		return from, from.AddDate(0, 0, 7)
	}
	from = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}
