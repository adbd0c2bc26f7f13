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
)

type nameKey struct {
	kind scopeKind
	name string
}

type nameTable struct {
	mu sync.RWMutex
	m  map[nameKey]string
}

// get is the scope of kind for name, as the weir package names it.
func (t *nameTable) get(kind scopeKind, name string) string {
	k := nameKey{kind, name}
	t.mu.RLock()
	s, ok := t.m[k]
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
	if t.m == nil || len(t.m) >= maxScopeNames {
		t.m = make(map[nameKey]string)
	}
	t.m[k] = s
	t.mu.Unlock()
	return s
}
