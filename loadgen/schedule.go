package loadgen

import (
	"context"
	"math"
	"time"
)

// Schedule is an open loop's fixed timetable: request i is due at
// Start + i/Rate.
type Schedule struct {
	Start time.Time
	Rate  float64 // requests per second, > 0
}

// Offset is how long after Start request i is due.
func (s Schedule) Offset(i int) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / s.Rate)
}

// Due is when request i is due.
func (s Schedule) Due(i int) time.Time { return s.Start.Add(s.Offset(i)) }

// Count is how many requests fall due in the first d of the schedule: those
// with Offset(i) < d.
func (s Schedule) Count(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	n := int(math.Ceil(d.Seconds() * s.Rate))
	// Float rounding may land one off either way; settle it on Offset.
	for n > 0 && s.Offset(n-1) >= d {
		n--
	}
	for s.Offset(n) < d {
		n++
	}
	return n
}

// streams reports whether request i of a run is a streaming one when a
// fraction f of them are: the streaming requests are spread evenly, so any
// window of the run holds its share (every fifth request for 0.2).
func streams(i int, f float64) bool {
	if f <= 0 {
		return false
	}
	if f >= 1 {
		return true
	}
	return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
}

// Clock is the generator's time source. Tests pass a fake one; the default
// is the wall clock.
type Clock interface {
	Now() time.Time
	// SleepUntil returns once t has come, or with ctx's error if ctx ends
	// first.
	SleepUntil(ctx context.Context, t time.Time) error
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
