// Package router decides, for one request, the order in which a public
// model's candidates are tried: by priority, spread by weight among equal
// priorities, with candidates in cooldown left out. It also keeps the health
// evidence behind cooldowns: consecutive upstream failures put a platform
// model in cooldown; a success (or the first request after the cooldown, a
// probe that succeeds) brings it back.
package router

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/weir-gateway/weir"
	"github.com/weir-gateway/weir/clock"
)

// Options configure a Router.
type Options struct {
	Clock clock.Clock
	// Failures is how many consecutive failures start a cooldown. Default 3.
	Failures int
	// Cooldown is how long a failing candidate is left out. Default 30s.
	Cooldown time.Duration
	// Rand picks among equal priorities by weight; default a random source.
	Rand *rand.Rand
}

// Router is safe for concurrent use.
type Router struct {
	mu     sync.Mutex
	opts   Options
	health map[string]*health
}

type health struct {
	consecutive int
	until       time.Time
}

// New returns a Router.
func New(opts Options) *Router {
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.Failures <= 0 {
		opts.Failures = 3
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = 30 * time.Second
	}
	if opts.Rand == nil {
		opts.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Router{opts: opts, health: make(map[string]*health)}
}

// Order returns the platform models to try for m, best first. Candidates in
// cooldown are left out; if every candidate is cooling down, the one whose
// cooldown ends first is offered alone, so that a request is a probe rather
// than a certain failure.
func (r *Router) Order(m weir.Model) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The time, read at the first candidate with a health record: a
	// gateway whose platform models all answer well keeps none.
	var now time.Time
	// The candidates are ordered in a copy, on the stack for a model of
	// up to eight.
	var buf [8]weir.Candidate
	cands := append(buf[:0], m.Candidates...)
	slices.SortStableFunc(cands, func(a, b weir.Candidate) int { return b.Priority - a.Priority })
	out := make([]string, 0, len(cands))
	var soonest string
	var soonestAt time.Time
	for i := 0; i < len(cands); {
		j := i
		for j < len(cands) && cands[j].Priority == cands[i].Priority {
			j++
		}
		r.shuffleByWeightLocked(cands[i:j])
		for _, c := range cands[i:j] {
			if h := r.health[c.PlatformModel]; h != nil {
				if now.IsZero() {
					now = r.opts.Clock.Now()
				}
				if now.Before(h.until) {
					if soonest == "" || h.until.Before(soonestAt) {
						soonest, soonestAt = c.PlatformModel, h.until
					}
					continue
				}
			}
			out = append(out, c.PlatformModel)
		}
		i = j
	}
	if len(out) == 0 && soonest != "" {
		out = append(out, soonest)
	}
	return out
}

// shuffleByWeightLocked orders equal-priority candidates by a weighted
// random draw without replacement (weight 0 counts as 1).
func (r *Router) shuffleByWeightLocked(cs []weir.Candidate) {
	if len(cs) < 2 {
		return
	}
	for i := range cs {
		total := 0
		for _, c := range cs[i:] {
			total += max(c.Weight, 1)
		}
		pick := r.opts.Rand.IntN(total)
		for j := i; j < len(cs); j++ {
			pick -= max(cs[j].Weight, 1)
			if pick < 0 {
				cs[i], cs[j] = cs[j], cs[i]
				break
			}
		}
	}
}

// Success records a good answer from pm, ending any cooldown.
func (r *Router) Success(pm string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.health, pm)
}

// Failure records a failed call to pm (429, 5xx, connect error, timeout).
// It reports whether pm went into cooldown.
func (r *Router) Failure(pm string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.health[pm]
	if h == nil {
		h = &health{}
		r.health[pm] = h
	}
	h.consecutive++
	if h.consecutive >= r.opts.Failures {
		h.until = r.opts.Clock.Now().Add(r.opts.Cooldown)
		return true
	}
	return false
}

// CoolingUntil reports when pm's cooldown ends (zero if it is not cooling).
func (r *Router) CoolingUntil(pm string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.health[pm]; h != nil && r.opts.Clock.Now().Before(h.until) {
		return h.until
	}
	return time.Time{}
}
