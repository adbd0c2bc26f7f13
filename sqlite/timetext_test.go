package sqlite

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendTime: appendTime writes what AppendFormat writes with
// timeLayout, for times to the nanosecond in any zone, at the ends of
// the years it writes itself and past them.
func TestAppendTime(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("x", -(7*3600 + 30*60))
	times := []time.Time{
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 7, 17, 4, 5, 123_456_789, zone),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 1_000, time.UTC),
		time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(1_700_000_000, 5).Add(time.Hour), // monotonic-free, Local
		time.Now(), // with a monotonic reading
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		times = append(times, time.Unix(r.Int64N(400*365*86400)-200*365*86400, r.Int64N(1e9)).In(zone))
	}
	for _, at := range times {
		want := at.UTC().Truncate(time.Microsecond).Format(timeLayout)
		if got := string(appendTime([]byte("x"), at)); got != "x"+want {
			t.Errorf("appendTime(%v) = %q, want %q", at, got[1:], want)
		}
	}
}
