package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// RunInterleaved drives targets together on one open loop at cfg.Rate
// (cfg.Target is left unused), so that each target's figures come from the
// same seconds of the machine's state as the others': the requests are
// dealt to the targets in turns, a turn being one request to every target
// in an order shuffled afresh each turn. Each target thus gets
// cfg.Rate/len(targets) requests a second. The warm-up and the measured
// window are rounded up to whole turns, so every target has the same
// number of measured requests. It returns a Result per target, in
// targets' order; their Process is the whole process's over the window,
// the same in each, since the targets' costs cannot be told apart there.
// It needs an open loop: cfg.Rate > 0.
func RunInterleaved(ctx context.Context, cfg Config, targets []Target) ([]Result, error) {
	switch {
	case len(targets) == 0:
		return nil, errors.New("loadgen: no targets to interleave")
	case cfg.Rate <= 0:
		return nil, errors.New("loadgen: interleaved targets need an open loop (a positive rate)")
	}
	for i := range targets {
		if err := targets[i].validate(); err != nil {
			return nil, fmt.Errorf("target %d: %w", i, err)
		}
	}
	return run(ctx, cfg, targets)
}

// turns deals an open loop's requests to n targets: each turn of n
// requests gives every target one, in an order shuffled afresh each turn,
// so that no target is always first after the pause between turns nor
// always follows the same one. The shuffle is seeded: a run's order is
// the same every time.
type turns struct {
	order []int
	at    int // the next request's place in order
	rng   *rand.Rand
}

func newTurns(n int) *turns {
	t := &turns{order: make([]int, n), at: n, rng: rand.New(rand.NewPCG(1, uint64(n)))}
	for i := range t.order {
		t.order[i] = i
	}
	return t
}

// next is the target of the next request.
func (t *turns) next() int {
	if t.at == len(t.order) {
		t.rng.Shuffle(len(t.order), func(i, j int) { t.order[i], t.order[j] = t.order[j], t.order[i] })
		t.at = 0
	}
	t.at++
	return t.order[t.at-1]
}

// wholeTurns is k rounded up to a multiple of n.
func wholeTurns(k, n int) int { return (k + n - 1) / n * n }

// summarizeEach summarizes samples target by target.
func (g *generator) summarizeEach(samples []sample) []Result {
	if len(g.targets) == 1 {
		return []Result{g.summarize(samples)}
	}
	each := make([][]sample, len(g.targets))
	for _, s := range samples {
		each[s.target] = append(each[s.target], s)
	}
	results := make([]Result, len(each))
	for t := range each {
		results[t] = g.summarize(each[t])
	}
	return results
}
