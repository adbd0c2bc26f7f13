package metrics

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-gateway/weir/admission"
)

// dashboardFile is the Grafana dashboard that ships with Weir.
const dashboardFile = "../examples/grafana/weir.json"

// TestDashboardNamesExportedMetrics: every query of the shipped Grafana
// dashboard names only metrics a gateway exports (a histogram's through
// its _bucket, _count or _sum series), and every weir_ metric and every
// GenAI one (gen_ai_) has a panel; its panels have unique ids and do not
// overlap.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	var dash struct {
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Type    string `json:"type"`
			GridPos struct {
				H, W, X, Y int
			} `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	used := make(map[string]bool)
	for _, e := range exprs {
		for _, name := range metricNamesIn(e) {
			base := name
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if trimmed, ok := strings.CutSuffix(name, suffix); ok && exported[trimmed] {
					base = trimmed
				}
			}
			if !exported[base] {
				t.Errorf("query %q names %s, which Weir does not export", e, name)
			}
			used[base] = true
		}
	}
	for name := range exported {
		if (strings.HasPrefix(name, "weir_") || strings.HasPrefix(name, "gen_ai_")) && !used[name] {
			t.Errorf("no panel shows %s", name)
		}
	}
	// Grafana keys panels by id, and lays them on a 24-column grid: ids
	// unique, no panel past the grid's edge or over another.
	ids := make(map[int]string)
	type cell struct{ x, y int }
	taken := make(map[cell]string)
	for _, p := range dash.Panels {
		if other, dup := ids[p.ID]; dup || p.ID <= 0 {
			t.Errorf("panel %q has id %d (also %q's)", p.Title, p.ID, other)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q is placed at %+v, off the 24-column grid", p.Title, g)
			continue
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps %q at (%d, %d)", p.Title, other, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
	}
}

// metricIdent is a PromQL identifier of one of the metric families a
// gateway exports: its own, the GenAI conventions', the process's and
// Go's.
var metricIdent = regexp.MustCompile(`\b(?:weir|gen_ai|process|go)_[a-zA-Z0-9_:]*`)

// metricNamesIn are the metric names expr uses, label names and values
// aside.
func metricNamesIn(expr string) []string {
	// Label matchers and by/without lists name labels, not metrics.
	unlabelled := regexp.MustCompile(`\{[^}]*\}|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(expr, " ")
	return slices.Compact(slices.Sorted(slices.Values(metricIdent.FindAllString(unlabelled, -1))))
}

// exportedNames are the names of every metric a gateway's registry
// describes or collects, with the fleet's collectors registered too.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	m := New(func(context.Context) []admission.ScopeStats { return nil })
	m.WatchFleet(func() FleetState { return FleetState{} })
	descs := make(chan *prometheus.Desc)
	go func() {
		m.Registry.Describe(descs)
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := make(map[string]bool)
	for d := range descs {
		match := fqName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("no name in %s", d)
		}
		names[match[1]] = true
	}
	// Unchecked collectors describe nothing: what they collect counts.
	m.Spent("k", "g", "m", "p/m", 1)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		names[f.GetName()] = true
	}
	if !names["weir_spend_total"] || !names["weir_scope_waiting"] || !names["weir_fleet_leader"] || !names["process_resident_memory_bytes"] ||
		!names["gen_ai_client_token_usage"] {
		t.Fatalf("the registry describes %d metrics, not the ones expected: %v", len(names), names)
	}
	return names
}
