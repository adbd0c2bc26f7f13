package main

import (
	"os"
	"strings"
	"testing"
)

// TestSummarize: a canned `go test -json` stream (failures nested, a
// parallel subtest, skips with and without reasons, a package without
// tests, a build failure and a test that timed out) reads as go test
// without -json would print it, then the skipped tests grouped by reason.
func TestSummarize(t *testing.T) {
	in, err := os.Open("testdata/stream.json")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	want, err := os.ReadFile("testdata/summary.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := summarize(in, &out, "example.com/m"); err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestSummarizeNoSkips: a run that skipped nothing says so; a line that
// is not an event (go test's own words) passes through.
func TestSummarizeNoSkips(t *testing.T) {
	in := strings.NewReader(`go: downloading example.com/x v1.0.0
{"Action":"run","Package":"example.com/m","Test":"TestA"}
{"Action":"output","Package":"example.com/m","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"example.com/m","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"example.com/m","Test":"TestA"}
{"Action":"output","Package":"example.com/m","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m","Output":"ok  \texample.com/m\t0.01s\n"}
{"Action":"pass","Package":"example.com/m"}
`)
	var out strings.Builder
	if err := summarize(in, &out, "example.com/m"); err != nil {
		t.Fatal(err)
	}
	if want := "go: downloading example.com/x v1.0.0\nok  \texample.com/m\t0.01s\n\nNo test skipped.\n"; out.String() != want {
		t.Errorf("summary %q, want %q", out.String(), want)
	}
}

// TestSkipReason: a skipped test's reason is what it logged (t.Skip's
// words), not a banner it printed besides; with nothing logged, what it
// printed.
func TestSkipReason(t *testing.T) {
	lines := []line{
		{"TestA", "=== RUN   TestA\n"},
		{"TestA", "*** SKIPPING the widget tests ***\n"},
		{"TestA", "    a_test.go:12: SKIPPED: no widget\n"},
		{"TestA", "--- SKIP: TestA (0.00s)\n"},
		{"TestB", "=== RUN   TestB\n"},
		{"TestB", "only printed\n"},
		{"TestB", "--- SKIP: TestB (0.00s)\n"},
	}
	if got := skipReason(lines, "TestA"); got != "SKIPPED: no widget" {
		t.Errorf("TestA: %q", got)
	}
	if got := skipReason(lines, "TestB"); got != "only printed" {
		t.Errorf("TestB: %q", got)
	}
	if got := skipReason(lines, "TestC"); got != "(no reason given)" {
		t.Errorf("TestC: %q", got)
	}
}
