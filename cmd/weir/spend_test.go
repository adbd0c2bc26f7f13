package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-gateway/weir/httpapi"
)

// TestSpend: weir spend asks /admin/spend for what its flags say and
// prints the rows as a table, or the server's JSON; flags that cannot
// make a query are refused before anything is asked.
func TestSpend(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.RequestURI())
		mu.Unlock()
		if r.URL.Path != "/admin/spend" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		_ = json.NewEncoder(w).Encode(httpapi.SpendView{By: r.URL.Query().Get("by"), From: from, Until: from.AddDate(0, 1, 0),
			Bucket: r.URL.Query().Get("bucket"), Total: 3_750_000_000, Rows: []httpapi.SpendLine{
				{Subject: "team", Bucket: from, Requests: 3, Tokens: 45, Cost: 1_250_000_000},
				{Subject: "ops", Bucket: from.AddDate(0, 0, 1), Requests: 1, Tokens: 15, Cost: 2_500_000_000, Estimated: 1},
			}})
	}))
	defer srv.Close()
	run := func(args ...string) (string, error) {
		cmd := spendCmd()
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"--addr", srv.URL, "--token", "tok"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("--by", "group", "--window", "month", "--bucket", "day")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"spend by group from 2026-03-01 00:00 until 2026-04-01 00:00 UTC: 3.75",
		"SUBJECT", "DAY", "ESTIMATED", "team", "1.25", "2026-03-02 00:00", "2.50"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = run("--json")
	var view httpapi.SpendView
	if err != nil || json.Unmarshal([]byte(out), &view) != nil || view.Total != 3_750_000_000 || !strings.Contains(out, `"total": "3.75"`) {
		t.Errorf("--json: %v\n%s", err, out)
	}
	if _, err := run("--since", "7d"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"--since", "7d", "--window", "day"}, {"--since", "last week"}, {"--since", "-2h"}} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 || asked[0] != "/admin/spend?bucket=day&by=group&window=month" || asked[1] != "/admin/spend?by=key" ||
		!strings.HasPrefix(asked[2], "/admin/spend?by=key&from=") {
		t.Errorf("asked %v", asked)
	}
}

func TestSinceTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for s, want := range map[string]string{
		"24h":                  "2026-03-09T12:00:00Z",
		"7d":                   "2026-03-03T12:00:00Z",
		"2026-03-01":           "2026-03-01T00:00:00Z",
		"2026-03-05T06:00:00Z": "2026-03-05T06:00:00Z",
	} {
		if got, err := sinceTime(s, now); err != nil || got.UTC().Format(time.RFC3339) != want {
			t.Errorf("sinceTime(%q) = %v, %v; want %s", s, got, err, want)
		}
	}
}

// TestSpendOnServer: weir spend reads a served gateway's store, which
// has spent nothing yet.
func TestSpendOnServer(t *testing.T) {
	t.Parallel()
	cfg := demoConfig("http://127.0.0.1:1/v1", "127.0.0.1:0", "")
	m, err := startMain(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := spendCmd()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"--addr", "http://" + m.Addr(), "--by", "group", "--window", "day"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "spend by group from") || !strings.Contains(out.String(), ": 0.00") ||
		!strings.Contains(out.String(), "no requests in the window") {
		t.Errorf("output:\n%s", out.String())
	}
}
