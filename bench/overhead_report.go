package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/weir-gateway/weir/loadgen"
)

// row is one target's line in a table: from one run, or the median of
// each column over several rounds.
type row struct {
	rate, ok    float64             // successful req/s, success %
	lat         loadgen.Percentiles // the table's latency
	late        int
	others      float64 // cores other programs kept busy
	cpu, allocs float64 // whole process, per request: CPU µs, allocations
	kb          float64 // and KiB allocated
	gcs         float64
}

func rowOf(r loadgen.Result, pick func(loadgen.Result) loadgen.Percentiles) row {
	cpu, allocs, bytes := r.Process.Per(r.Requests)
	return row{
		rate: r.Throughput(), ok: 100 * r.SuccessRatio(), lat: pick(r), late: r.Late,
		others: r.Process.Others(r.Elapsed),
		cpu:    float64(cpu) / float64(time.Microsecond), allocs: allocs, kb: bytes / 1024,
		gcs: float64(r.Process.GCs),
	}
}

// medianRow is the median of each column of rows (not the row of a median
// round: the columns of a round move together, but each median is what a
// repeated run would most likely show).
func medianRow(rows []row) row {
	med := func(f func(row) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		sort.Float64s(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	dur := func(f func(row) time.Duration) time.Duration {
		return time.Duration(med(func(r row) float64 { return float64(f(r)) }))
	}
	return row{
		rate:   med(func(r row) float64 { return r.rate }),
		ok:     med(func(r row) float64 { return r.ok }),
		late:   int(med(func(r row) float64 { return float64(r.late) })),
		others: med(func(r row) float64 { return r.others }),
		cpu:    med(func(r row) float64 { return r.cpu }),
		allocs: med(func(r row) float64 { return r.allocs }),
		kb:     med(func(r row) float64 { return r.kb }),
		gcs:    med(func(r row) float64 { return r.gcs }),
		lat: loadgen.Percentiles{
			N:    int(med(func(r row) float64 { return float64(r.lat.N) })),
			Mean: dur(func(r row) time.Duration { return r.lat.Mean }),
			P50:  dur(func(r row) time.Duration { return r.lat.P50 }),
			P90:  dur(func(r row) time.Duration { return r.lat.P90 }),
			P99:  dur(func(r row) time.Duration { return r.lat.P99 }),
			Max:  dur(func(r row) time.Duration { return r.lat.Max }),
		},
	}
}

// roundRatios lists target's added latency as a multiple of base's,
// p50/p99, round by round: the spread says how far one round can be trusted.
func roundRatios(results map[string][]loadgen.Result, pick func(loadgen.Result) loadgen.Percentiles, target, base string) string {
	var parts []string
	for i := range results[target] {
		d, px, w := pick(results["direct"][i]), pick(results[base][i]), pick(results[target][i])
		parts = append(parts, fmtRatio(ratio(w.P50-d.P50, px.P50-d.P50))+"/"+fmtRatio(ratio(w.P99-d.P99, px.P99-d.P99)))
	}
	return strings.Join(parts, "  ")
}

// The tables' heads, printed above their first lines.
const (
	overheadHead = "target     rate/s     ok%      p50      p90      p99      max   added p50   added p99   late  others"
	maxRPSHead   = "target      req/s       ok%      p50      p99      max  others"
	costHead     = "target    cpu µs   allocs       KB    GCs   added cpu µs   added allocs   added KB"
)

// printCost prints target's line of the cost table: the process's CPU time
// and allocations per request, and what the target adds over direct.
func printCost(out io.Writer, target string, rows map[string]row) {
	if target == "direct" {
		fmt.Fprintln(out, costHead)
	}
	r, d := rows[target], rows["direct"]
	if childTarget(target) {
		// Its allocations are the children's, which this process does
		// not see; its CPU time is theirs and this process's.
		fmt.Fprintf(out, "%-8s %8.1f %8s %8s %6s   %+12.1f   %12s   %8s\n", target, r.cpu, "-", "-", "-", r.cpu-d.cpu, "-", "-")
		return
	}
	line := fmt.Sprintf("%-8s %8.1f %8.0f %8.1f %6.0f", target, r.cpu, r.allocs, r.kb, r.gcs)
	if target == "direct" {
		line += fmt.Sprintf("   %12s   %12s   %8s", "-", "-", "-")
	} else {
		line += fmt.Sprintf("   %+12.1f   %+12.0f   %+8.1f", r.cpu-d.cpu, r.allocs-d.allocs, r.kb-d.kb)
	}
	if px, ok := rows["proxy"]; ok && target == "weir" {
		line += fmt.Sprintf("   weir/proxy added: cpu %s, allocs %s",
			fmtRatio(fratio(r.cpu-d.cpu, px.cpu-d.cpu)), fmtRatio(fratio(r.allocs-d.allocs, px.allocs-d.allocs)))
	}
	fmt.Fprintln(out, line)
}

func fratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// printOverhead prints target's line of an open-loop table, with added
// latency over direct and, on Weir's line, the ratio to the proxy's.
func printOverhead(out io.Writer, target string, rows map[string]row) {
	if target == "direct" {
		fmt.Fprintln(out, overheadHead)
	}
	r := rows[target]
	p := r.lat
	line := fmt.Sprintf("%-8s %8.1f  %6.2f  %7.3f  %7.3f  %7.3f  %7.3f", target, r.rate, r.ok, ms(p.P50), ms(p.P90), ms(p.P99), ms(p.Max))
	direct, ok := rows["direct"]
	if target == "direct" || !ok {
		line += fmt.Sprintf("  %10s  %10s", "-", "-")
	} else {
		d := direct.lat
		line += fmt.Sprintf("  %+10.3f  %+10.3f", ms(p.P50-d.P50), ms(p.P99-d.P99))
	}
	line += fmt.Sprintf("  %5d  %6.2f", r.late, r.others)
	if proxy, ok := rows["proxy"]; ok && target == "weir" {
		d, px := direct.lat, proxy.lat
		r50 := ratio(p.P50-d.P50, px.P50-d.P50)
		r99 := ratio(p.P99-d.P99, px.P99-d.P99)
		verdict := "met"
		if !(r50 <= 1.5 && r99 <= 1.5) {
			verdict = "missed"
		}
		line += fmt.Sprintf("   weir/proxy added: p50 %s, p99 %s (target <= 1.5x: %s)", fmtRatio(r50), fmtRatio(r99), verdict)
	}
	if serve, ok := rows["serve"]; ok && target == "fleet" {
		d, sv := direct.lat, serve.lat
		r50 := ratio(p.P50-d.P50, sv.P50-d.P50)
		r99 := ratio(p.P99-d.P99, sv.P99-d.P99)
		verdict := "met"
		if !(r50 <= 2 && r99 <= 2) {
			verdict = "missed"
		}
		line += fmt.Sprintf("   fleet/serve added: p50 %s, p99 %s (target <= 2x: %s)", fmtRatio(r50), fmtRatio(r99), verdict)
	}
	fmt.Fprintln(out, line)
}

// printMaxRPS prints target's line of the max-rps table; Weir's carries
// its throughput as a fraction of the proxy's and of direct's.
func printMaxRPS(out io.Writer, target string, rows map[string]row) {
	if target == "direct" {
		fmt.Fprintln(out, maxRPSHead)
	}
	r := rows[target]
	line := fmt.Sprintf("%-8s %9.1f  %8.3f  %7.3f  %7.3f  %7.3f  %6.2f", target, r.rate, r.ok,
		ms(r.lat.P50), ms(r.lat.P99), ms(r.lat.Max), r.others)
	if r.ok < 99.9 {
		line += "  (below 99.9% success: not sustained)"
	}
	if target != "direct" {
		line += fmt.Sprintf("   %s/direct %.2fx", target, r.rate/rows["direct"].rate)
	}
	if target == "weir" {
		line += fmt.Sprintf(", weir/proxy %.2fx", r.rate/rows["proxy"].rate)
	}
	if target == "fleet" {
		line += fmt.Sprintf(", fleet/serve %.2fx", r.rate/rows["serve"].rate)
	}
	fmt.Fprintln(out, line)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio is a/b, or NaN when b is not positive (the proxy added nothing
// measurable, so no multiple of it means anything).
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", r)
}

// childTarget says whether target runs in child processes (serve and
// fleet, under OverheadConfig.Fleet) rather than in this one.
func childTarget(target string) bool { return target == "serve" || target == "fleet" }
