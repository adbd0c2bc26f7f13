package bench

import (
	"math"
	"testing"
	"time"
)

func TestIdleShares(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Two workers over 10 s (20 worker-seconds): the second is first
	// held at 1 s (1 worker-second idle in the ramp); a worker waits
	// 0.5 s between two tasks; after the last admission, at 6 s, one
	// worker is idle from 8 s and both from 9 s to the end (3 worker-
	// seconds).
	spans := []leaseSpan{
		{at(0), at(4000)},
		{at(1000), at(5000)},
		{at(4500), at(9000)},
		{at(6000), at(8000)},
	}
	ramp, between, tail := idleShares(spans, 2, at(0), at(10000))
	// Between: 4.0–4.5 s one idle (0.5), 5.0–6.0 s one idle (1.0).
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"ramp", ramp, 1.0 / 20}, {"between", between, 1.5 / 20}, {"tail", tail, 3.0 / 20}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s idle %.4f, want %.4f", c.name, c.got, c.want)
		}
	}
}
