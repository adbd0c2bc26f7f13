package bench

import (
	"slices"
	"time"
)

// leaseSpan is one task's hold of a worker: from its admission to its
// end.
type leaseSpan struct{ from, to time.Time }

// idleShares splits the worker capacity that stood idle during a drain
// from start to end, as shares of capacity × (end − start), by when it
// stood idle: in the ramp (until the workers were first all held), in
// the tail (after the last admission: nothing was left to admit) and
// between tasks (the rest: a task's end until the next admission).
func idleShares(spans []leaseSpan, capacity int, start, end time.Time) (ramp, between, tail float64) {
	if len(spans) == 0 || capacity <= 0 || !end.After(start) {
		return 0, 0, 0
	}
	type edge struct {
		at time.Time
		d  int
	}
	edges := make([]edge, 0, 2*len(spans))
	lastAdmit := spans[0].from
	for _, s := range spans {
		edges = append(edges, edge{s.from, 1}, edge{s.to, -1})
		if s.from.After(lastAdmit) {
			lastAdmit = s.from
		}
	}
	// Ends before admissions at the same instant: a release hands its
	// worker on.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d
	})
	var idle [3]time.Duration // ramp, between, tail, in worker-time
	phase, held, prev := 0, 0, start
	add := func(until time.Time) {
		if until.After(end) {
			until = end
		}
		if until.After(prev) {
			idle[phase] += time.Duration(capacity-held) * until.Sub(prev)
			prev = until
		}
	}
	for _, e := range edges {
		if phase < 2 && e.at.After(lastAdmit) {
			add(lastAdmit)
			phase = 2
		}
		add(e.at)
		held += e.d
		if phase == 0 && held >= capacity {
			phase = 1
		}
	}
	add(end)
	total := float64(time.Duration(capacity) * end.Sub(start))
	return float64(idle[0]) / total, float64(idle[1]) / total, float64(idle[2]) / total
}
