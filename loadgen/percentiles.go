package loadgen

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentiles summarises a set of durations.
type Percentiles struct {
	N                  int
	Mean               time.Duration
	P50, P90, P99, Max time.Duration
}

// Summarize returns the nearest-rank percentiles of samples (the p-th
// percentile is the smallest sample with at least p% of the samples at or
// below it). It sorts samples in place. No samples give all zeros.
func Summarize(samples []time.Duration) Percentiles {
	n := len(samples)
	if n == 0 {
		return Percentiles{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return Percentiles{
		N:    n,
		Mean: sum / time.Duration(n),
		P50:  rank(samples, 50),
		P90:  rank(samples, 90),
		P99:  rank(samples, 99),
		Max:  samples[n-1],
	}
}

// rank is the nearest-rank p-th percentile of sorted.
func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (p Percentiles) String() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", p.N, p.P50, p.P90, p.P99, p.Max)
}
