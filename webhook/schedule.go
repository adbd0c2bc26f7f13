package webhook

import (
	"math/rand/v2"
	"time"
)

// Schedule is a retry schedule: the delays before the second, third, ...
// attempts, each moved by a random jitter so that many deliveries failing
// together do not all come back at the same instant.
type Schedule struct {
	// Delays[i] is the wait after attempt i+1 fails, before attempt i+2.
	// The number of attempts is len(Delays)+1. No default: an empty
	// schedule allows one attempt.
	Delays []time.Duration
	// Jitter is the fraction by which each delay is moved at random, up or
	// down: 0.1 gives delay×[0.9, 1.1). Default 0, no jitter.
	Jitter float64
	// Rand, if set, supplies the jitter, so that a test seeding it gets the
	// same delays each run. A *rand.Rand is not safe for concurrent use;
	// share a Schedule that has one only under a lock. Default nil: the
	// math/rand/v2 top-level source, which is safe for concurrent use.
	Rand *rand.Rand
}

// DefaultSchedule is the schedule Weir uses: 12 attempts over about 51 hours
// 43 minutes (without jitter), quick at first for blips, then hours apart for
// outages, spanning two days as the Standard Webhooks guidance advises.
var DefaultSchedule = Schedule{
	Delays: []time.Duration{
		5 * time.Second,
		30 * time.Second,
		2 * time.Minute,
		10 * time.Minute,
		30 * time.Minute,
		1 * time.Hour,
		2 * time.Hour,
		4 * time.Hour,
		8 * time.Hour,
		12 * time.Hour,
		24 * time.Hour,
	},
	Jitter: 0.1,
}

// MaxAttempts is the number of attempts the schedule allows, the first
// included.
func (s Schedule) MaxAttempts() int { return len(s.Delays) + 1 }

// NextDelay says how long to wait before the next attempt, given how many
// attempts have been made (and failed) so far; ok is false when the
// schedule is exhausted and the delivery should be given up. With no
// attempt made yet (attempts ≤ 0) the answer is "at once". When a response
// carried Retry-After, wait the longer of the two.
func (s Schedule) NextDelay(attempts int) (delay time.Duration, ok bool) {
	if attempts <= 0 {
		return 0, true
	}
	if attempts > len(s.Delays) {
		return 0, false
	}
	d := s.Delays[attempts-1]
	if s.Jitter > 0 {
		var u float64
		if s.Rand != nil {
			u = s.Rand.Float64()
		} else {
			u = rand.Float64()
		}
		d = time.Duration(float64(d) * (1 + s.Jitter*(2*u-1)))
	}
	return d, true
}
