package admission

import "math"

// bucket is a token bucket of perMinute tokens refilled evenly over a
// minute, read and changed at explicit times (Unix nanoseconds).
//
// golang.org/x/time/rate has the same arithmetic but cannot give tokens
// back, and Reconcile must refund a reservation that over-estimated; this is
// the dozen lines that adds.
type bucket struct {
	perMinute int64
	level     float64
	at        int64
}

const nanosPerMinute = 60e9

func (b *bucket) configure(perMinute int64, now int64) {
	if perMinute == b.perMinute {
		return
	}
	if b.perMinute == 0 {
		b.level = float64(perMinute)
	} else {
		b.refill(now)
		b.level = math.Min(b.level, float64(perMinute))
	}
	b.perMinute = perMinute
	b.at = now
}

func (b *bucket) refill(now int64) {
	if now <= b.at {
		return
	}
	b.level = math.Min(float64(b.perMinute), b.level+float64(now-b.at)*float64(b.perMinute)/nanosPerMinute)
	b.at = now
}

// has reports whether n tokens are there now; if not, wake says when.
func (b *bucket) has(now int64, n float64) (ok bool, wake int64) {
	b.refill(now)
	if b.level >= n {
		return true, 0
	}
	if n > float64(b.perMinute) {
		// Never enough; look again in a minute in case the limit changes.
		return false, now + int64(nanosPerMinute)
	}
	missing := n - b.level
	return false, now + int64(math.Ceil(missing*nanosPerMinute/float64(b.perMinute)))
}

// drain takes n tokens, or as many as there are: a shadow scope admits
// whatever the level, and a bucket in deep debt would stop it for long
// once it enforces.
func (b *bucket) drain(now int64, n float64) {
	b.refill(now)
	if b.level > 0 {
		b.level = max(0, b.level-n)
	}
}

// add gives back (n > 0) or charges (n < 0) tokens; a charge may leave the
// bucket in debt.
func (b *bucket) add(now int64, n float64) {
	b.refill(now)
	b.level = math.Min(float64(b.perMinute), b.level+n)
}
