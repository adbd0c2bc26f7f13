package gateway

import (
	"sync"
	"time"

	"github.com/weir-gateway/weir"
)

// Cache affinity. A provider's (or a runtime's) prompt cache holds the
// prefixes it saw last: a request that shares one with an earlier request
// is cheaper and faster where that request went. For a model with
// affinity on, the service remembers, per model and per affinity key (a
// prompt_cache_key, a user, or a first message), which candidate served
// last, and puts that candidate first in the next request's order. It
// only orders candidates: the engine still admits the first that fits in
// global order, so affinity never jumps a queue nor breaks a fairness
// rule. A strict model waits for that candidate alone, for up to its
// AffinityWait, before any may serve.

// The affinity table's bounds: how long it remembers (about as long as
// providers keep a prompt cache), and how many keys.
const (
	affinityTTL     = 5 * time.Minute
	affinityMaxKeys = 100_000
	// defaultAffinityWait bounds a strict affinity's wait when the model
	// does not.
	defaultAffinityWait = 2 * time.Second
)

// The results of one request's affinity, as metric labels: served where
// the table said (hit), elsewhere (miss), or with nothing remembered
// (new).
const (
	affinityHit  = "hit"
	affinityMiss = "miss"
	affinityNew  = "new"
)

type affinityEntry struct {
	target string
	at     time.Time
}

// affinityTable remembers the candidate that served each affinity key
// last, bounded in size and age.
type affinityTable struct {
	mu sync.Mutex
	m  map[string]affinityEntry
}

// get is the target that served key last, if within affinityTTL of now.
func (a *affinityTable) get(key string, now time.Time) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[key]
	if !ok || now.Sub(e.at) >= affinityTTL {
		return "", false
	}
	return e.target, true
}

// put remembers that target served key at now. A full table first
// forgets what is past affinityTTL, then, if that is not enough, half of
// what is left (map order: arbitrary keys), so that it stays bounded
// however many keys clients make up.
func (a *affinityTable) put(key, target string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = make(map[string]affinityEntry)
	}
	if _, ok := a.m[key]; !ok && len(a.m) >= affinityMaxKeys {
		for k, e := range a.m {
			if now.Sub(e.at) >= affinityTTL {
				delete(a.m, k)
			}
		}
		for k := range a.m {
			if len(a.m) < affinityMaxKeys/2 {
				break
			}
			delete(a.m, k)
		}
	}
	a.m[key] = affinityEntry{target: target, at: now}
}

// affinityKeyOf is c's key in the table; "" when its model's affinity is
// off or c shares nothing.
func affinityKeyOf(c *Call) string {
	if !c.Model.Affinity.On() || c.Affinity == "" {
		return ""
	}
	return c.Model.Name + "\x00" + c.Affinity
}

// affinityWait is how long a strict affinity waits for its candidate.
func affinityWait(m weir.Model) time.Duration {
	if m.AffinityWait > 0 {
		return m.AffinityWait
	}
	return defaultAffinityWait
}
