package metrics

import "sync"

// maxChildren is the most label sets a children cache holds: far more
// than a catalog's endpoints, models and outcomes make, and a bound on
// the memory should a label take values without end. Label sets past
// it are looked up in their vector at each observation.
const maxChildren = 4096

// children caches a metric vector's children by their label values, so
// that an observation on the request path is one map look-up: the
// vector's WithLabelValues validates and hashes every value each time.
// A child is made only when the vector would have made it, at its first
// observation; the vectors whose children are cached are never Reset
// nor have children deleted, which would leave the cache holding
// children no longer exported.
type children[K comparable, M any] struct {
	mu   sync.RWMutex
	m    map[K]M
	with func(K) M // the vector's child for a key
}

func newChildren[K comparable, M any](with func(K) M) *children[K, M] {
	return &children[K, M]{m: make(map[K]M), with: with}
}

// get returns k's child.
func (c *children[K, M]) get(k K) M {
	c.mu.RLock()
	child, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return child
	}
	child = c.with(k)
	c.mu.Lock()
	if len(c.m) < maxChildren {
		c.m[k] = child
	}
	c.mu.Unlock()
	return child
}
