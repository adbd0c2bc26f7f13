// Command testsummary reads `go test -json` on its standard input and
// writes what `go test` without -json shows — each package's result line,
// the output of the tests that failed, build errors — and then the tests
// that skipped, grouped by the reason each gave, which `go test` without
// -v does not show. scripts/test runs it behind the README's test command.
//
// It is a development tool, not part of the weir binary.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

func main() {
	if err := summarize(os.Stdin, os.Stdout, modulePath()); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output
}

// line is one line of a test's output, kept until the test ends.
type line struct {
	test, text string
}

// skip is a test that skipped and why.
type skip struct {
	pkg, test, reason string
}

// summarize copies the stream's result lines and failures to w as they
// come, then writes the skipped tests, naming packages of module (if not
// "") from its root.
func summarize(r io.Reader, w io.Writer, module string) error {
	held := map[string][]line{} // by package and top-level test, until it ends
	failed := map[string]bool{} // package and test name
	var skips []skip
	anyFailed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		raw := sc.Bytes()
		var e event
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &e) != nil {
			fmt.Fprintf(w, "%s\n", raw) // not an event: go test's own words
			continue
		}
		if e.Action == "build-output" {
			fmt.Fprint(w, e.Output)
			continue
		}
		if e.Test == "" {
			// The package's own lines: its result ("ok", "FAIL", "?"),
			// and what its TestMain printed; "PASS" go test leaves out.
			if e.Action == "output" && e.Output != "PASS\n" {
				if strings.HasPrefix(e.Output, "ok  \t") || strings.HasPrefix(e.Output, "FAIL\t") {
					// The package's result: any test still running
					// never ended (a timeout, a crash), and what it
					// wrote says why.
					for _, group := range slices.Sorted(maps.Keys(held)) {
						if strings.HasPrefix(group, e.Package+" ") {
							writeFailures(w, held[group], func(string) bool { return true })
							delete(held, group)
						}
					}
				}
				fmt.Fprint(w, e.Output)
			}
			anyFailed = anyFailed || e.Action == "fail"
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		group := e.Package + " " + top
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			held[group] = append(held[group], line{e.Test, e.Output})
		case "fail":
			failed[key] = true
		case "skip":
			skips = append(skips, skip{e.Package, e.Test, skipReason(held[group], e.Test)})
		}
		if e.Test == top && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
			if e.Action == "fail" {
				writeFailures(w, held[group], func(test string) bool { return failed[e.Package+" "+test] })
			}
			delete(held, group)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if anyFailed {
		fmt.Fprintln(w, "FAIL")
	}
	writeSkips(w, skips, module)
	return nil
}

// framing is test2json's lines that go test without -v does not show.
var framing = regexp.MustCompile(`^\s*(=== (RUN|PAUSE|CONT|NAME)\s|--- (PASS|SKIP): )`)

// writeFailures writes the lines of the tests of one top-level test that
// failed, each test's "--- FAIL" heading first and a subtest's indented,
// as go test does.
func writeFailures(w io.Writer, lines []line, failed func(string) bool) {
	var order []string
	for _, l := range lines {
		if failed(l.test) && !slices.Contains(order, l.test) {
			order = append(order, l.test)
		}
	}
	for _, test := range order {
		var heading, body []string
		for _, l := range lines {
			switch {
			case l.test != test || framing.MatchString(l.text):
			case strings.HasPrefix(strings.TrimLeft(l.text, " "), "--- FAIL: "):
				heading = append(heading, l.text)
			default:
				body = append(body, l.text)
			}
		}
		// -json's lines are not indented by depth; go test's are.
		indent := strings.Repeat("    ", strings.Count(test, "/"))
		for _, l := range append(heading, body...) {
			fmt.Fprint(w, indent+l)
		}
	}
}

// logPrefix is where a t.Log line says it came from.
var logPrefix = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason is what test said when it skipped: its log lines (t.Skip's
// among them), without their file:line prefix; or, with none, what else
// it printed.
func skipReason(lines []line, test string) string {
	var logged, printed []string
	for _, l := range lines {
		if l.test != test || framing.MatchString(l.text) {
			continue
		}
		s := strings.TrimSpace(logPrefix.ReplaceAllString(l.text, ""))
		switch {
		case s == "":
		case logPrefix.MatchString(l.text):
			logged = append(logged, s)
		default:
			printed = append(printed, s)
		}
	}
	switch {
	case len(logged) > 0:
		return strings.Join(logged, " ")
	case len(printed) > 0:
		return strings.Join(printed, " ")
	}
	return "(no reason given)"
}

// shownPerPackage is how many of a reason's tests are named per package.
const shownPerPackage = 6

// writeSkips writes the skipped tests, grouped by reason (the most
// frequent first), each group's tests by package.
func writeSkips(w io.Writer, skips []skip, module string) {
	if len(skips) == 0 {
		fmt.Fprintln(w, "\nNo test skipped.")
		return
	}
	byReason := map[string][]skip{}
	var reasons []string
	for _, s := range skips {
		if byReason[s.reason] == nil {
			reasons = append(reasons, s.reason)
		}
		byReason[s.reason] = append(byReason[s.reason], s)
	}
	slices.SortStableFunc(reasons, func(a, b string) int { return cmp.Compare(len(byReason[b]), len(byReason[a])) })
	fmt.Fprintf(w, "\n%s skipped (go test -v shows them as they run):\n", plural(len(skips), "test"))
	for _, reason := range reasons {
		group := byReason[reason]
		fmt.Fprintf(w, "  %s: %s\n", plural(len(group), "test"), reason)
		var pkgs []string
		names := map[string][]string{}
		for _, s := range group {
			if names[s.pkg] == nil {
				pkgs = append(pkgs, s.pkg)
			}
			names[s.pkg] = append(names[s.pkg], s.test)
		}
		for _, p := range pkgs {
			n := names[p]
			shown := strings.Join(n[:min(len(n), shownPerPackage)], " ")
			if len(n) > shownPerPackage {
				shown += fmt.Sprintf(" and %d more", len(n)-shownPerPackage)
			}
			fmt.Fprintf(w, "      %s: %s\n", shortName(p, module), shown)
		}
	}
}

// shortName is a package as it is given to go test from the module's
// root ("./e2e"), when the module is the one in ./go.mod.
func shortName(pkg, module string) string {
	switch {
	case module == "":
		return pkg
	case pkg == module:
		return "."
	case strings.HasPrefix(pkg, module+"/"):
		return "./" + strings.TrimPrefix(pkg, module+"/")
	}
	return pkg
}

// modulePath is the module path in ./go.mod, or "".
func modulePath() string {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
