package mock

import (
	"math"
	"time"
)

// rng is one request's private random sequence (splitmix64), seeded from
// Config.Seed and the request's arrival number: no lock on the hot path,
// and the same seed and arrival order give the same decisions.
type rng struct{ state uint64 }

func newRNG(seed, n uint64) rng {
	return rng{state: seed ^ (n * 0xd1342543de82ef95)}
}

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a number in [0, 1).
func (r *rng) float() float64 {
	return float64(r.next()>>11) / (1 << 53)
}

// chance reports true with probability p.
func (r *rng) chance(p float64) bool {
	return p > 0 && r.float() < p
}

// latency samples one request's time to first byte.
func (c *Config) sampleLatency(r *rng) time.Duration {
	base, j := float64(c.Latency), float64(c.LatencyJitter)
	if j == 0 {
		return c.Latency
	}
	var v float64
	switch c.Distribution {
	case Fixed:
		return c.Latency
	case Normal:
		// Box-Muller; 1-u keeps the logarithm's argument in (0, 1].
		u1, u2 := 1-r.float(), r.float()
		v = base + j*math.Sqrt(-2*math.Log(u1))*math.Cos(2*math.Pi*u2)
	case Exponential:
		v = base - j*math.Log(1-r.float())
	default: // Uniform
		v = base + j*(2*r.float()-1)
	}
	if v <= 0 {
		return 0
	}
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(v)
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// appendID appends n base62 characters, like the ids OpenAI hands out.
func (r *rng) appendID(b []byte, n int) []byte {
	x := r.next()
	for i := 0; i < n; i++ {
		if i%10 == 9 {
			x = r.next()
		}
		b = append(b, base62[x%62])
		x /= 62
	}
	return b
}
