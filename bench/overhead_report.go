package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/gcfloor"
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
	// rss and hwm are the target's memory at the end of its measured
	// phase, MiB (overheadRig.withMem): child, that of the processes of
	// its own; else this whole process's, which it shares.
	rss, anon, hwm float64
	child          bool
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
		rss:    med(func(r row) float64 { return r.rss }),
		anon:   med(func(r row) float64 { return r.anon }),
		hwm:    med(func(r row) float64 { return r.hwm }),
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

// hop is the latency one target adds over another in the same run:
// weir over direct, or the edge tunnel, edge over weir.
type hop struct{ to, from string }

// The hops the report judges: what Weir, the fleet, the edge tunnel and
// the plain proxy each add.
var (
	weirHop   = hop{"weir", "direct"}
	proxyHop  = hop{"proxy", "direct"}
	serveHop  = hop{"serve", "direct"}
	fleetHop  = hop{"fleet", "direct"}
	tunnelHop = hop{"edge", "weir"}
	// responsesHop and messagesHop are Weir asked through the Responses
	// API and Anthropic's Messages API.
	responsesHop = hop{"responses", "direct"}
	messagesHop  = hop{"messages", "direct"}
	// consoleHop is Weir with its web console watched, against Weir.
	consoleHop = hop{"console", "direct"}
	// budgetsHop is Weir with a budget on the request's key, group and
	// model, judged against weir's hop.
	budgetsHop = hop{"budgets", "direct"}
	// traceHop is Weir tracing every request, judged against weir's hop;
	// twinHop another untraced instance of Weir, weir's A/A.
	traceHop = hop{traceName, "direct"}
	twinHop  = hop{twinName, "direct"}
)

// traceTarget is the most weir+trace may add over weir (issue 26).
const traceTarget = 1.15

// added is what h adds to the p50 and the p99 of rows.
func (h hop) added(rows map[string]row) (p50, p99 time.Duration) {
	to, from := rows[h.to].lat, rows[h.from].lat
	return to.P50 - from.P50, to.P99 - from.P99
}

// hopRatios are what h adds as a multiple of what base adds, p50 and p99.
func hopRatios(rows map[string]row, h, base hop) (r50, r99 float64) {
	h50, h99 := h.added(rows)
	b50, b99 := base.added(rows)
	return ratio(h50, b50), ratio(h99, b99)
}

// roundRatios lists what h adds as a multiple of what base adds, p50/p99,
// round by round: the spread says how far one round can be trusted.
func roundRatios(results map[string][]loadgen.Result, pick func(loadgen.Result) loadgen.Percentiles, h, base hop) string {
	r50, r99 := eachRound(results, pick, h, base)
	var parts []string
	for i := range r50 {
		parts = append(parts, fmtRatio(r50[i])+"/"+fmtRatio(r99[i]))
	}
	return strings.Join(parts, "  ")
}

// eachRound is what h adds as a multiple of what base adds, p50 and
// p99, a round each.
func eachRound(results map[string][]loadgen.Result, pick func(loadgen.Result) loadgen.Percentiles, h, base hop) (r50, r99 []float64) {
	for i := range results[h.to] {
		rows := map[string]row{}
		for _, name := range []string{h.to, h.from, base.to, base.from} {
			rows[name] = row{lat: pick(results[name][i])}
		}
		a, b := hopRatios(rows, h, base)
		r50, r99 = append(r50, a), append(r99, b)
	}
	return r50, r99
}

// roundChunks lists the edge target's added per-chunk p99 over direct
// and over weir, round by round.
func roundChunks(results map[string][]loadgen.Result) string {
	var parts []string
	for i := range results["edge"] {
		e, d, w := results["edge"][i].Chunk, results["direct"][i].Chunk, results["weir"][i].Chunk
		parts = append(parts, fmt.Sprintf("%+.3f/%+.3f", ms(e.P99-d.P99), ms(e.P99-w.P99)))
	}
	return strings.Join(parts, "  ")
}

// The tables' heads, printed above their first lines.
const (
	overheadHead = "target     rate/s     ok%      p50      p90      p99      max   added p50   added p99   late  others   rss MB"
	maxRPSHead   = "target      req/s       ok%      p50      p99      max  others   rss MB"
	costHead     = "target    cpu µs   allocs       KB    GCs   rss MB  anon MB   hwm MB   added cpu µs   added allocs   added KB"
)

// printCost prints target's line of the cost table: the process's CPU time
// and allocations per request, and what the target adds over direct.
func printCost(out io.Writer, target string, rows map[string]row) {
	if target == "direct" {
		fmt.Fprintln(out, costHead)
	}
	r, d := rows[target], rows["direct"]
	if r.child {
		// Its allocations are the children's, which this process does
		// not see; its CPU time is theirs and this process's.
		line := fmt.Sprintf("%-8s %8.1f %8s %8s %6s  %s   %+12.1f   %12s   %8s", target, r.cpu, "-", "-", "-", memColumns(r), r.cpu-d.cpu, "-", "-")
		if px, ok := rows["proxy"]; ok && target == "weir" && px.child {
			line += fmt.Sprintf("   weir/proxy added: cpu %s; weir/proxy rss %s",
				fmtRatio(fratio(r.cpu-d.cpu, px.cpu-d.cpu)), fmtRatio(fratio(r.rss, px.rss)))
		}
		fmt.Fprintln(out, line)
		return
	}
	line := fmt.Sprintf("%-8s %8.1f %8.0f %8.1f %6.0f  %s", target, r.cpu, r.allocs, r.kb, r.gcs, memColumns(r))
	if target == "direct" {
		line += fmt.Sprintf("   %12s   %12s   %8s", "-", "-", "-")
	} else {
		line += fmt.Sprintf("   %+12.1f   %+12.0f   %+8.1f", r.cpu-d.cpu, r.allocs-d.allocs, r.kb-d.kb)
	}
	if px, ok := rows["proxy"]; ok && target == "weir" {
		line += fmt.Sprintf("   weir/proxy added: cpu %s, allocs %s",
			fmtRatio(fratio(r.cpu-d.cpu, px.cpu-d.cpu)), fmtRatio(fratio(r.allocs-d.allocs, px.allocs-d.allocs)))
	}
	if px, ok := rows["proxy"]; ok && target == "edge" {
		w := rows["weir"]
		line += fmt.Sprintf("   tunnel (edge-weir) %+.1f µs, %+.0f allocs; tunnel/proxy: cpu %s, allocs %s",
			r.cpu-w.cpu, r.allocs-w.allocs,
			fmtRatio(fratio(r.cpu-w.cpu, px.cpu-d.cpu)), fmtRatio(fratio(r.allocs-w.allocs, px.allocs-d.allocs)))
	}
	if w, ok := rows["weir"]; ok && (target == "budgets" || target == traceName || target == twinName) {
		line += fmt.Sprintf("   %s-weir: cpu %+.1f µs, allocs %+.0f, KB %+.1f; %s/weir added: cpu %s, allocs %s",
			target, r.cpu-w.cpu, r.allocs-w.allocs, r.kb-w.kb, target,
			fmtRatio(fratio(r.cpu-d.cpu, w.cpu-d.cpu)), fmtRatio(fratio(r.allocs-d.allocs, w.allocs-d.allocs)))
	}
	fmt.Fprintln(out, line)
}

// memColumns are r's rss, anon and hwm columns of the cost table; a "*" marks
// this process's, shared by the load generator, the mock and the targets
// in it.
func memColumns(r row) string {
	mark := "*"
	if r.child {
		mark = " "
	}
	return fmt.Sprintf("%7.1f%s %7.1f%s %7.1f%s", r.rss, mark, r.anon, mark, r.hwm, mark)
}

// rssColumn is r's rss column of a latency table, marked as memColumns'.
func rssColumn(r row) string {
	switch {
	case r.rss == 0:
		return fmt.Sprintf("  %7s ", "-")
	case r.child:
		return fmt.Sprintf("  %7.1f ", r.rss)
	}
	return fmt.Sprintf("  %7.1f*", r.rss)
}

func fratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// printOverhead prints target's line of an open-loop table, with added
// latency over direct and, on Weir's line, the ratio to the proxy's; on
// the edge target's, what the tunnel adds (edge over weir) as a multiple
// of what the proxy adds (proxy over direct).
func printOverhead(out io.Writer, target string, rows map[string]row) {
	if target == "direct" {
		fmt.Fprintln(out, overheadHead)
	}
	fmt.Fprintln(out, overheadLine(target, rows)+ratioVerdict(target, rows))
}

// printChunks prints target's line of the table of streamed chunks,
// each timed from the mock's write to the client's read; on the edge
// target's, its added p99 per chunk against the edge-stream target, over direct
// (the verdict) and over weir (the tunnel's own share).
func printChunks(out io.Writer, target string, rows map[string]row) {
	if target == "direct" {
		fmt.Fprintln(out, overheadHead)
	}
	line := overheadLine(target, rows)
	if _, ok := rows["weir"]; ok && target == "edge" {
		e, d, w := rows["edge"].lat, rows["direct"].lat, rows["weir"].lat
		added := e.P99 - d.P99
		verdict := "met"
		if !(added <= 2*time.Millisecond) {
			verdict = "missed"
		}
		line += fmt.Sprintf("   edge added per chunk: p99 %+.3f ms over direct (target <= 2 ms: %s), %+.3f ms over weir",
			ms(added), verdict, ms(e.P99-w.P99))
	}
	fmt.Fprintln(out, line)
}

// overheadLine is target's columns of an open-loop table.
func overheadLine(target string, rows map[string]row) string {
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
	line += fmt.Sprintf("  %5d  %6.2f", r.late, r.others) + rssColumn(r)
	return line
}

// ratioVerdict is the end of target's line in a latency table: its
// added latency as a multiple of its baseline's, against its target.
func ratioVerdict(target string, rows map[string]row) string {
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := rows[n]; !ok {
				return false
			}
		}
		return true
	}
	// weirTarget is the most Weir may add over the plain proxy's hop.
	const weirTarget = 1.1
	verdict := func(r50, r99, most float64) string {
		if r50 <= most && r99 <= most {
			return "met"
		}
		return "missed"
	}
	switch {
	case target == "weir" && has("direct", "proxy"):
		r50, r99 := hopRatios(rows, weirHop, proxyHop)
		return fmt.Sprintf("   weir/proxy added: p50 %s, p99 %s (target <= %.1fx: %s)", fmtRatio(r50), fmtRatio(r99), weirTarget, verdict(r50, r99, weirTarget))
	case target == "fleet" && has("direct", "serve"):
		r50, r99 := hopRatios(rows, fleetHop, serveHop)
		return fmt.Sprintf("   fleet/serve added: p50 %s, p99 %s (target <= 2x: %s)", fmtRatio(r50), fmtRatio(r99), verdict(r50, r99, 2))
	case target == "console" && has("direct", "weir"):
		c50, c99 := consoleHop.added(rows)
		w50, w99 := weirHop.added(rows)
		return fmt.Sprintf("   with the console watched, added p50 %+.3f ms, p99 %+.3f ms; console/weir added: p50 %s, p99 %s, throughput %.3fx",
			ms(c50), ms(c99), fmtRatio(ratio(c50, w50)), fmtRatio(ratio(c99, w99)), rows["console"].rate/rows["weir"].rate)
	case (target == "responses" || target == "messages") && has("direct", "weir"):
		h := responsesHop
		if target == "messages" {
			h = messagesHop
		}
		r50, r99 := hopRatios(rows, h, weirHop)
		return fmt.Sprintf("   %s/weir added: p50 %s, p99 %s (target <= 1.3x: %s)", target, fmtRatio(r50), fmtRatio(r99), verdict(r50, r99, 1.3))
	case target == "budgets" && has("direct", "weir"):
		r50, r99 := hopRatios(rows, budgetsHop, weirHop)
		return fmt.Sprintf("   budgets/weir added: p50 %s, p99 %s (target <= 1.1x: %s)", fmtRatio(r50), fmtRatio(r99), verdict(r50, r99, 1.1))
	case target == traceName && has("direct", "weir"):
		r50, r99 := hopRatios(rows, traceHop, weirHop)
		return fmt.Sprintf("   %s/weir added: p50 %s, p99 %s (target <= %.2fx: %s)", traceName, fmtRatio(r50), fmtRatio(r99), traceTarget, verdict(r50, r99, traceTarget))
	case target == twinName && has("direct", "weir"):
		r50, r99 := hopRatios(rows, twinHop, weirHop)
		return fmt.Sprintf("   %s/weir added: p50 %s, p99 %s (A/A: both untraced)", twinName, fmtRatio(r50), fmtRatio(r99))
	case target == "edge" && has("direct", "proxy", "weir"):
		t50, t99 := tunnelHop.added(rows)
		p50, p99 := proxyHop.added(rows)
		r50, r99 := hopRatios(rows, tunnelHop, proxyHop)
		return fmt.Sprintf("   tunnel (edge-weir) %+.3f/%+.3f ms, proxy hop (proxy-direct) %+.3f/%+.3f ms; tunnel/proxy added: p50 %s, p99 %s (target <= 1.5x: %s)",
			ms(t50), ms(t99), ms(p50), ms(p99), fmtRatio(r50), fmtRatio(r99), verdict(r50, r99, 1.5))
	}
	return ""
}

// printMaxRPS prints target's line of the max-rps table; Weir's carries
// its throughput as a fraction of the proxy's and of direct's.
func printMaxRPS(out io.Writer, target string, rows map[string]row) {
	if target == "direct" {
		fmt.Fprintln(out, maxRPSHead)
	}
	r := rows[target]
	line := fmt.Sprintf("%-8s %9.1f  %8.3f  %7.3f  %7.3f  %7.3f  %6.2f", target, r.rate, r.ok,
		ms(r.lat.P50), ms(r.lat.P99), ms(r.lat.Max), r.others) + rssColumn(r)
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

// overheadResults are each target's results, a round each.
type overheadResults map[string][]loadgen.Result

// latency is the latency of a result's requests, the main tables'.
func latency(r loadgen.Result) loadgen.Percentiles { return r.Latency }

// summary is each target's row over the rounds: the run's own with one
// round, the median of each column with several.
func (res overheadResults) summary(pick func(loadgen.Result) loadgen.Percentiles) map[string]row {
	rows := map[string]row{}
	for name, rs := range res {
		var each []row
		for _, r := range rs {
			each = append(each, rowOf(r, pick))
		}
		rows[name] = medianRow(each)
	}
	return rows
}

// printLatencyLine prints target's line of a latency table: the max-rps
// table's under MaxRPS, the open loop's otherwise.
func (c OverheadConfig) printLatencyLine(out io.Writer, target string, rows map[string]row) {
	if c.MaxRPS {
		printMaxRPS(out, target, rows)
	} else {
		printOverhead(out, target, rows)
	}
}

// printOverheadSetup prints what the run drives and how: the load, the
// mock, Weir's scopes and, when they run, the edge and fleet targets.
func printOverheadSetup(out io.Writer, c OverheadConfig, rig *overheadRig) {
	switch {
	case c.Interleave:
		fmt.Fprintf(out, "weir-bench: overhead interleaved, one open loop at %.0f req/s dealing each turn of %d requests to every target in a shuffled order (%.0f req/s each), %s warm-up, %s measured per round, %.0f%% streaming, in-flight bound %d; then a cost pass of each target alone\n",
			c.Rate, len(rig.targets), c.Rate/float64(len(rig.targets)), c.Warmup, c.Duration, c.Stream*100, c.Concurrency)
	case c.MaxRPS:
		fmt.Fprintf(out, "weir-bench: max-rps, closed loop of %d connections per target, %s warm-up, %s measured per target, %.0f%% streaming\n",
			c.Connections, c.Warmup, c.Duration, c.Stream*100)
	default:
		fmt.Fprintf(out, "weir-bench: overhead at %.0f req/s (open loop), %s warm-up, %s measured per target, %.0f%% streaming, in-flight bound %d\n",
			c.Rate, c.Warmup, c.Duration, c.Stream*100, c.Concurrency)
	}
	gc := fmt.Sprintf("heap floor %d MiB", c.HeapFloor>>20)
	if c.OutOfProcess {
		gc = fmt.Sprintf("this process's heap floor %d MiB", HarnessHeapFloor>>20)
	}
	if v, ok := gcfloor.Overridden(); ok {
		gc = "GOGC=" + v
	}
	fmt.Fprintf(out, "  mock: 0ms latency, %d-token answers (%d B), %d B requests; GOMAXPROCS %d; %s; load average %s\n",
		c.CompletionTokens, rig.answer, len(chatBody), runtime.GOMAXPROCS(0), gc, loadAverage())
	fmt.Fprintf(out, "  weir: scopes key:%s group:%s pm:%s, each limit %d; log level %s\n",
		rig.key.ID, rig.key.Group, chatPM, generous, rig.logLevel)
	if c.OutOfProcess {
		floor := "its config's default"
		if c.HeapFloorSet {
			floor = fmt.Sprintf("%d MiB", c.HeapFloor>>20)
		}
		fmt.Fprintf(out, "  out of process: proxy, the plain proxy in a process of its own (GOGC default); weir, one `weir serve` child on SQLite, heap floor %s; listeners from port %d\n",
			floor, c.Ports)
	}
	if rig.budgets != nil {
		fmt.Fprintf(out, "  budgets: the same gateway and platform model (priced input %s, output %s a million tokens, for every target), key %s of group %s asking model %s; a hard budget of %s (alerts at %v%%) on that key, group and model: scopes %s\n",
			budgetsPrice.Input, budgetsPrice.Output, rig.budgets.key.ID, budgetsGroup, budgetsModel, budgetsSpec, budgetsAlerts, strings.Join(rig.budgets.scopes, ", "))
	}
	if rig.trace != nil {
		fmt.Fprintf(out, "  weir, %s and %s: three gateways in this process built alike (one catalog and limits, a database and a port each), A, B and C, started afresh in that order every round with the roles turned, each playing each role once in every %d rounds; %s traces every request (a server and an upstream client span each, and a queue span for a request that waited) by OTLP/HTTP, batched, to a receiver in this process; weir and %s have no tracing configured (%s/weir: an A/A comparison)\n",
			traceName, twinName, len(traceRoles), traceName, twinName, twinName)
	}
	if rig.edge != nil {
		fmt.Fprintf(out, "  edge: the same gateway, model %s routed to node %s alone: its agent in this process dials the edge listener %s over gRPC (plaintext), its provider %s is the same mock, %d slots; scopes key, group and %s\n",
			edgeModel, rig.edge.node.ID, rig.gateway.EdgeAddr(), edgeProvider, edgeSlots, rig.edge.scope())
	}
	if rig.fleet != nil {
		fmt.Fprintf(out, "  serve: one `weir serve` child on SQLite; fleet: %d `weir serve` children on PostgreSQL schema %s, requests to each in turn, %s leads; same catalog and limits, log level info\n",
			len(rig.fleet.replicas), rig.fleet.schema.name, rig.fleet.leader())
	}
	fmt.Fprintln(out)
}

// overheadReport prints what follows the rounds' tables, from their
// results.
type overheadReport struct {
	out     io.Writer
	c       OverheadConfig
	rig     *overheadRig
	results overheadResults
	// costs are the results the cost table comes from: results, or with
	// OverheadConfig.Interleave the cost pass's (costPass).
	costs overheadResults
}

// printMedians prints the latency table of each column's median over the
// rounds and, in an open loop, the hops' ratios round by round.
func (p overheadReport) printMedians() {
	fmt.Fprintf(p.out, "\nmedian of each column over %d rounds:\n", p.c.Rounds)
	rows := p.results.summary(latency)
	p.rig.withMem(rows, false)
	for _, t := range p.rig.targets {
		p.c.printLatencyLine(p.out, t.name, rows)
	}
	if p.c.MaxRPS {
		return
	}
	fmt.Fprintf(p.out, "weir/proxy added latency, round by round: %s\n", roundRatios(p.results, latency, weirHop, proxyHop))
	if p.rig.edge != nil {
		fmt.Fprintf(p.out, "tunnel/proxy added latency (edge-weir over proxy-direct), round by round: %s\n", roundRatios(p.results, latency, tunnelHop, proxyHop))
	}
	if p.rig.fleet != nil {
		fmt.Fprintf(p.out, "fleet/serve added latency, round by round: %s\n", roundRatios(p.results, latency, fleetHop, serveHop))
	}
	if p.c.Dialects {
		fmt.Fprintf(p.out, "responses/weir added latency, round by round: %s\n", roundRatios(p.results, latency, responsesHop, weirHop))
		fmt.Fprintf(p.out, "messages/weir added latency, round by round: %s\n", roundRatios(p.results, latency, messagesHop, weirHop))
	}
	if p.c.Budgets {
		fmt.Fprintf(p.out, "budgets/weir added latency, round by round: %s\n", roundRatios(p.results, latency, budgetsHop, weirHop))
	}
	if p.c.Tracing {
		fmt.Fprintf(p.out, "%s/weir added latency, round by round (instances): %s\n", traceName, instanceRatios(p.results, 1))
		fmt.Fprintf(p.out, "%s/weir added latency, round by round (instances): %s\n", twinName, instanceRatios(p.results, 2))
		fmt.Fprint(p.out, traceVerdict(p.results, p.c.Rounds))
	}
}

// traceVerdict is the trace-overhead scenario's judgement: weir+trace's
// added latency over weir's, p50 and p99, the median of the rounds'
// ratios (each round's a comparison within the same seconds) against
// traceTarget, and beside it the same for weir', which traces nothing:
// a ratio of weir+trace's within the A/A line's spread is not tracing's.
func traceVerdict(results overheadResults, rounds int) string {
	t50, t99 := medianRatios(results, latency, traceHop, weirHop)
	a50, a99 := medianRatios(results, latency, twinHop, weirHop)
	verdict := "missed"
	switch {
	case math.IsNaN(t50) || math.IsNaN(t99):
		verdict = "not measured: weir added nothing in any round"
	case t50 <= traceTarget && t99 <= traceTarget:
		verdict = "met"
	}
	balance := "each instance traced in as many rounds"
	if rounds%len(traceRoles) != 0 {
		balance = fmt.Sprintf("rounds not a multiple of %d: the instances did not play each role alike", len(traceRoles))
	}
	return fmt.Sprintf("trace-overhead: %s/weir added p50 %s, p99 %s, medians of %d rounds' ratios (target <= %.2fx: %s; %s)\n",
		traceName, fmtRatio(t50), fmtRatio(t99), rounds, traceTarget, verdict, balance) +
		fmt.Sprintf("A/A, two untraced instances: %s/weir added p50 %s, p99 %s, medians of %d rounds' ratios\n",
			twinName, fmtRatio(a50), fmtRatio(a99), rounds)
}

// instanceRatios lists what the target traceRoles[role] adds as a
// multiple of what weir adds, p50/p99, round by round, each with the
// instances compared ("B/A": B played the role, A weir), so that an
// instance that is faster or slower whatever its role shows.
func instanceRatios(results overheadResults, role int) string {
	r50, r99 := eachRound(results, latency, hop{traceRoles[role], "direct"}, weirHop)
	parts := make([]string, len(r50))
	for i := range r50 {
		round := i + 1
		parts[i] = fmt.Sprintf("%s/%s (%s/%s)", fmtRatio(r50[i]), fmtRatio(r99[i]),
			instanceName(roleInstance(role, round)), instanceName(roleInstance(0, round)))
	}
	return strings.Join(parts, "  ")
}

// medianRatios are the medians over the rounds of what h adds as a
// multiple of what base adds, p50 and p99; rounds where base added
// nothing are left out (NaN if all are).
func medianRatios(results overheadResults, pick func(loadgen.Result) loadgen.Percentiles, h, base hop) (r50, r99 float64) {
	each50, each99 := eachRound(results, pick, h, base)
	return median(each50), median(each99)
}

// median is the median of v's numbers, NaN left out; NaN if none is.
func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// printStreams prints the streams' tables: to the first byte, to the last
// and per chunk, and with several rounds the edge's per-chunk p99 round
// by round.
func (p overheadReport) printStreams() {
	for _, part := range []struct {
		title string
		pick  func(loadgen.Result) loadgen.Percentiles
	}{
		{"streams, to the first byte", func(r loadgen.Result) loadgen.Percentiles { return r.FirstByte }},
		{"streams, to the last byte", func(r loadgen.Result) loadgen.Percentiles { return r.Stream }},
	} {
		fmt.Fprintf(p.out, "\n%s:\n", part.title)
		rows := p.results.summary(part.pick)
		for _, t := range p.rig.targets {
			printOverhead(p.out, t.name, rows)
		}
	}
	fmt.Fprintf(p.out, "\nstreamed chunks, each from the mock's write to the client's read (the columns are per chunk):\n")
	rows := p.results.summary(func(r loadgen.Result) loadgen.Percentiles { return r.Chunk })
	for _, t := range p.rig.targets {
		printChunks(p.out, t.name, rows)
	}
	if p.c.Rounds > 1 && p.rig.edge != nil {
		fmt.Fprintf(p.out, "edge added per-chunk p99 in ms, over direct/over weir, round by round: %s\n", roundChunks(p.results))
	}
}

// printCosts prints the latency tables' legend, then the cost table.
func (p overheadReport) printCosts() {
	if !p.c.MaxRPS {
		fmt.Fprint(p.out, "(late: sent more than 5ms behind schedule; ")
	} else {
		fmt.Fprint(p.out, "(")
	}
	fmt.Fprintln(p.out, "others: cores that other programs kept busy meanwhile, well above 0 means a disturbed run)")
	fmt.Fprintln(p.out, "rss MB: the target's resident memory at the end of its measured phase, from /proc (VmRSS; anon, its part not mapped from the binary's file, RssAnon; hwm, its peak so far, VmHWM): a target in processes of its own, theirs; one in this process (*), this whole process's, which the load generator, the mock and every target in it share")
	fmt.Fprintf(p.out, "\ncost per request, this process (load generator + mock + any target in it) and the target's own processes, over the measured window:\n")
	rows := p.costs.summary(latency)
	p.rig.withMem(rows, false)
	for _, t := range p.rig.targets {
		printCost(p.out, t.name, rows)
	}
}

// printFailures prints, after a blank line, each target's failed
// requests over all the rounds, by cause, and with OverheadConfig.Interleave
// the cost pass's.
func (p overheadReport) printFailures() {
	fmt.Fprintln(p.out)
	p.printFailuresOf("", p.results)
	if p.c.Interleave {
		p.printFailuresOf("cost pass: ", p.costs)
	}
}

// printFailuresOf prints each target's failed requests in results, by
// cause, each line after prefix.
func (p overheadReport) printFailuresOf(prefix string, results overheadResults) {
	for _, t := range p.rig.targets {
		failed := map[string]int{}
		for _, r := range results[t.name] {
			for k, n := range r.Errors {
				failed[k] += n
			}
		}
		if len(failed) > 0 {
			fmt.Fprintf(p.out, "%s%s failures: %s\n", prefix, t.name, failures(failed))
		}
	}
}

// printScopes prints the gateway's scopes that the requests held: every
// request held a lease in all three; the edge target's in the node's
// provider's instead of the platform model's.
func (p overheadReport) printScopes(ctx context.Context) {
	rig := p.rig
	if rig.gateway == nil {
		return // Weir runs as a child (OutOfProcess)
	}
	var scopes []string
	for _, st := range rig.gateway.Scopes(ctx) {
		if st.Name == weir.KeyScope(rig.key.ID) || st.Name == weir.GroupScope(rig.key.Group) || st.Name == weir.PlatformModelScope(chatPM) ||
			rig.edge != nil && st.Name == rig.edge.scope() {
			scopes = append(scopes, fmt.Sprintf("%s (limit %d, mean hold %s)", st.Name, st.Config.Limit, st.MeanHold.Round(time.Microsecond)))
		}
	}
	fmt.Fprintf(p.out, "weir scopes used: %s\n", strings.Join(scopes, ", "))
}

// printBudgetScopes prints, with OverheadConfig.Budgets, the budgets
// target's budget scopes' spend, and fails the run if the run's requests
// settled nothing in one of them.
func (p overheadReport) printBudgetScopes(ctx context.Context) error {
	if p.rig.budgets == nil {
		return nil
	}
	line, err := p.rig.budgets.report(ctx, p.rig)
	fmt.Fprintln(p.out, line)
	return err
}

// printLogWarnings prints the warnings that the edge node and the `weir
// serve` children logged, where they ran.
func (p overheadReport) printLogWarnings() {
	if p.rig.edge != nil {
		if w := p.rig.edge.log.warnings(); w != "" {
			fmt.Fprintf(p.out, "edge node log: %s\n", w)
		}
	}
	if p.rig.fleet != nil {
		if w := p.rig.fleet.warnings(); w != "" {
			fmt.Fprintf(p.out, "fleet log: %s\n", w)
		}
		if w := p.rig.serve.warnings(); w != "" {
			fmt.Fprintf(p.out, "serve log: %s\n", w)
		}
	}
}
