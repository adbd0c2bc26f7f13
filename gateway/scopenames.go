package gateway

import (
	"sync"

	"github.com/weir-gateway/weir"
)

// scopeNames interns the names of the scopes every request needs — its
// key's, its group's and its platform models' — so that each is built
// once per process rather than once per candidate of every request.
var scopeNames nameTable

// maxScopeNames bounds the table; past it, it starts again empty.
const maxScopeNames = 100_000

// scopeKind is which scope of a name a nameTable entry is.
type scopeKind uint8

const (
	keyScopeKind scopeKind = iota
	groupScopeKind
	pmScopeKind
	scopeKinds // the number of kinds
)

// nameTable holds a map of names a kind, keyed by the name alone: a
// look-up hashes a string, which the runtime does faster than a struct.
type nameTable struct {
	mu sync.RWMutex
	m  [scopeKinds]map[string]string
	n  int // names held, of every kind
}

// get is the scope of kind for name, as the weir package names it.
func (t *nameTable) get(kind scopeKind, name string) string {
	t.mu.RLock()
	s, ok := t.m[kind][name]
	t.mu.RUnlock()
	if ok {
		return s
	}
	switch kind {
	case keyScopeKind:
		s = weir.KeyScope(name)
	case groupScopeKind:
		s = weir.GroupScope(name)
	default:
		s = weir.PlatformModelScope(name)
	}
	t.mu.Lock()
	if t.n >= maxScopeNames {
		t.m, t.n = [scopeKinds]map[string]string{}, 0
	}
	if t.m[kind] == nil {
		t.m[kind] = make(map[string]string)
	}
	if _, ok := t.m[kind][name]; !ok {
		t.m[kind][name] = s
		t.n++
	}
	t.mu.Unlock()
	return s
}
