package bench

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/weir-gateway/weir/loadgen"
)

// driveInterleaved drives rig's targets together, c.Rounds times: one open
// loop at c.Rate whose requests go to each target in turn
// (loadgen.RunInterleaved), so that every target is measured over the same
// seconds of the machine's state and what each adds over direct moves
// with it no more than direct does. It prints each round's table once the
// round is measured and returns each target's results, a round each.
func (c OverheadConfig) driveInterleaved(ctx context.Context, out io.Writer, rig *overheadRig) (overheadResults, error) {
	cfg := c.loadConfig()
	results := overheadResults{}
	for round := 1; round <= c.Rounds; round++ {
		if err := c.beginRound(ctx, out, rig, round); err != nil {
			return nil, err
		}
		targets := make([]loadgen.Target, len(rig.targets))
		for i, t := range rig.targets {
			targets[i] = t.load()
		}
		var (
			res []loadgen.Result
			err error
		)
		labelled(ctx, "loadgen", func(ctx context.Context) { res, err = loadgen.RunInterleaved(ctx, cfg, targets) })
		if err != nil {
			return nil, fmt.Errorf("interleaved round %d: %w", round, err)
		}
		rows := map[string]row{}
		var shares []string
		for i, t := range rig.targets {
			results[t.name] = append(results[t.name], res[i])
			rows[t.name] = rowOf(res[i], latency)
			shares = append(shares, fmt.Sprintf("%s %d", t.name, res[i].Requests))
		}
		for _, t := range rig.targets {
			c.printLatencyLine(out, t.name, rows)
		}
		fmt.Fprintf(out, "requests measured: %s\n", strings.Join(shares, ", "))
	}
	return results, nil
}

// costPass drives each of rig's targets alone, in turn, once, as the
// rounds do without c.Interleave, and returns their results for the cost
// table: CPU time and allocations are counted for the whole process, so a
// window the targets share cannot say which spent what. It prints each
// target's latency line as it goes, for comparison with the interleaved
// tables; --cpuprofile and its kind cover the profiled target's phase
// here.
func (c OverheadConfig) costPass(ctx context.Context, out io.Writer, rig *overheadRig) (overheadResults, error) {
	fmt.Fprintf(out, "\ncost pass, each target alone in turn at %.0f req/s (the costs below come from it; its latencies are not interleaved):\n", c.Rate)
	costs := overheadResults{}
	rows := map[string]row{}
	for _, t := range rig.targets {
		res, err := c.drive(ctx, t, 1)
		if err != nil {
			return nil, fmt.Errorf("cost pass: %w", err)
		}
		costs[t.name] = []loadgen.Result{res}
		rows[t.name] = rowOf(res, latency)
		rig.withMem(rows, true)
		c.printLatencyLine(out, t.name, rows)
	}
	return costs, nil
}
